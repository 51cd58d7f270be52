package service

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// finishedJobs sets slurmdbd's record of both clusters: on gpu1 a two-GPU
// job of mem's that ran an hour (2 GPU-hours), one each of globex, of
// acme's vision, of an account outside the policy, and one of mem's ten
// days old; on gpu2 a one-GPU job of mem's.
func finishedJobs(h *harness) {
	now := h.now.Unix()
	h.beds["gpu1"].SetFinished(
		clustertest.Finished{ID: 930001, User: "mem", Account: "acme-llm", Name: "llm-done", Submit: now - 7300, Start: now - 7200, End: now - 3600, GPUs: 2},
		clustertest.Finished{ID: 930002, User: "gmem", Account: "globex-rl", Name: "globex-done", State: "FAILED", Submit: now - 4000, Start: now - 3900, End: now - 1800, GPUs: 4},
		clustertest.Finished{ID: 930003, User: "vmem", Account: "acme-vision", Name: "vision-done", Submit: now - 4000, Start: now - 3600, End: now - 600, GPUs: 1},
		clustertest.Finished{ID: 930004, User: "stranger", Account: "orphan", Name: "orphan-done", Submit: now - 4000, Start: now - 3600, End: now - 600},
		clustertest.Finished{ID: 930005, User: "mem", Account: "acme-llm", Name: "llm-old", Submit: now - 10*86400 - 100, Start: now - 10*86400, End: now - 10*86400 + 1800, GPUs: 8},
	)
	h.beds["gpu2"].SetFinished(
		clustertest.Finished{ID: 940001, User: "mem", Account: "acme-llm", Name: "llm-gpu2", Submit: now - 2000, Start: now - 1800, End: now - 900, GPUs: 1},
	)
}

func history(t *testing.T, h *harness, user, query string) (int, api.JobHistory, string) {
	t.Helper()
	code, body := h.do(user, "GET", "/v1/jobs/history"+query, nil)
	var out api.JobHistory
	if code == 200 {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
	}
	return code, out, string(body)
}

func ids(jobs []api.FinishedJob) []int64 {
	var out []int64
	for _, j := range jobs {
		out = append(out, j.Id)
	}
	return out
}

// TestJobHistory: each caller sees the finished jobs they may read as
// live jobs (rbac's "read project jobs"), latest end first, from both
// releases' slurmdbd; slurmdbd is asked for those accounts alone; the
// GPU-hours are the elapsed hours times the GPUs, and the mean
// utilisation is Prometheus's where the cluster has one.
func TestJobHistory(t *testing.T) {
	h := newHarness(t)
	finishedJobs(h)
	for user, want := range map[string][]int64{
		"mem":    {940001, 930001},
		"view":   {940001, 930001},
		"tadmin": {930003, 940001, 930001},
		"ops":    {930004, 930003, 940001, 930002, 930001},
		"gmem":   {930002},
		"nobody": nil,
	} {
		code, got, body := history(t, h, user, "")
		if code != 200 || !slices.Equal(ids(got.Jobs), want) {
			t.Errorf("%s: %d, jobs %v, want %v: %s", user, code, ids(got.Jobs), want, body)
		}
		if user == "gmem" && (strings.Contains(body, "llm-") || strings.Contains(body, "acme")) {
			t.Errorf("gmem's history holds acme's jobs: %s", body)
		}
	}
	_, got, _ := history(t, h, "mem", "")
	j := got.Jobs[1]
	if j.Id != 930001 || j.GpuHours != 2 || j.Gpus != 2 || j.ElapsedSeconds != 3600 || j.State != "COMPLETED" ||
		j.Project != "llm" || j.Tenant != "acme" || j.MeanUtil == nil || *j.MeanUtil != 42.3 || j.Cluster != "gpu1" {
		t.Errorf("930001: %+v", j)
	}
	if j := got.Jobs[0]; j.Cluster != "gpu2" || j.GpuHours != 0.25 || j.MeanUtil != nil {
		t.Errorf("940001 (gpu2, no Prometheus): %+v", j)
	}
	if !got.To.Equal(h.now) || !got.From.Equal(h.now.Add(-7*24*time.Hour)) {
		t.Errorf("the default window: %v to %v", got.From, got.To)
	}
	// slurmdbd was asked for the readable accounts only.
	for _, q := range h.beds["gpu1"].HistoryQueries() {
		v, _ := url.ParseQuery(q)
		if v.Get("account") == "" {
			continue // ops: every account
		}
		for _, a := range strings.Split(v.Get("account"), ",") {
			if !strings.HasPrefix(a, "acme") && a != "globex" && a != "globex-rl" {
				t.Errorf("slurmdbd was asked for account %q", a)
			}
		}
	}
	n := len(h.beds["gpu1"].HistoryQueries())
	history(t, h, "nobody", "")
	if len(h.beds["gpu1"].HistoryQueries()) != n {
		t.Errorf("a caller with no role made slurmdbd answer")
	}

	// Filters: a project, a cluster, a window.
	if _, got, body := history(t, h, "tadmin", "?project=vision"); !slices.Equal(ids(got.Jobs), []int64{930003}) {
		t.Errorf("tadmin's vision: %v: %s", ids(got.Jobs), body)
	}
	if qs := h.beds["gpu1"].HistoryQueries(); !strings.Contains(qs[len(qs)-1], "account=acme-vision&") {
		t.Errorf("the project's query: %s", qs[len(qs)-1])
	}
	if _, got, _ := history(t, h, "mem", "?project=vision"); len(got.Jobs) != 0 {
		t.Errorf("mem sees vision's jobs: %v", ids(got.Jobs))
	}
	if _, got, _ := history(t, h, "mem", "?cluster=gpu1"); !slices.Equal(ids(got.Jobs), []int64{930001}) {
		t.Errorf("mem's gpu1: %v", ids(got.Jobs))
	}
	from := url.QueryEscape(h.now.Add(-11 * 24 * time.Hour).Format(time.RFC3339))
	to := url.QueryEscape(h.now.Add(-9 * 24 * time.Hour).Format(time.RFC3339))
	if _, got, body := history(t, h, "mem", "?from="+from+"&to="+to); !slices.Equal(ids(got.Jobs), []int64{930005}) || got.Jobs[0].GpuHours != 4 {
		t.Errorf("mem's window 11 to 9 days ago: %v: %s", ids(got.Jobs), body)
	}
	for _, q := range []string{"?from=" + to + "&to=" + from, "?from=" + url.QueryEscape(h.now.Add(-40*24*time.Hour).Format(time.RFC3339))} {
		if code, _, body := history(t, h, "mem", q); code != 400 || !strings.Contains(body, "31 days") {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
	if code, _, _ := history(t, h, "mem", "?cluster=gpu9"); code != 404 {
		t.Errorf("an unknown cluster: %d", code)
	}
	// A cluster whose slurmdbd does not answer is named; the other's jobs stay.
	h.beds["gpu2"].Stop()
	if _, got, _ := history(t, h, "mem", ""); !slices.Equal(ids(got.Jobs), []int64{930001}) || got.UnavailableClusters == nil || (*got.UnavailableClusters)[0] != "gpu2" {
		t.Errorf("with gpu2 down: %v, unavailable %v", ids(got.Jobs), got.UnavailableClusters)
	}
}

// TestFinishedJobAfterTheSnapshot: once a job has left the snapshot, its
// page, its reclaim record and its attempts answer from slurmdbd's record
// and reclaimd for whoever may read it, with its GPU-hours; anyone else
// gets the 404 of a job that does not exist.
func TestFinishedJobAfterTheSnapshot(t *testing.T) {
	h := newHarness(t)
	var rest []clustertest.Job
	for _, j := range gpu1Jobs {
		if j.ID != 910101 {
			rest = append(rest, j)
		}
	}
	h.beds["gpu1"].SetJobs(rest...)
	if err := h.pollers["gpu1"].Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	now := h.now.Unix()
	h.beds["gpu1"].SetFinished(clustertest.Finished{ID: 910101, User: "mem", Account: "acme-llm", Name: "llm-train", State: "FAILED",
		Submit: now - 5000, Start: now - 4000, End: now - 400, GPUs: 2})
	for user, want := range map[string]int{"mem": 200, "view": 200, "tadmin": 200, "ops": 200, "gmem": 404, "vmem": 404, "nobody": 404} {
		h.now = h.now.Add(2 * time.Second)
		for _, route := range []string{"", "/reclaim", "/attempts"} {
			code, body := h.do(user, "GET", "/v1/jobs/gpu1/910101"+route, nil)
			if code != want {
				t.Errorf("%s %s: %d %s, want %d", user, route, code, body, want)
				continue
			}
			if want == 404 && strings.Contains(string(body), "llm") {
				t.Errorf("%s %s: a foreign job's answer names it: %s", user, route, body)
			}
			if want == 200 && route == "" {
				var j api.Job
				if err := json.Unmarshal(body, &j); err != nil || j.State != "FAILED" || j.GpuHours == nil || *j.GpuHours != 2 ||
					j.Project != "llm" || j.EndTime == nil || !j.EndTime.Equal(time.Unix(now-400, 0)) {
					t.Errorf("%s: the finished job %s", user, body)
				}
			}
		}
	}
}
