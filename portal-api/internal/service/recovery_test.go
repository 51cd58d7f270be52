package service

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// overviewOf decodes an overview and returns its cluster named name.
func overviewOf(t *testing.T, body []byte, name string) api.ClusterOverview {
	t.Helper()
	var o api.Overview
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	for _, c := range o.Clusters {
		if c.Cluster == name {
			return c
		}
	}
	t.Fatalf("no cluster %s in %s", name, body)
	return api.ClusterOverview{}
}

// gathered is the value of a counter of the harness's registry with the
// given label values (in the order of the metric's labels).
func (h *harness) gathered(name string, values ...string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetValue())
			}
			if slices.Equal(got, values) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func classes(kv ...any) []api.ClassCount {
	out := []api.ClassCount{}
	for i := 0; i < len(kv); i += 2 {
		out = append(out, api.ClassCount{Class: kv[i].(string), Count: kv[i+1].(int)})
	}
	return out
}

// withWorth is w with reclaimd's observed GPU-hours and start gain (its
// /v1/worth: worth.json).
func withWorth(w api.RecoveryWindow, observed, gain float64) api.RecoveryWindow {
	w.GpuHoursObserved, w.StartGainHours = ptr(observed), ptr(gain)
	return w
}

// What worth.json holds of acme-llm's requeue 2 h ago (10 h of its limit
// left): globex-rl's 910105 ran 30 min on its GPU 0, acme-llm's 910106 on
// GPU 1 for the last 1 h 50 min less a second (8,399 GPU-seconds in all);
// both started 9 h 50 min less a second before the limit's end.
const (
	acmeObserved = 2.3  // 8399 s
	acmeGain     = 19.7 // 2 × 35,399 s
)

// TestRecoveryOverview: the overview's recovery section, from what
// reclaimd's own server answered (reclaimdAnswers): reclaims carried out
// and the GPU-hours they freed (each job's GPUs until its time limit) beside
// those observed in the waiting jobs that took the freed GPUs, and how much
// sooner those started,
// failed and retried jobs with their classes, over 24 h and 7 d; the
// nodes Strata drained, with its reason, for the cluster's admins. A
// tenant's admin sees their tenant's alone: no other tenant's counts, and
// none of the failure of an account outside the policy. A cluster without
// a reclaimd says so.
func TestRecoveryOverview(t *testing.T) {
	h := newHarness(t)
	tests := map[string]struct {
		user        string
		wantCluster api.RecoveryOverview
		wantTenants map[string]api.RecoveryWindows
	}{
		"cluster admin": {
			user: "ops",
			wantCluster: api.RecoveryOverview{Available: true,
				Last24h: ptr(withWorth(api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 56, JobsFailed: 3, JobsRequeued: 2,
					FailureClasses: classes("gpu_fault", 1, "nccl", 1, "oom", 1)}, acmeObserved, acmeGain)),
				Last7d: ptr(withWorth(api.RecoveryWindow{ReclaimActions: 3, GpuHoursReclaimed: 56, JobsFailed: 3, JobsRequeued: 2,
					FailureClasses: classes("gpu_fault", 1, "nccl", 1, "oom", 1, "user_error", 1)}, acmeObserved, acmeGain)),
				NodesDrained: &[]api.DrainedNode{{Name: "gpu3", Reason: "strata: Xid 79 on GPU 3 (GPU fell off the bus)",
					DrainedAt: ptr(time.Date(2026, 11, 29, 20, 16, 2, 0, time.UTC)), State: &[]string{"IDLE", "DRAIN"}}}},
			wantTenants: map[string]api.RecoveryWindows{
				"acme": {
					Last24h: withWorth(api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1)}, acmeObserved, acmeGain),
					Last7d:  withWorth(api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1, "user_error", 1)}, acmeObserved, acmeGain)},
				"globex": {
					Last24h: withWorth(api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 16, JobsFailed: 1, FailureClasses: classes("oom", 1)}, 0, 0),
					Last7d:  withWorth(api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 16, JobsFailed: 1, FailureClasses: classes("oom", 1)}, 0, 0)},
				"": {Last24h: withWorth(api.RecoveryWindow{FailureClasses: classes()}, 0, 0), Last7d: withWorth(api.RecoveryWindow{FailureClasses: classes()}, 0, 0)},
				// initech has a deployment on gpu1's bridge and no job: nothing reclaimed or failed.
				"initech": {Last24h: withWorth(api.RecoveryWindow{FailureClasses: classes()}, 0, 0), Last7d: withWorth(api.RecoveryWindow{FailureClasses: classes()}, 0, 0)},
			},
		},
		"tenant admin": {
			user: "tadmin",
			wantCluster: api.RecoveryOverview{Available: true,
				Last24h: ptr(withWorth(api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1)}, acmeObserved, acmeGain)),
				Last7d:  ptr(withWorth(api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1, "user_error", 1)}, acmeObserved, acmeGain))},
			wantTenants: map[string]api.RecoveryWindows{
				"acme": {
					Last24h: withWorth(api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1)}, acmeObserved, acmeGain),
					Last7d:  withWorth(api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1, "user_error", 1)}, acmeObserved, acmeGain)},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h.t = t
			code, body := h.do(tc.user, "GET", "/v1/overview", nil)
			if code != 200 {
				t.Fatalf("overview = %d %s", code, body)
			}
			co := overviewOf(t, body, "gpu1")
			got := *co.Recovery
			if got.AsOf == nil || !got.AsOf.Equal(h.now) {
				t.Errorf("as_of %v, want %v", got.AsOf, h.now)
			}
			got.AsOf = nil
			if diff := cmp.Diff(tc.wantCluster, got); diff != "" {
				t.Errorf("gpu1's recovery (-want +got):\n%s", diff)
			}
			tenants := map[string]api.RecoveryWindows{}
			for _, to := range co.Tenants {
				if to.Recovery == nil {
					t.Errorf("tenant %q has no recovery", to.Tenant)
					continue
				}
				tenants[to.Tenant] = *to.Recovery
			}
			if diff := cmp.Diff(tc.wantTenants, tenants); diff != "" {
				t.Errorf("tenants' recovery (-want +got):\n%s", diff)
			}
			if tc.user != "ops" {
				for _, s := range []string{"gpu_fault", "oom", "gpu3", "Xid", "globex", "nodes_drained"} {
					if strings.Contains(string(body), s) {
						t.Errorf("%s sees %q:\n%s", tc.user, s, body)
					}
				}
			}
			gpu2 := overviewOf(t, body, "gpu2")
			if r := gpu2.Recovery; r == nil || r.Available || r.Unavailable == nil || !strings.Contains(*r.Unavailable, "reclaimd_url") {
				t.Errorf("gpu2, without reclaimd: %+v", r)
			}
		})
	}
}

// TestRecoveryCacheAndOutage: reclaimd is read at most once per poll
// interval, however many overviews are asked for; reclaimd down, the
// overview is still served with its recovery section unavailable, and
// comes back at the next interval once reclaimd answers again.
func TestRecoveryCacheAndOutage(t *testing.T) {
	h := newHarness(t)
	start := h.reclaimdRequests.Load()
	for range 20 {
		for _, u := range []string{"ops", "tadmin"} {
			if code, body := h.do(u, "GET", "/v1/overview", nil); code != 200 {
				t.Fatalf("overview = %d %s", code, body)
			}
		}
	}
	if n := h.reclaimdRequests.Load() - start; n != 4 {
		t.Errorf("40 overviews asked reclaimd %d times, want 4 (decisions, failures, worth, nodes' health: once)", n)
	}
	if n := h.gathered("strata_portal_reclaimd_requests_total", "gpu1", "ok"); n != 4 {
		t.Errorf("strata_portal_reclaimd_requests_total{gpu1,ok} = %v, want 4", n)
	}

	h.reclaimdDown.Store(true)
	h.now = h.now.Add(time.Second) // the poll interval
	code, body := h.do("ops", "GET", "/v1/overview", nil)
	co := overviewOf(t, body, "gpu1")
	if code != 200 || co.Recovery == nil || co.Recovery.Available || co.Recovery.Unavailable == nil || co.Recovery.Last24h != nil {
		t.Fatalf("reclaimd down: %d %s", code, body)
	}
	if co.Running != 3 || co.GpusTotal == nil || len(co.Tenants) != 4 { // "", acme, globex, and initech (a deployment, no job)
		t.Errorf("reclaimd down: the rest of the overview is not served: %s", body)
	}
	n := h.reclaimdRequests.Load()
	h.do("ops", "GET", "/v1/overview", nil)
	if h.reclaimdRequests.Load() != n {
		t.Error("reclaimd down: asked again within the interval")
	}

	h.reclaimdDown.Store(false)
	h.now = h.now.Add(time.Second)
	_, body = h.do("ops", "GET", "/v1/overview", nil)
	if co := overviewOf(t, body, "gpu1"); co.Recovery == nil || !co.Recovery.Available {
		t.Errorf("reclaimd back: %s", body)
	}
	if n := h.gathered("strata_portal_reclaimd_requests_total", "gpu1", "error"); n < 1 {
		t.Errorf("strata_portal_reclaimd_requests_total{gpu1,error} = %v while reclaimd was down", n)
	}
}

// TestJobAttempts: a job's attempts through reclaimd, for a caller who
// may read the job, asked of reclaimd once per poll interval; a foreign
// job is a 404 and reclaimd is not asked about it.
func TestJobAttempts(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910101/attempts", nil)
	var got api.Attempts
	if err := json.Unmarshal(body, &got); code != 200 || err != nil || got.JobId != 910101 || len(got.Attempts) != 2 ||
		got.Attempts[0]["class"] != "nccl" || got.Attempts[0]["action"] != "retry" {
		t.Fatalf("attempts = %d %s", code, body)
	}
	n := h.reclaimdRequests.Load()
	h.do("view", "GET", "/v1/jobs/gpu1/910101/attempts", nil)
	if h.reclaimdRequests.Load() != n {
		t.Error("reclaimd asked again about job 910101 within the poll interval")
	}
	if code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910102/attempts", nil); code != 404 || !strings.Contains(string(body), "no failed run") {
		t.Errorf("a job without attempts = %d %s", code, body)
	}
	n = h.reclaimdRequests.Load()
	if code, _ := h.do("gmem", "GET", "/v1/jobs/gpu1/910101/attempts", nil); code != 404 {
		t.Errorf("foreign = %d", code)
	}
	if h.reclaimdRequests.Load() != n {
		t.Error("reclaimd was asked about a job the caller may not read")
	}
	if code, _ := h.do("mem", "GET", "/v1/jobs/gpu2/920201/attempts", nil); code != 503 {
		t.Errorf("no reclaimd = %d", code)
	}
	h.reclaimdDown.Store(true)
	h.now = h.now.Add(time.Second)
	if code, _ := h.do("mem", "GET", "/v1/jobs/gpu1/910101/attempts", nil); code != 503 {
		t.Errorf("reclaimd down = %d", code)
	}
}

// TestRecoveryTimeout: a reclaimd that does not answer holds the overview
// no longer than the timeout, and the overview says its recovery is
// unavailable.
func TestRecoveryTimeout(t *testing.T) {
	h := newHarness(t)
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hang) })
	cs := slices.Clone(h.server.cfg.Clusters)
	cs[0].ReclaimdURL = slow.URL
	s := New(Config{Clusters: cs, Auth: h.server.cfg.Auth, Store: h.store, RatePerSecond: 1e6, Burst: 1e6,
		Now: func() time.Time { return h.now }, ReclaimdTimeout: 100 * time.Millisecond})
	h.srv = httptest.NewServer(s)
	t.Cleanup(h.srv.Close)
	start := time.Now()
	code, body := h.do("ops", "GET", "/v1/overview", nil)
	co := overviewOf(t, body, "gpu1")
	if code != 200 || co.Recovery == nil || co.Recovery.Available || co.Running != 3 {
		t.Fatalf("overview with a hung reclaimd: %d %s", code, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the overview took %s with a hung reclaimd and a 100ms timeout", took)
	}
}

// TestJobAttemptsAfterTheSnapshot: a finished job that has left the
// snapshot (slurmctld's MinJobAge) keeps its attempts for whoever may read
// its job by reclaimd's record (its account acme-llm: its members, its
// viewer, its tenant's and the cluster's admins); anyone else gets the
// 404 of a job that does not exist, and a caller with no role on the
// cluster makes no request to reclaimd; a job reclaimd never saw fail is
// that same 404.
func TestJobAttemptsAfterTheSnapshot(t *testing.T) {
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
	if code, _ := h.do("mem", "GET", "/v1/jobs/gpu1/910101", nil); code != 404 {
		t.Fatalf("job 910101 is still in the snapshot: %d", code)
	}
	for user, want := range map[string]int{"mem": 200, "view": 200, "tadmin": 200, "ops": 200, "gmem": 404, "vmem": 404} {
		h.now = h.now.Add(2 * time.Second) // past the poll interval: reclaimd is asked again
		code, body := h.do(user, "GET", "/v1/jobs/gpu1/910101/attempts", nil)
		if code != want {
			t.Errorf("%s: %d %s, want %d", user, code, body, want)
			continue
		}
		var got api.Attempts
		if want == 200 && (json.Unmarshal(body, &got) != nil || got.JobId != 910101 || len(got.Attempts) != 2) {
			t.Errorf("%s: attempts %s", user, body)
		}
		if want == 404 && (!strings.Contains(string(body), "no job 910101 on cluster") || strings.Contains(string(body), "acme")) {
			t.Errorf("%s: a foreign job's answer says more than a missing one: %s", user, body)
		}
	}
	n := h.reclaimdRequests.Load()
	if code, _ := h.do("nobody", "GET", "/v1/jobs/gpu1/910101/attempts", nil); code != 404 || h.reclaimdRequests.Load() != n {
		t.Errorf("a caller with no role: %d, reclaimd asked %d times", code, h.reclaimdRequests.Load()-n)
	}
	if code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910199/attempts", nil); code != 404 || !strings.Contains(string(body), "no job 910199 on cluster") {
		t.Errorf("a job reclaimd never saw fail = %d %s", code, body)
	}
	// A job of the snapshot that is not the caller's is not looked for at
	// reclaimd at all.
	n = h.reclaimdRequests.Load()
	if code, _ := h.do("mem", "GET", "/v1/jobs/gpu1/910104/attempts", nil); code != 404 || h.reclaimdRequests.Load() != n {
		t.Errorf("another tenant's job in the snapshot: %d", code)
	}
}
