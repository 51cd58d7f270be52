//go:build integration

package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/promtest"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// dcgmExposition is what dcgm-exporter serves for node gpu1: GPU 0 busy
// (twice, as a site whose pods add a label), GPU 1 idle, GPU 2 busy but
// of no job of the test.
const dcgmExposition = `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu1"} 80
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu1",pod="x"} 80
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-1b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu1"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-2c",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu1"} 55
`

// TestIntegrationGPUUse: a real Prometheus scrapes a dcgm-exporter's
// exposition every second; the portal's history of a job on gpu1:0 and
// gpu1:1 holds those two GPUs alone, a point a second, and the overview
// counts one in use and one idle.
func TestIntegrationGPUUse(t *testing.T) {
	bin := promtest.Bin(t)
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		io.WriteString(w, dcgmExposition)
	}))
	defer exporter.Close()
	start := time.Now().Truncate(time.Second)
	prom := promtest.Start(t, bin, fmt.Sprintf("  - job_name: dcgm\n    static_configs:\n      - targets: [%q]\n",
		strings.TrimPrefix(exporter.URL, "http://")))
	promtest.WaitScrapes(t, prom, `count_over_time(up{job="dcgm"}[1m]) >= 6`, 1, 45*time.Second)

	m, err := tenantmap.Load("testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	bed := clustertest.New(t, "26.05", clustertest.Job{ID: 1, User: "mem", Account: "acme-llm", StartTime: start.Unix()})
	reg := prometheus.NewRegistry()
	p := cluster.New(cluster.Config{Name: "c", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
		Metrics: cluster.NewMetrics(reg)})
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens := map[string]string{}
	for _, u := range []string{"mem", "ops", "gmem"} {
		if tokens[u], _, err = st.CreateToken(t.Context(), u, "", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m },
		Prometheus: &Prometheus{URL: prom, Step: time.Second, Window: 3 * time.Second}}},
		Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st, Registry: reg}))
	defer srv.Close()
	get := func(user, path string, v any) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokens[user])
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if v != nil {
			if err := json.Unmarshal(body, v); err != nil {
				t.Fatalf("%s: %v: %s", path, err, body)
			}
		}
		t.Logf("GET %s as %s: %d %s", path, user, resp.StatusCode, body)
		return resp.StatusCode
	}

	var hist struct {
		StepSeconds int64 `json:"step_seconds"`
		GPUs        []struct {
			GPU      string  `json:"gpu"`
			MeanUtil float64 `json:"mean_util"`
			Points   []struct {
				Util float64 `json:"util"`
			} `json:"points"`
		} `json:"gpus"`
		Missing []string `json:"missing"`
	}
	if code := get("mem", "/v1/jobs/c/1/gpu", &hist); code != 200 {
		t.Fatalf("GET gpu = %d", code)
	}
	got := map[string]float64{}
	for _, g := range hist.GPUs {
		got[g.GPU] = g.MeanUtil
		if len(g.Points) < 4 {
			t.Errorf("%s: %d points over %s", g.GPU, len(g.Points), time.Since(start))
		}
	}
	if hist.StepSeconds != 1 || len(got) != 2 || got["gpu1:0"] != 80 || got["gpu1:1"] != 0 || len(hist.Missing) != 0 {
		t.Errorf("history: step %d, GPUs %v, missing %v", hist.StepSeconds, got, hist.Missing)
	}
	if code := get("gmem", "/v1/jobs/c/1/gpu", nil); code != 404 {
		t.Errorf("another tenant's job's GPUs: %d", code)
	}

	var o struct {
		Clusters []struct {
			GPUUse struct {
				InUse     int `json:"in_use"`
				Idle      int `json:"idle"`
				NoSamples int `json:"no_samples"`
			} `json:"gpu_use"`
		}
	}
	if code := get("ops", "/v1/overview", &o); code != 200 || len(o.Clusters) != 1 {
		t.Fatalf("overview = %d", code)
	}
	if u := o.Clusters[0].GPUUse; u.InUse != 1 || u.Idle != 1 || u.NoSamples != 0 {
		t.Errorf("GPUs now: %+v, want 1 in use, 1 idle", u)
	}
}
