package service

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJobGPU: a running job's history holds its own GPUs only, each with
// its mean, and their mean step by step; a pending job has none; a
// cluster without Prometheus says so.
func TestJobGPU(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910101/gpu", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	type series struct {
		GPU      string   `json:"gpu"`
		MeanUtil *float64 `json:"mean_util"`
		Points   []struct {
			Util float64 `json:"util"`
		} `json:"points"`
	}
	var got struct {
		Source      string   `json:"source"`
		StepSeconds int64    `json:"step_seconds"`
		Mean        series   `json:"mean"`
		GPUs        []series `json:"gpus"`
		Missing     []string `json:"missing"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	short := func(s series) []float64 {
		out := []float64{*s.MeanUtil}
		for _, p := range s.Points {
			out = append(out, p.Util)
		}
		return out
	}
	gpus := map[string][]float64{}
	for _, s := range got.GPUs {
		gpus[s.GPU] = short(s)
	}
	// The job ran 10 minutes: 2 s steps keep it to 300 points.
	if got.Source != "prometheus" || got.StepSeconds != 2 || len(got.Missing) != 0 {
		t.Errorf("history: %s", body)
	}
	if diff := cmp.Diff(map[string][]float64{"gpu1:0": {90, 80, 90, 100}, "gpu1:1": {1, 0, 0, 3}}, gpus); diff != "" {
		t.Errorf("GPUs (mean, points) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{45.5, 40, 45, 51.5}, short(got.Mean)); diff != "" {
		t.Errorf("mean (-want +got):\n%s", diff)
	}
	for path, want := range map[string]int{
		"/v1/jobs/gpu1/910102/gpu": 404, // pending: no GPUs yet
		"/v1/jobs/gpu2/920201/gpu": 503, // a cluster without Prometheus
		"/v1/jobs/gpu1/910104/gpu": 404, // globex's
	} {
		if code, body := h.do("mem", "GET", path, nil); code != want {
			t.Errorf("GET %s = %d, want %d: %s", path, code, want, body)
		}
	}
	if code, body := h.do("gmem", "GET", "/v1/jobs/gpu2/920202/gpu", nil); code != 503 {
		t.Errorf("a job of a cluster without Prometheus: %d %s", code, body)
	}
}

// TestOverviewGPUUse: of the allocated GPUs, those in use and those idle
// now, by cluster and tenant, with the idle ones' jobs; a tenant's admin
// sees their tenant's alone.
func TestOverviewGPUUse(t *testing.T) {
	h := newHarness(t)
	type use struct {
		InUse     int `json:"in_use"`
		Idle      int `json:"idle"`
		NoSamples int `json:"no_samples"`
		IdleGPUs  []struct {
			JobID int64   `json:"job_id"`
			GPU   string  `json:"gpu"`
			Util  float64 `json:"util"`
		} `json:"idle_gpus"`
	}
	type overview struct {
		Clusters []struct {
			Cluster string `json:"cluster"`
			GPUUse  *use   `json:"gpu_use"`
			Tenants []struct {
				Tenant string `json:"tenant"`
				GPUUse *use   `json:"gpu_use"`
			} `json:"tenants"`
		} `json:"clusters"`
	}
	for user, want := range map[string]map[string]string{
		// gpu1's running jobs (acme's, globex's and one outside the
		// policy) each hold gpu1:0, busy, and gpu1:1, idle.
		"ops": {"gpu1": "3 in use, 3 idle, 0 no samples, idle [910101 gpu1:1 0.25, 910104 gpu1:1 0.25, 910106 gpu1:1 0.25]",
			"gpu1/acme": "1 in use, 1 idle, 0 no samples, idle [910101 gpu1:1 0.25]", "gpu1/globex": "1 in use, 1 idle, 0 no samples, idle [910104 gpu1:1 0.25]",
			"gpu1/": "1 in use, 1 idle, 0 no samples, idle [910106 gpu1:1 0.25]"},
		"tadmin": {"gpu1": "1 in use, 1 idle, 0 no samples, idle [910101 gpu1:1 0.25]", "gpu1/acme": "1 in use, 1 idle, 0 no samples, idle [910101 gpu1:1 0.25]"},
	} {
		code, body := h.do(user, "GET", "/v1/overview", nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", user, code, body)
		}
		var o overview
		if err := json.Unmarshal(body, &o); err != nil {
			t.Fatal(err)
		}
		show := func(u *use) string {
			if u == nil {
				return ""
			}
			s := ""
			for i, g := range u.IdleGPUs {
				if i > 0 {
					s += ", "
				}
				s += fmt.Sprintf("%d %s %g", g.JobID, g.GPU, g.Util)
			}
			return fmt.Sprintf("%d in use, %d idle, %d no samples, idle [%s]", u.InUse, u.Idle, u.NoSamples, s)
		}
		got := map[string]string{}
		for _, c := range o.Clusters {
			if s := show(c.GPUUse); s != "" {
				got[c.Cluster] = s
			}
			for _, to := range c.Tenants {
				if s := show(to.GPUUse); s != "" {
					got[c.Cluster+"/"+to.Tenant] = s
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: GPU use (-want +got):\n%s", user, diff)
		}
	}
	// One question to Prometheus per cluster, however many overviews.
	if n := h.prometheusQueries.Load(); n != 1 {
		t.Errorf("%d queries to Prometheus for two overviews", n)
	}
}
