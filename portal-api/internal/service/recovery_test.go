package service

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
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

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func classes(kv ...any) []api.ClassCount {
	out := []api.ClassCount{}
	for i := 0; i < len(kv); i += 2 {
		out = append(out, api.ClassCount{Class: kv[i].(string), Count: kv[i+1].(int)})
	}
	return out
}

// TestRecoveryOverview: the overview's recovery section, from what
// reclaimd's own server answered (reclaimdAnswers): reclaims carried out
// and the GPU-hours they freed (each job's GPUs until its time limit),
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
				Last24h: &api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 56, JobsFailed: 3, JobsRequeued: 2,
					FailureClasses: classes("gpu_fault", 1, "nccl", 1, "oom", 1)},
				Last7d: &api.RecoveryWindow{ReclaimActions: 3, GpuHoursReclaimed: 56, JobsFailed: 3, JobsRequeued: 2,
					FailureClasses: classes("gpu_fault", 1, "nccl", 1, "oom", 1, "user_error", 1)},
				NodesDrained: &[]api.DrainedNode{{Name: "gpu3", Reason: "strata: Xid 79 on GPU 3 (GPU fell off the bus)",
					DrainedAt: ptr(time.Date(2026, 11, 29, 20, 16, 2, 0, time.UTC)), State: &[]string{"IDLE", "DRAIN"}}}},
			wantTenants: map[string]api.RecoveryWindows{
				"acme": {
					Last24h: api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1)},
					Last7d:  api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1, "user_error", 1)}},
				"globex": {
					Last24h: api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 16, JobsFailed: 1, FailureClasses: classes("oom", 1)},
					Last7d:  api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 16, JobsFailed: 1, FailureClasses: classes("oom", 1)}},
				"": {Last24h: api.RecoveryWindow{FailureClasses: classes()}, Last7d: api.RecoveryWindow{FailureClasses: classes()}},
				// initech has a deployment on gpu1's bridge and no job: nothing reclaimed or failed.
				"initech": {Last24h: api.RecoveryWindow{FailureClasses: classes()}, Last7d: api.RecoveryWindow{FailureClasses: classes()}},
			},
		},
		"tenant admin": {
			user: "tadmin",
			wantCluster: api.RecoveryOverview{Available: true,
				Last24h: &api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1)},
				Last7d:  &api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1, "user_error", 1)}},
			wantTenants: map[string]api.RecoveryWindows{
				"acme": {
					Last24h: api.RecoveryWindow{ReclaimActions: 1, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1)},
					Last7d:  api.RecoveryWindow{ReclaimActions: 2, GpuHoursReclaimed: 40, JobsFailed: 1, JobsRequeued: 1, FailureClasses: classes("nccl", 1, "user_error", 1)}},
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
	if n := h.reclaimdRequests.Load() - start; n != 3 {
		t.Errorf("40 overviews asked reclaimd %d times, want 3 (decisions, failures, nodes' health: once)", n)
	}
	if n := counterValue(h.server.reclaimdRequests.WithLabelValues("gpu1", "ok")); n != 3 {
		t.Errorf("strata_portal_reclaimd_requests_total{gpu1,ok} = %v, want 3", n)
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
	if n := counterValue(h.server.reclaimdRequests.WithLabelValues("gpu1", "error")); n < 1 {
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

// FuzzRecoveryOf: whatever reclaimd answers, counting it never panics,
// gives no negative count or GPU-hours, and a tenant's admin is given no
// count of an account outside their tenant. Seeded with the answers of
// reclaimd's own server.
func FuzzRecoveryOf(f *testing.F) {
	seed := func(file string) []byte {
		b, err := os.ReadFile(reclaimdAnswers + file)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed("decisions.json"), seed("failures.json"), seed("nodes-health.json"))
	f.Add([]byte(`{"decisions":[{"job_id":1,"account":"globex-rl","action":"cancel","outcome":"done","gpus":[{},{}],"evidence":{"JobEnd":"9999-01-01T00:00:00Z"},"decided_at":"2026-11-29T20:00:00Z"}]}`),
		[]byte(`{"failures":[{"job_id":-1,"account":"","class":"","failed_at":"0001-01-01T00:00:00Z"}]}`), []byte(`{"nodes":null}`))
	m, err := tenantmap.Load("testdata/tenants.json")
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 20, 24, 32, 0, time.UTC)
	f.Fuzz(func(t *testing.T, decisions, failures, health []byte) {
		var d struct {
			Decisions []reclaimRecord `json:"decisions"`
		}
		var fs struct {
			Failures []failureRecord `json:"failures"`
		}
		var h struct {
			Nodes []nodeHealth `json:"nodes"`
		}
		if json.Unmarshal(decisions, &d) != nil || json.Unmarshal(failures, &fs) != nil || json.Unmarshal(health, &h) != nil {
			return
		}
		rd := &reclaimdRead{at: now, records: d.Decisions, failures: fs.Failures, nodes: h.Nodes}
		for _, admin := range []bool{true, false} {
			co := api.ClusterOverview{Tenants: []api.TenantOverview{}}
			recoveryOf(rd, m, admin, map[string]bool{"acme": true}, now, &co)
			for _, w := range []*api.RecoveryWindow{co.Recovery.Last24h, co.Recovery.Last7d} {
				if w.ReclaimActions < 0 || w.GpuHoursReclaimed < 0 || w.GpuHoursReclaimed != w.GpuHoursReclaimed || w.JobsFailed < 0 || w.JobsRequeued > w.JobsFailed {
					t.Fatalf("window %+v", w)
				}
			}
			if !admin {
				if co.Recovery.NodesDrained != nil {
					t.Fatal("a tenant's admin sees the drained nodes")
				}
				for _, to := range co.Tenants {
					if to.Tenant != "acme" {
						t.Fatalf("a tenant's admin sees tenant %q", to.Tenant)
					}
				}
			}
		}
	})
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
	cs := slices.Clone(h.server.clusters)
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

// TestPages: a list longer than reclaimd gives at once is read page by
// page from the second of each page's last item, each item once; items
// of one second that fill a whole page end the read instead of looping.
func TestPages(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	type item struct {
		id int64
		at time.Time
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := map[string]struct {
		items     []item
		wantIDs   []int64
		wantCalls int
	}{
		"short": {items: []item{{1, t0}, {2, t0.Add(ms(10))}}, wantIDs: []int64{1, 2}, wantCalls: 1},
		"three pages, seconds shared across pages": {
			items: []item{{1, t0}, {2, t0.Add(ms(500))}, {3, t0.Add(time.Second + ms(1))}, {4, t0.Add(time.Second + ms(2))},
				{5, t0.Add(2 * time.Second)}, {6, t0.Add(3 * time.Second)}, {7, t0.Add(3*time.Second + ms(900))}, {8, t0.Add(5 * time.Second)}},
			wantIDs: []int64{1, 2, 3, 4, 5, 6, 7, 8}, wantCalls: 5,
		},
		"a second fuller than a page": {
			items:   []item{{1, t0}, {2, t0.Add(ms(1))}, {3, t0.Add(ms(2))}, {4, t0.Add(ms(3))}, {5, t0.Add(ms(4))}},
			wantIDs: []int64{1, 2, 3}, wantCalls: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			calls := 0
			got, err := pages(t0, 3, func(since string) ([]item, error) {
				calls++
				s, err := url.QueryUnescape(since)
				if err != nil {
					return nil, err
				}
				from, err := time.Parse(time.RFC3339, s)
				if err != nil {
					return nil, err
				}
				var out []item
				for _, it := range tc.items {
					if !it.at.Before(from) && len(out) < 3 {
						out = append(out, it)
					}
				}
				return out, nil
			}, func(it item) (int64, time.Time) { return it.id, it.at })
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, it := range got {
				ids = append(ids, it.id)
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" || calls != tc.wantCalls {
				t.Errorf("ids (-want +got):\n%s\ncalls %d, want %d", diff, calls, tc.wantCalls)
			}
		})
	}
}
