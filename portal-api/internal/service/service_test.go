package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/store"
)

type jobRef struct {
	cluster string
	id      int64
}

func allJobs() []jobRef {
	var out []jobRef
	for _, j := range gpu1Jobs {
		out = append(out, jobRef{"gpu1", j.ID})
	}
	for _, j := range gpu2Jobs {
		out = append(out, jobRef{"gpu2", j.ID})
	}
	return out
}

// Who may read and control which job, written out by hand from the tenant
// map (not computed by the code under test).
var (
	readable = map[string][]int64{
		"ops":    {910101, 910102, 910103, 910104, 910105, 910106, 920201, 920202},
		"tadmin": {910101, 910102, 910103, 920201},
		"mem":    {910101, 910102, 920201},
		"view":   {910101, 910102, 920201},
		"vmem":   {910103},
		"gmem":   {910104, 910105, 920202},
		"nobody": {},
	}
	controllable = map[string][]int64{
		"ops":    {910101, 910102, 910103, 910104, 910105, 910106, 920201, 920202},
		"tadmin": {910101, 910102, 910103, 920201},
		"mem":    {910101, 920201},
		"vmem":   {910103},
		"gmem":   {910104, 910105, 920202},
	}
	// What each job would give away: its user, account, tenant, project, name.
	secrets = map[int64][]string{
		910101: {"acme-llm", "llm-train"}, 910102: {"mem2", "acme-llm"},
		910103: {"vmem", "acme-vision", "vision-secret"}, 910104: {"gmem", "globex", "globex-secret"},
		910105: {"gmem", "globex-rl"}, 910106: {"stranger", "orphan"},
		920201: {"acme-llm"}, 920202: {"gmem", "globex"},
	}
)

// foreign are the strings user must never see in any answer: those of
// the jobs they may not read that no job they may read shares.
func foreign(user string) []string {
	mine := map[string]bool{user: true}
	for _, id := range readable[user] {
		for _, s := range secrets[id] {
			mine[s] = true
		}
	}
	// The tenant and project names of one's own projects.
	switch user {
	case "tadmin", "mem", "view", "vmem":
		mine["acme"] = true
	}
	var out []string
	for id, ss := range secrets {
		if slices.Contains(readable[user], id) {
			continue
		}
		for _, s := range ss {
			if !mine[s] && !strings.HasPrefix("acme-llm", s) {
				out = append(out, s)
			}
		}
		out = append(out, strconv.FormatInt(id, 10))
	}
	return out
}

func (h *harness) noForeign(user, what string, body []byte, allowID int64) {
	h.t.Helper()
	for _, s := range foreign(user) {
		if allowID > 0 && s == strconv.FormatInt(allowID, 10) {
			continue // the id the caller asked for, echoed in the error
		}
		if strings.Contains(string(body), s) {
			h.t.Errorf("%s: %s sees %q, which is not theirs:\n%s", what, user, s, body)
		}
	}
}

// TestTenantIsolation: every route × every user × every job (their own,
// another member's of the same project, another project's of the same
// tenant, another tenant's, one outside the policy): the status, and that
// no object the user may not read appears in any list, count or error.
func TestTenantIsolation(t *testing.T) {
	h := newHarness(t)
	// A running session of mem and one of gmem, each with its server, on
	// a cluster of their own (their jobs are not in the tables above).
	hs := newHarness(t)
	mine := hs.isolationSessions()
	for _, user := range users {
		t.Run(user, func(t *testing.T) {
			h.t = t
			// Lists and counts.
			code, body := h.do(user, "GET", "/v1/jobs?limit=1000", nil)
			if code != 200 {
				t.Fatalf("GET /v1/jobs = %d %s", code, body)
			}
			var page struct {
				Jobs []struct {
					ID int64 `json:"id"`
				}
				Total int
			}
			json.Unmarshal(body, &page)
			var ids []int64
			for _, j := range page.Jobs {
				ids = append(ids, j.ID)
			}
			slices.Sort(ids)
			if want := readable[user]; !slices.Equal(ids, want) && (len(ids) != 0 || len(want) != 0) || page.Total != len(readable[user]) {
				t.Errorf("GET /v1/jobs: %v (total %d), want %v", ids, page.Total, readable[user])
			}
			h.noForeign(user, "GET /v1/jobs", body, 0)
			for _, q := range []string{"tenant=globex", "tenant=acme", "project=vision", "user=gmem", "user=vmem", "state=PENDING", "cluster=gpu2", "class=train"} {
				_, body := h.do(user, "GET", "/v1/jobs?"+q, nil)
				h.noForeign(user, "GET /v1/jobs?"+q, body, 0)
			}
			for _, path := range []string{"/v1/queue", "/v1/queue?cluster=gpu1", "/v1/clusters", "/v1/me"} {
				code, body := h.do(user, "GET", path, nil)
				if code != 200 {
					t.Errorf("GET %s = %d", path, code)
				}
				h.noForeign(user, "GET "+path, body, 0)
			}
			// Each job, read and controlled.
			for _, j := range allJobs() {
				path := fmt.Sprintf("/v1/jobs/%s/%d", j.cluster, j.id)
				wantRead := slices.Contains(readable[user], j.id)
				code, body := h.do(user, "GET", path, nil)
				if wantRead && code != 200 || !wantRead && code != 404 {
					t.Errorf("GET %s = %d, want read %v", path, code, wantRead)
				}
				h.noForeign(user, "GET "+path, body, j.id)
				code, body = h.do(user, "GET", path+"/reclaim", nil)
				if !wantRead && code != 404 || wantRead && code == 404 && j.id == 910101 {
					t.Errorf("GET %s/reclaim = %d, want read %v", path, code, wantRead)
				}
				h.noForeign(user, "GET "+path+"/reclaim", body, j.id)
				code, body = h.do(user, "GET", path+"/output", nil)
				if wantRead && code != 200 || !wantRead && code != 404 {
					t.Errorf("GET %s/output = %d, want read %v", path, code, wantRead)
				}
				h.noForeign(user, "GET "+path+"/output", body, j.id)
				code, body = h.do(user, "GET", path+"/attempts", nil)
				wantAttempts := 404
				switch {
				case wantRead && j.cluster == "gpu2":
					wantAttempts = 503 // no reclaimd
				case wantRead && j.id == 910101:
					wantAttempts = 200
				}
				if code != wantAttempts {
					t.Errorf("GET %s/attempts = %d, want %d", path, code, wantAttempts)
				}
				h.noForeign(user, "GET "+path+"/attempts", body, j.id)
				// GPU use: gpu1's running jobs have it; its pending jobs hold
				// no GPU; gpu2 has no Prometheus.
				code, body = h.do(user, "GET", path+"/gpu", nil)
				wantGPU := 404
				switch {
				case wantRead && j.cluster == "gpu2":
					wantGPU = 503
				case wantRead && slices.Contains([]int64{910101, 910104, 910106}, j.id):
					wantGPU = 200
				}
				if code != wantGPU {
					t.Errorf("GET %s/gpu = %d, want %d", path, code, wantGPU)
				}
				h.noForeign(user, "GET "+path+"/gpu", body, j.id)
				if !wantRead {
					// A foreign job reads exactly as a missing one.
					_, missing := h.do(user, "GET", fmt.Sprintf("/v1/jobs/%s/%d", j.cluster, 999999), nil)
					if want := strings.ReplaceAll(string(missing), "999999", strconv.FormatInt(j.id, 10)); string(body) != want {
						t.Errorf("GET %s: a foreign job answers\n%s\nand a missing one\n%s", path, body, missing)
					}
				}
				for _, action := range []string{"cancel", "hold", "release", "requeue"} {
					code, body := h.do(user, "POST", path+"/"+action, nil)
					want := 404
					switch {
					case wantRead && slices.Contains(controllable[user], j.id):
						want = 200
						if action == "requeue" && j.cluster == "gpu2" {
							want = 501 // Slurm 24.11 has no REST requeue
						}
					case wantRead:
						want = 403
					}
					if code != want {
						t.Errorf("POST %s/%s = %d, want %d: %s", path, action, code, want, body)
					}
					h.noForeign(user, "POST "+path+"/"+action, body, j.id)
				}
			}
			// The operators' overview.
			code, body = h.do(user, "GET", "/v1/overview", nil)
			if want := map[bool]int{true: 200, false: 403}[user == "ops" || user == "tadmin"]; code != want {
				t.Errorf("GET /v1/overview = %d, want %d", code, want)
			}
			if user != "ops" {
				h.noForeign(user, "GET /v1/overview", body, 0)
				if strings.Contains(string(body), "gpus_total") || strings.Contains(string(body), "nodes_unavailable") ||
					strings.Contains(string(body), "nodes_drained") || strings.Contains(string(body), "gpu_fault") {
					t.Errorf("GET /v1/overview as %s shows the cluster's nodes: %s", user, body)
				}
			}
			// Deployments, through gpu1's bridge.
			h.deploymentIsolation(user)
			// Submission to acme's llm.
			code, body = h.do(user, "POST", "/v1/submissions", map[string]any{"cluster": "gpu1", "template": "small", "account": "acme-llm"})
			if want := map[string]int{"mem": 201, "view": 403, "tadmin": 403, "ops": 403}[user]; code != want && (want != 0 || code != 404) {
				t.Errorf("POST /v1/submissions to acme-llm = %d: %s", code, body)
			}
			h.noForeign(user, "POST /v1/submissions", body, 0)
			// Operators' routes.
			for _, c := range []string{"gpu1", "gpu2"} {
				code, body := h.do(user, "GET", "/v1/nodes/"+c, nil)
				if want := map[bool]int{true: 200, false: 403}[user == "ops"]; code != want {
					t.Errorf("GET /v1/nodes/%s = %d, want %d", c, code, want)
				}
				h.noForeign(user, "GET /v1/nodes", body, 0)
				code, _ = h.do(user, "POST", "/v1/nodes/"+c+"/gpu1/drain", map[string]string{"reason": "maintenance"})
				if user != "ops" && code != 403 {
					t.Errorf("POST drain as %s = %d, want 403", user, code)
				}
			}
			// Sessions: the owner's only.
			hs.t = t
			hs.sessionIsolation(user, mine)
		})
	}
	h.t = t
	// Every action taken ran in Slurm as the caller, and has its record.
	log, err := h.store.AuditLog(t.Context(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	var controls int
	for _, b := range h.beds {
		for _, c := range append(b.Controls(), b.Submits()...) {
			controls++
			if !slices.Contains(users, c.User) || c.User == "nobody" || c.User == "view" {
				t.Errorf("control %s %s sent as %q", c.Method, c.Path, c.User)
			}
		}
	}
	ok := 0
	for _, a := range log {
		if a.Result == "" || a.FinishedAt.IsZero() {
			t.Errorf("audit record without result: %+v", a)
		}
		if a.Result == store.ResultOK {
			ok++
		}
	}
	if ok != controls+h.bridge.actions() || ok == 0 {
		t.Errorf("%d actions done in Slurm and %d by the bridge, %d audited as done", controls, h.bridge.actions(), ok)
	}
}

// TestUnauthenticated: every route but the spec, /healthz and /metrics
// refuses a caller without credentials, or with a bad token, with 401.
func TestUnauthenticated(t *testing.T) {
	h := newHarness(t)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/me"}, {"GET", "/v1/clusters"}, {"GET", "/v1/jobs"}, {"GET", "/v1/jobs/gpu1/910101"},
		{"POST", "/v1/jobs/gpu1/910101/cancel"}, {"GET", "/v1/jobs/gpu1/910101/gpu"}, {"GET", "/v1/queue"}, {"GET", "/v1/nodes/gpu1"}, {"POST", "/v1/nodes/gpu1/gpu1/drain"},
		{"GET", "/v1/deployments"}, {"POST", "/v1/deployments"}, {"POST", "/v1/deployments/gpu1/llm-chat/rollback"},
		{"DELETE", "/v1/deployments/gpu1/llm-chat"},
		{"GET", "/v1/sessions"}, {"POST", "/v1/sessions"}, {"GET", "/v1/sessions/abc"}, {"DELETE", "/v1/sessions/abc"},
		{"POST", "/v1/sessions/abc/extend"}, {"POST", "/v1/sessions/abc/cookie"},
	} {
		code, body := h.do("", r.method, r.path, nil)
		if code != 401 || !strings.Contains(string(body), `"unauthenticated"`) {
			t.Errorf("%s %s without credentials = %d %s", r.method, r.path, code, body)
		}
		h.tokens["forged"] = store.TokenPrefix + "forged"
		if code, _ := h.do("forged", r.method, r.path, nil); code != 401 {
			t.Errorf("%s %s with a forged token = %d", r.method, r.path, code)
		}
	}
	if len(h.beds["gpu1"].Controls()) != 0 {
		t.Error("an unauthenticated request reached Slurm")
	}
	if got := h.bridge.got(); len(got) != 0 {
		t.Errorf("an unauthenticated request reached the bridge: %v", got)
	}
	code, body := h.do("", "GET", "/v1/openapi.yaml", nil)
	if code != 200 || !strings.HasPrefix(string(body), "openapi: 3.0") {
		t.Errorf("GET /v1/openapi.yaml = %d", code)
	}
}

// TestJob: a job's fields, from the snapshot.
func TestJob(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910101", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var j map[string]any
	json.Unmarshal(body, &j)
	if j["tenant"] != "acme" || j["project"] != "llm" || j["class"] != "train" || j["state"] != "RUNNING" ||
		fmt.Sprint(j["gpus"]) != "[gpu1:0 gpu1:1]" || j["user"] != "mem" {
		t.Errorf("job = %s", body)
	}
	_, body = h.do("mem", "GET", "/v1/jobs/gpu1/910102", nil)
	json.Unmarshal(body, &j)
	if r, _ := j["reason"].(map[string]any); r["slurm"] != "Priority" {
		t.Errorf("pending job's reason = %s", body)
	}
	// A pending job's reason in words, from internal/explain.
	_, body = h.do("gmem", "GET", "/v1/jobs/gpu1/910105", nil)
	var pj struct {
		Reason struct{ Slurm, Meaning, Text, Hint string }
	}
	json.Unmarshal(body, &pj)
	if pj.Reason.Slurm != "Resources" || !strings.Contains(pj.Reason.Meaning, "in use") ||
		!strings.Contains(pj.Reason.Text, "GPUs of partition gpu are free now") || pj.Reason.Hint == "" {
		t.Errorf("explained reason = %+v", pj.Reason)
	}
	// The list gives the meaning, not the per-job case.
	_, body = h.do("gmem", "GET", "/v1/jobs?state=PENDING", nil)
	if !strings.Contains(string(body), `"meaning":"the resources the job asks for are in use`) || strings.Contains(string(body), "are free now") {
		t.Errorf("listed reason: %s", body)
	}
	code, _ = h.do("mem", "GET", "/v1/jobs/nope/910101", nil)
	if code != 404 {
		t.Errorf("unknown cluster = %d", code)
	}
	code, body = h.do("mem", "GET", "/v1/jobs/gpu1/abc", nil)
	if code != 400 || !strings.Contains(string(body), "bad_request") {
		t.Errorf("bad id = %d %s", code, body)
	}
	code, _ = h.do("mem", "GET", "/v1/nowhere", nil)
	if code != 404 {
		t.Errorf("unknown route = %d", code)
	}
}

// TestPaging: pages cover the list once, newest first.
func TestPaging(t *testing.T) {
	h := newHarness(t)
	var seen []int64
	offset := 0
	for range 10 {
		_, body := h.do("ops", "GET", fmt.Sprintf("/v1/jobs?limit=3&offset=%d", offset), nil)
		var page struct {
			Jobs []struct {
				ID int64 `json:"id"`
			}
			Total      int
			NextOffset *int `json:"next_offset"`
		}
		json.Unmarshal(body, &page)
		for _, j := range page.Jobs {
			seen = append(seen, j.ID)
		}
		if page.NextOffset == nil {
			break
		}
		offset = *page.NextOffset
	}
	if len(seen) != 8 {
		t.Errorf("pages = %v", seen)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, readable["ops"]) {
		t.Errorf("pages = %v", seen)
	}
	if code, _ := h.do("ops", "GET", "/v1/jobs?limit=0", nil); code != 400 {
		t.Errorf("limit=0 = %d", code)
	}
}

// TestQueue: pending jobs by cluster, tenant and project, with reasons.
func TestQueue(t *testing.T) {
	h := newHarness(t)
	_, body := h.do("tadmin", "GET", "/v1/queue", nil)
	var q struct {
		Groups []struct {
			Cluster, Tenant, Project string
			Pending                  int
			Reasons                  []struct {
				Reason string
				Count  int
			}
		}
	}
	json.Unmarshal(body, &q)
	got := fmt.Sprint(q.Groups)
	want := "[{gpu1 acme llm 1 [{Priority 1}]} {gpu1 acme vision 1 [{QOSGrpGRES 1}]} {gpu2 acme llm 1 [{Priority 1}]}]"
	if got != want {
		t.Errorf("queue = %s\nwant %s", got, want)
	}
}

// TestStaleCluster: a cluster that stops answering is stale with its
// age, its jobs still served, and the other cluster served as before.
func TestStaleCluster(t *testing.T) {
	h := newHarness(t)
	h.beds["gpu2"].Stop()
	h.now = h.now.Add(2 * time.Minute)
	h.pollers["gpu2"].Poll(t.Context())
	h.pollers["gpu1"].Poll(t.Context())
	_, body := h.do("mem", "GET", "/v1/clusters", nil)
	var cl struct {
		Clusters []struct {
			Name           string
			Healthy, Stale bool
			AgeSeconds     float64 `json:"age_seconds"`
		}
	}
	json.Unmarshal(body, &cl)
	if got := fmt.Sprint(cl.Clusters); got != "[{gpu1 true false 0} {gpu2 false true 120}]" {
		t.Errorf("clusters = %s", body)
	}
	_, body = h.do("mem", "GET", "/v1/jobs", nil)
	if !strings.Contains(string(body), `"stale_clusters":["gpu2"]`) || !strings.Contains(string(body), "920201") {
		t.Errorf("jobs of a stale cluster: %s", body)
	}
	code, _ := h.do("", "GET", "/healthz", nil)
	if code != http.StatusOK {
		t.Errorf("/healthz with one fresh cluster = %d", code)
	}
}

// TestRateLimit: a user past their burst gets 429; another user does not.
func TestRateLimit(t *testing.T) {
	h := newHarness(t)
	h.srv.Config.Handler.(*Server).limiters.r, h.srv.Config.Handler.(*Server).limiters.b = 0.001, 3
	for range 3 {
		if code, _ := h.do("mem", "GET", "/v1/me", nil); code != 200 {
			t.Fatalf("within the burst: %d", code)
		}
	}
	if code, body := h.do("mem", "GET", "/v1/me", nil); code != 429 || !strings.Contains(string(body), "rate_limited") {
		t.Errorf("past the burst: %d %s", code, body)
	}
	if code, _ := h.do("gmem", "GET", "/v1/me", nil); code != 200 {
		t.Errorf("another user: %d", code)
	}
}

// TestNodes: a cluster admin drains and resumes a node as themselves, the
// reason marked "strata: ", audited; a node that does not exist, or no
// reason, is refused before Slurm is asked.
func TestNodes(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("ops", "POST", "/v1/nodes/gpu2/gpu3/drain", map[string]string{"reason": "bad DIMM"})
	if code != 200 {
		t.Fatalf("drain = %d %s", code, body)
	}
	code, _ = h.do("ops", "POST", "/v1/nodes/gpu2/gpu3/resume", map[string]string{"reason": "strata: DIMM replaced"})
	if code != 200 {
		t.Fatalf("resume = %d", code)
	}
	got := h.beds["gpu2"].Controls()
	if len(got) != 2 || got[0].User != "ops" || got[0].Path != "/slurm/v0.0.42/node/gpu3" ||
		string(got[0].Body) != `{"reason":"strata: bad DIMM","state":["DRAIN"]}` || string(got[1].Body) != `{"reason":"strata: DIMM replaced","state":["RESUME"]}` {
		t.Errorf("sent to Slurm: %+v", got)
	}
	for name, c := range map[string]struct {
		path string
		body any
		code int
	}{
		"no such node": {"/v1/nodes/gpu2/gpu99/drain", map[string]string{"reason": "x"}, 404},
		"no reason":    {"/v1/nodes/gpu2/gpu3/drain", map[string]string{"reason": " "}, 400},
		"no body":      {"/v1/nodes/gpu2/gpu3/drain", nil, 400},
		"bad action":   {"/v1/nodes/gpu2/gpu3/reboot", map[string]string{"reason": "x"}, 404},
	} {
		if code, body := h.do("ops", "POST", c.path, c.body); code != c.code {
			t.Errorf("%s: %d %s, want %d", name, code, body, c.code)
		}
	}
	if n := len(h.beds["gpu2"].Controls()); n != 2 {
		t.Errorf("%d requests reached Slurm, want 2", n)
	}
	log, _ := h.store.AuditLog(t.Context(), 10)
	if len(log) != 2 || log[1].Action != "drain" || log[1].Target != "gpu3" || log[1].Detail != "strata: bad DIMM" || log[1].Result != "ok" {
		t.Errorf("audit = %+v", log)
	}
}

// TestMetrics: requests by route and code, latency by route, each
// cluster's snapshot age and slurmrestd requests; no user or job id in
// any label.
func TestMetrics(t *testing.T) {
	h := newHarness(t)
	h.do("mem", "GET", "/v1/jobs", nil)
	h.do("mem", "GET", "/v1/jobs/gpu1/910104", nil)
	h.do("", "GET", "/v1/jobs", nil)
	resp, err := h.srv.Client().Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		`strata_portal_http_requests_total{code="200",route="GET /v1/jobs"} 1`,
		`strata_portal_http_requests_total{code="401",route="GET /v1/jobs"} 1`,
		`strata_portal_http_requests_total{code="404",route="GET /v1/jobs/{cluster}/{id}"} 1`,
		`strata_portal_http_request_duration_seconds_bucket{route="GET /v1/jobs",le="0.05"}`,
		`strata_portal_snapshot_age_seconds{cluster="gpu1"} 0`,
		`strata_portal_slurmrestd_requests_total{cluster="gpu2"}`,
		`strata_portal_polls_total{cluster="gpu1",result="ok"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, leak := range []string{"mem", "910104"} {
		if strings.Contains(text, leak) {
			t.Errorf("/metrics names %q", leak)
		}
	}
}

// TestReclaim: reclaimd's record of a job, for a caller who may read the
// job; reclaimd is not asked about a job the caller may not read.
func TestReclaim(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910101/reclaim", nil)
	if code != 200 || !strings.Contains(string(body), `"action":"warn"`) || !strings.Contains(string(body), `"job_id":910101`) {
		t.Errorf("reclaim = %d %s", code, body)
	}
	if code, _ := h.do("mem", "GET", "/v1/jobs/gpu1/910102/reclaim", nil); code != 404 {
		t.Errorf("no record = %d", code)
	}
	if code, _ := h.do("mem", "GET", "/v1/jobs/gpu2/920201/reclaim", nil); code != 503 {
		t.Errorf("no reclaimd = %d", code)
	}
	before := h.reclaimdRequests.Load()
	if code, _ := h.do("gmem", "GET", "/v1/jobs/gpu1/910101/reclaim", nil); code != 404 {
		t.Errorf("foreign = %d", code)
	}
	if h.reclaimdRequests.Load() != before {
		t.Error("reclaimd was asked about a job the caller may not read")
	}
}

// TestOverview: a cluster admin's view of a cluster, and a tenant
// admin's of their tenant.
func TestOverview(t *testing.T) {
	h := newHarness(t)
	_, body := h.do("ops", "GET", "/v1/overview", nil)
	var o struct {
		Clusters []struct {
			Cluster                         string
			Running, Pending, GpusAllocated int
			GpusTotal                       *int `json:"gpus_total"`
			Tenants                         []struct{ Tenant string }
		}
	}
	json.Unmarshal(body, &o)
	if len(o.Clusters) != 2 || o.Clusters[0].Running != 3 || o.Clusters[0].Pending != 3 || o.Clusters[0].GpusTotal == nil ||
		*o.Clusters[0].GpusTotal == 0 || len(o.Clusters[0].Tenants) != 4 { // initech has a deployment and no job
		t.Errorf("ops overview = %s", body)
	}
	_, body = h.do("tadmin", "GET", "/v1/overview", nil)
	if !strings.Contains(string(body), `"tenant":"acme"`) || strings.Contains(string(body), "globex") || !strings.Contains(string(body), `"reason":"QOSGrpGRES"`) {
		t.Errorf("tadmin overview = %s", body)
	}
}
