package controller_test

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api, the answers the portal's tests replay")

// TestAPIAnswersForThePortal: reclaimd's own API server, over a real
// store, answers the routes strata-portal-api reads (GET /v1/decisions,
// /v1/failures, /v1/nodes/health, /v1/jobs/{id}/attempts, /v1/worth) as
// testdata/api holds them. Those files are what the portal's tests serve
// as reclaimd (portal-api cannot import reclaimd's packages), so a change
// of reclaimd's answers shows here first; -update-api rewrites them.
//
// What is in them: a real cycle's drain of gpu3 after an Xid 79 on its GPU
// 3 and the gpu_fault of job 1 (account testbed, outside the portal's
// tenant map) retried elsewhere; and, written to the store as the
// controller writes them, reclaims and failures of the portal's test jobs
// (910101 of acme-llm, 910104 of globex-rl).
func TestAPIAnswersForThePortal(t *testing.T) {
	hb := newHealthBedWith(t, "26.05", 0.25, gpuFaultRules, func(node string, gpu int) bool { return node == "gpu3" && gpu == 3 })
	hb.serveJob(onGPU3)
	hb.tick()
	hb.inject("gpu3", "3,xid,79\n")
	hb.tick()
	end := hb.clock().Add(5 * time.Second)
	hb.serveJob(func(j map[string]any) {
		onGPU3(j)
		failed(j)
		j["gres_detail"] = []any{}
		j["end_time"] = map[string]any{"set": true, "infinite": false, "number": end.Unix()}
	})
	hb.tick()
	now := hb.clock()

	ctx := t.Context()
	st := hb.st
	reclaimIDs := map[int64][]int64{} // the records of the reclaims carried out, by job
	reclaim := func(job int64, account, user, kind string, gpus int, at time.Time, limit time.Duration, status string) {
		t.Helper()
		ev := decide.Evidence{WindowStart: at.Add(-time.Hour), WindowEnd: at, JobStart: at.Add(-2 * time.Hour), IdleGPUs: gpus, TotalGPUs: gpus}
		if limit > 0 {
			ev.JobEnd = ev.JobStart.Add(limit)
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		rec := store.Record{JobID: job, Account: account, User: user, Kind: kind, Rule: "train-idle", Reason: "idle for 1h",
			Evidence: raw, DecidedAt: at}
		for i := range gpus {
			rec.GPUs = append(rec.GPUs, store.GPU{Node: "gpu1", Index: i})
		}
		id, err := st.Intent(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, id, status, "", at.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		// A reclaim carried out is kept for its worth, as carryOut keeps it.
		if status == store.StatusDone && (kind == "requeue" || kind == "cancel") {
			r := store.Reclaim{RecordID: id, JobID: job, Account: account, Rule: rec.Rule, Kind: kind, At: at.Add(time.Second), GPUs: rec.GPUs}
			if limit > 0 {
				r.LimitEnd = ev.JobEnd
			}
			if err := st.AddReclaim(ctx, r); err != nil {
				t.Fatal(err)
			}
			reclaimIDs[job] = append(reclaimIDs[job], id)
		}
	}
	// acme-llm: a requeue 2 h ago of 4 GPUs with 10 h of its 12 h limit
	// left (40 GPU-hours), a warning (no reclaim), a cancel 3 days ago of
	// 2 GPUs with no time limit, and a requeue that failed.
	reclaim(910101, "acme-llm", "mem", "requeue", 4, now.Add(-2*time.Hour), 12*time.Hour, store.StatusDone)
	reclaim(910101, "acme-llm", "mem", "warn", 4, now.Add(-3*time.Hour), 12*time.Hour, store.StatusDone)
	reclaim(910102, "acme-llm", "mem2", "cancel", 2, now.Add(-72*time.Hour), 0, store.StatusDone)
	reclaim(910102, "acme-llm", "mem2", "requeue", 2, now.Add(-time.Hour), 12*time.Hour, store.StatusFailed)
	// globex-rl: a cancel an hour ago of 8 GPUs with 2 h of its 4 h
	// limit left (16 GPU-hours); and one 8 days ago, outside the week.
	reclaim(910104, "globex-rl", "gmem", "cancel", 8, now.Add(-time.Hour), 4*time.Hour, store.StatusDone)
	reclaim(910104, "globex-rl", "gmem", "cancel", 8, now.Add(-8*24*time.Hour), 4*time.Hour, store.StatusDone)

	// Handovers, as observeWorth keeps them: acme-llm's requeue 2 h ago
	// handed GPU 0 to globex-rl's 910105 for 30 minutes, and GPU 1 to
	// acme-llm's 910106, running for the last 1 h 50 min; globex-rl's
	// cancel an hour ago handed nothing yet.
	requeued := now.Add(-2 * time.Hour).Add(time.Second)
	limitEnd := requeued.Add(-time.Second).Add(-2 * time.Hour).Add(12 * time.Hour)
	ended := requeued.Add(40 * time.Minute)
	if _, err := st.ReplaceHandovers(ctx, reclaimIDs[910101], []store.Handover{
		{RecordID: reclaimIDs[910101][0], Handover: reclaimapi.Handover{JobID: 910105, Tenant: "globex", Account: "globex-rl",
			GPU: store.GPU{Node: "gpu1", Index: 0}, Start: requeued.Add(10 * time.Minute), End: &ended, CountedUntil: ended,
			GPUSeconds: 1800, StartGainSeconds: limitEnd.Sub(requeued.Add(10 * time.Minute)).Seconds()}},
		{RecordID: reclaimIDs[910101][0], Handover: reclaimapi.Handover{JobID: 910106, Tenant: "acme", Account: "acme-llm",
			GPU: store.GPU{Node: "gpu1", Index: 1}, Start: requeued.Add(10 * time.Minute), CountedUntil: now,
			GPUSeconds: now.Sub(requeued.Add(10 * time.Minute)).Seconds(), StartGainSeconds: limitEnd.Sub(requeued.Add(10 * time.Minute)).Seconds()}},
	}); err != nil {
		t.Fatal(err)
	}

	failure := func(job int64, account, user, class, action string, at time.Time) {
		t.Helper()
		if _, _, err := st.AddFailure(ctx, store.Failure{JobID: job, Start: at.Add(-time.Hour), Account: account, User: user, Class: class,
			Evidence: json.RawMessage(`{"state":"FAILED","exit_code":1}`), Decision: json.RawMessage(`{"action":"` + action + `"}`),
			Action: action, Reason: class + ": " + action, FailedAt: at, ClassifiedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	failure(910101, "acme-llm", "mem", "nccl", "retry", now.Add(-5*time.Hour))
	failure(910101, "acme-llm", "mem", "user_error", "leave", now.Add(-2*24*time.Hour))
	failure(910102, "acme-llm", "mem2", "cancelled", "leave", now.Add(-time.Hour))
	failure(910104, "globex-rl", "gmem", "oom", "leave", now.Add(-30*time.Minute))

	srv := httptest.NewServer(withToken(hb.ctl.Handler(time.Hour)))
	t.Cleanup(srv.Close)
	since := now.Add(-7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for file, path := range map[string]string{
		"decisions.json":        "/v1/decisions?since=" + since + "&limit=10000",
		"failures.json":         "/v1/failures?since=" + since + "&limit=10000",
		"nodes-health.json":     "/v1/nodes/health",
		"attempts-910101.json":  "/v1/jobs/910101/attempts",
		"attempts-missing.json": "/v1/jobs/910103/attempts",
		"worth.json":            "/v1/worth?since=" + since + "&limit=10000",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if file == "attempts-missing.json" {
			want = http.StatusNotFound
		}
		if resp.StatusCode != want {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
		golden := filepath.Join("testdata", "api", file)
		if *updateAPI {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, body, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update-api)", err)
		}
		if string(old) != string(body) {
			t.Errorf("GET %s differs from %s: the portal's tests replay it; check the change and run with -update-api:\n%s", path, golden, body)
		}
	}
	// A standby (or a controller waiting for slurmrestd) answers the same
	// reads from the store: everything but what only a cycle knows (Slurm's
	// view of each node, in nodes-health).
	standby := httptest.NewServer(withToken(controller.ReadAPI(controller.Config{Store: st, APIToken: apiTokenFunc, Now: hb.clock, Health: hb.health})))
	t.Cleanup(standby.Close)
	get := func(base, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{
		"/v1/decisions?since=" + since + "&limit=10000", "/v1/failures?since=" + since + "&limit=10000",
		"/v1/jobs/910101/attempts", "/v1/jobs/910103/attempts", "/v1/worth?since=" + since + "&limit=10000",
		"/v1/jobs/910104/reclaim", "/v1/jobs/910103/reclaim", "/v1/decisions?since=yesterday",
	} {
		code, body := get(srv.URL, path)
		scode, sbody := get(standby.URL, path)
		if scode != code || sbody != body {
			t.Errorf("GET %s: the standby answers %d %s, the acting controller %d %s", path, scode, sbody, code, body)
		}
	}
	resp, err := http.Post(standby.URL+"/v1/decisions", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST to a standby: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code, _ := get(standby.URL, "/v1/nodes/health"); code != http.StatusOK {
		t.Errorf("a standby's /v1/nodes/health: %d", code)
	}

	clock := filepath.Join("testdata", "api", "now.txt")
	if *updateAPI {
		if err := os.WriteFile(clock, []byte(now.UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if old, err := os.ReadFile(clock); err != nil || string(old) != now.UTC().Format(time.RFC3339)+"\n" {
		t.Errorf("%s = %q, want the clock %s (run with -update-api)", clock, old, now.UTC().Format(time.RFC3339))
	}
}
