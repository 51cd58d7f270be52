package service

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// bridgeToken is the token gpu1's bridge wants.
const bridgeToken = "bridge-api-token-of-gpu1"

// The deployments of gpu1's bridge, and who may read and change which,
// written out by hand from the tenant map.
var (
	bridgeDeployments = []struct {
		name, tenant, project, namespace string
		job                              int64
		replicas                         int
	}{
		{"llm-chat", "acme", "llm", "strata-acme", 910101, 2},
		{"vision-det", "acme", "vision", "strata-acme", 910090, 1},
		{"acme-base", "acme", "", "strata-acme", 910080, 3},
		{"rl-policy", "globex", "rl", "strata-globex", 910104, 4},
		{"stray-model", "initech", "", "strata-initech", 910070, 1},
	}
	deploymentsReadable = map[string][]string{
		"ops":    {"acme-base", "llm-chat", "rl-policy", "stray-model", "vision-det"},
		"tadmin": {"acme-base", "llm-chat", "vision-det"},
		"mem":    {"llm-chat"},
		"view":   {"llm-chat"},
		"vmem":   {"vision-det"},
		"gmem":   {"rl-policy"},
		"nobody": {},
	}
	deploymentsChangeable = map[string][]string{
		"ops":    {"acme-base", "llm-chat", "rl-policy", "stray-model", "vision-det"},
		"tadmin": {"acme-base", "llm-chat", "vision-det"},
		"mem":    {"llm-chat"},
		"vmem":   {"vision-det"},
		"gmem":   {"rl-policy"},
	}
	// deployable: who may deploy the model of which job (all of them
	// running or pending: the answer is 409 where it is allowed).
	deployable = map[string][]int64{
		"ops":    {910101, 910102, 910103, 910104, 910105, 910106, 920201, 920202},
		"tadmin": {910101, 910102, 910103, 920201},
		"mem":    {910101, 910102, 920201},
		"vmem":   {910103},
		"gmem":   {910104, 910105, 920202},
	}
)

// deploymentForeign are the strings of the deployments user may not read
// that none they may read shares.
func deploymentForeign(user string) []string {
	mine := map[string]bool{}
	for _, d := range bridgeDeployments {
		if slices.Contains(deploymentsReadable[user], d.name) {
			mine[d.namespace], mine[d.tenant] = true, true
		}
	}
	var out []string
	for _, d := range bridgeDeployments {
		if slices.Contains(deploymentsReadable[user], d.name) {
			continue
		}
		out = append(out, d.name)
		// acme's own members know its name from /v1/me.
		acmes := slices.Contains([]string{"tadmin", "mem", "view", "vmem"}, user)
		for _, s := range []string{d.namespace, d.tenant} {
			if !mine[s] && (s != "acme" || !acmes) {
				out = append(out, s)
			}
		}
	}
	return out
}

// noForeignDeployment checks body; asked is the name the caller gave,
// echoed in an error.
func (h *harness) noForeignDeployment(user, what string, body []byte, asked string) {
	h.t.Helper()
	for _, s := range deploymentForeign(user) {
		if asked != "" && strings.Contains(asked, s) {
			continue
		}
		if strings.Contains(string(body), s) {
			h.t.Errorf("%s: %s sees %q, which is not theirs:\n%s", what, user, s, body)
		}
	}
}

// bridge is strata-bridge's JSON API at the network edge, in the shape of
// bridge/internal/api (the portal may not import a part's internal
// packages, and a real bridge needs a Kubernetes apiserver: the
// integration test runs the real one). It keeps the bridge's guard (the
// bearer token, a JSON body) and records every request.
type bridge struct {
	mu       sync.Mutex
	requests []string // "METHOD path"
	down     bool
	// refuse, when set, is the check every deploy is refused by.
	refuse string
}

func (b *bridge) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// actions are the requests that change something, and not dry runs.
func (b *bridge) actions() int {
	n := 0
	for _, r := range b.got() {
		if !strings.HasPrefix(r, "GET ") && !strings.Contains(r, "dry_run") {
			n++
		}
	}
	return n
}

func (b *bridge) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	entry := r.Method + " " + r.URL.RequestURI()
	if strings.Contains(string(body), `"dry_run":true`) {
		entry += " dry_run"
	}
	b.requests = append(b.requests, entry)
	down, refuse := b.down, b.refuse
	b.mu.Unlock()
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if down {
		reply(http.StatusInternalServerError, map[string]string{"error": "database is locked"})
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+bridgeToken {
		reply(http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method == http.MethodPost && mt != "application/json" {
		reply(http.StatusUnsupportedMediaType, map[string]string{"error": "Content-Type: the API reads JSON only"})
		return
	}
	find := func(name string) (int, bool) {
		for i, d := range bridgeDeployments {
			if d.name == name {
				return i, true
			}
		}
		return 0, false
	}
	result := func(action string, i int, job int64, dry bool) map[string]any {
		d := bridgeDeployments[i]
		return map[string]any{"action": action, "name": d.name, "namespace": d.namespace, "tenant": d.tenant, "project": d.project,
			"job_id": job, "version": fmt.Sprintf("job-%d", job), "dry_run": dry, "changed": true, "outcome": map[bool]string{true: "dry-run", false: "ready"}[dry],
			"message": "Deployment " + d.name + " rolled out", "objects": []map[string]any{
				{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": d.namespace, "name": d.name, "action": "configured", "generation_before": 1, "generation_after": 2},
				{"apiVersion": "v1", "kind": "Service", "namespace": d.namespace, "name": d.name, "action": "unchanged"}}}
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/deployments":
		out := []map[string]any{}
		for _, d := range bridgeDeployments {
			out = append(out, map[string]any{"name": d.name, "namespace": d.namespace, "tenant": d.tenant, "project": d.project, "state": "active",
				"current_job": d.job, "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:05:00Z", "version": fmt.Sprintf("job-%d", d.job),
				"current": map[string]any{"version": fmt.Sprintf("job-%d", d.job), "job_id": d.job, "name": d.name, "namespace": d.namespace,
					"tenant": d.tenant, "account": d.tenant + "-" + d.project, "user": "someone", "gpus": 1, "max_replicas": d.replicas,
					"model": "/shared/models/" + d.name, "spec": map[string]any{}, "outcome": "ready", "created_at": "2026-11-30T10:00:00Z"}})
		}
		reply(http.StatusOK, map[string]any{"deployments": out})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/deployments/"):
		i, ok := find(strings.TrimPrefix(r.URL.Path, "/v1/deployments/"))
		if !ok {
			reply(http.StatusNotFound, map[string]string{"error": "not found"})
			return
		}
		reply(http.StatusOK, bridgeDetail(i))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/deploy":
		var req struct {
			Job    int64  `json:"job"`
			Name   string `json:"name"`
			DryRun bool   `json:"dry_run"`
		}
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Job <= 0 {
			reply(http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("body: %v", err)})
			return
		}
		if refuse != "" {
			reply(http.StatusUnprocessableEntity, map[string]string{"error": "refused by the " + refuse + " check: deployment name \"rl-policy\" is in use by tenant globex (namespace strata-globex)",
				"check": refuse, "reason": "deployment name \"rl-policy\" is in use by tenant globex (namespace strata-globex)", "fix": "choose another name (name: in strata-serve.yaml, or --comment=strata:serve=<name>)"})
			return
		}
		res := result("deploy", 0, req.Job, req.DryRun)
		res["name"] = req.Name
		reply(http.StatusOK, res)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/rollback"):
		i, ok := find(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/deployments/"), "/rollback"))
		if !ok {
			reply(http.StatusNotFound, map[string]string{"error": "not found"})
			return
		}
		var req struct {
			To     string `json:"to"`
			DryRun bool   `json:"dry_run"`
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				reply(http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
				return
			}
		}
		reply(http.StatusOK, result("rollback", i, bridgeDeployments[i].job-1, req.DryRun))
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/deployments/"):
		i, ok := find(strings.TrimPrefix(r.URL.Path, "/v1/deployments/"))
		if !ok {
			reply(http.StatusNotFound, map[string]string{"error": "not found"})
			return
		}
		d := bridgeDeployments[i]
		reply(http.StatusOK, map[string]any{"name": d.name, "namespace": d.namespace, "dry_run": r.URL.Query().Get("dry_run") == "true",
			"deleted": []map[string]any{{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": d.namespace, "name": d.name}}})
	default:
		reply(http.StatusNotFound, map[string]string{"error": "no route " + r.Method + " " + r.URL.Path})
	}
}

// bridgeDetail is the bridge's GET /v1/deployments/{name} of deployment
// i: two versions (the one before, which rolled out, and the current
// one) and their events.
func bridgeDetail(i int) map[string]any {
	d := bridgeDeployments[i]
	version := func(job int64, outcome, at string) map[string]any {
		return map[string]any{"version": fmt.Sprintf("job-%d", job), "job_id": job, "name": d.name, "namespace": d.namespace, "tenant": d.tenant,
			"project": d.project, "account": d.tenant + "-" + d.project, "user": "someone", "gpus": 1, "max_replicas": d.replicas,
			"model": fmt.Sprintf("/shared/models/%s/%d", d.name, job), "spec": map[string]any{}, "outcome": outcome, "created_at": at, "finished_at": at}
	}
	return map[string]any{"name": d.name, "namespace": d.namespace, "tenant": d.tenant, "project": d.project, "state": "active",
		"current_job": d.job, "created_at": "2026-11-29T10:00:00Z", "updated_at": "2026-11-30T10:05:00Z", "version": fmt.Sprintf("job-%d", d.job),
		"versions": []map[string]any{version(d.job-1, "ready", "2026-11-29T10:00:00Z"), version(d.job, "ready", "2026-11-30T10:05:00Z")},
		"events": []map[string]any{
			{"id": 1, "name": d.name, "job_id": d.job - 1, "action": "deploy", "outcome": "ready", "at": "2026-11-29T10:00:00Z"},
			{"id": 2, "name": d.name, "job_id": d.job, "action": "deploy", "outcome": "ready", "message": "rolled out", "at": "2026-11-30T10:05:00Z"}}}
}

// newBridge starts gpu1's bridge and its client.
func (h *harness) newBridge() *bridgeclient.Client {
	h.bridge = &bridge{}
	srv := httptest.NewServer(http.HandlerFunc(h.bridge.serve))
	h.t.Cleanup(srv.Close)
	// No list kept, so that every request the portal makes is seen here.
	return bridgeclient.New(bridgeclient.Config{URL: srv.URL, Token: func() ([]byte, error) { return []byte(bridgeToken), nil }, ListTTL: -1})
}

// deploymentIsolation is the part of TestTenantIsolation for the
// deployments' routes, as user.
func (h *harness) deploymentIsolation(user string) {
	t := h.t
	before := len(h.bridge.got())
	code, body := h.do(user, "GET", "/v1/deployments", nil)
	if code != 200 {
		t.Fatalf("GET /v1/deployments = %d %s", code, body)
	}
	var list struct {
		Deployments []struct{ Name, Cluster string }
	}
	json.Unmarshal(body, &list)
	var names []string
	for _, d := range list.Deployments {
		names = append(names, d.Name)
	}
	if want := deploymentsReadable[user]; !slices.Equal(names, want) && (len(names) != 0 || len(want) != 0) {
		t.Errorf("GET /v1/deployments: %v, want %v", names, want)
	}
	h.noForeignDeployment(user, "GET /v1/deployments", body, "")
	h.noForeign(user, "GET /v1/deployments", body, 0)
	for _, q := range []string{"tenant=globex", "tenant=acme", "tenant=initech", "project=vision", "project=rl", "cluster=gpu1", "cluster=gpu2"} {
		code, body := h.do(user, "GET", "/v1/deployments?"+q, nil)
		if code != 200 {
			t.Errorf("GET /v1/deployments?%s = %d", q, code)
		}
		h.noForeignDeployment(user, "GET /v1/deployments?"+q, body, "")
	}
	if user == "nobody" && len(h.bridge.got()) != before {
		t.Errorf("a user with no role on gpu1 made its bridge answer: %v", h.bridge.got()[before:])
	}
	// Each deployment, rolled back and deleted.
	for _, d := range append(bridgeDeployments[:len(bridgeDeployments):len(bridgeDeployments)], struct {
		name, tenant, project, namespace string
		job                              int64
		replicas                         int
	}{name: "no-such-model"}) {
		read := slices.Contains(deploymentsReadable[user], d.name)
		change := slices.Contains(deploymentsChangeable[user], d.name)
		want := map[bool]int{true: 403, false: 404}[read]
		if change {
			want = 200
		}
		// Its detail: for whoever may read it, with its versions.
		code, body := h.do(user, "GET", "/v1/deployments/gpu1/"+d.name, nil)
		if wantGet := map[bool]int{true: 200, false: 404}[read]; code != wantGet {
			t.Errorf("GET %s as %s = %d, want %d: %s", d.name, user, code, wantGet, body)
		}
		if read && (!strings.Contains(string(body), fmt.Sprintf(`"version":"job-%d"`, d.job-1)) || !strings.Contains(string(body), `"current":true`) ||
			!strings.Contains(string(body), `"action":"deploy"`)) {
			t.Errorf("GET %s: no versions and events: %s", d.name, body)
		}
		h.noForeignDeployment(user, "GET "+d.name, body, d.name)
		if !read {
			_, missing := h.do(user, "GET", "/v1/deployments/gpu1/zz-missing", nil)
			if want := strings.ReplaceAll(string(missing), "zz-missing", d.name); string(body) != want {
				t.Errorf("GET: a foreign deployment answers\n%s\nand a missing one\n%s", body, missing)
			}
		}
		for _, c := range []struct{ method, path string }{
			{"POST", "/v1/deployments/gpu1/" + d.name + "/rollback"},
			{"DELETE", "/v1/deployments/gpu1/" + d.name},
			{"DELETE", "/v1/deployments/gpu1/" + d.name + "?dry_run=true"},
		} {
			n := len(h.bridge.got())
			code, body := h.do(user, c.method, c.path, nil)
			if code != want {
				t.Errorf("%s %s = %d, want %d: %s", c.method, c.path, code, want, body)
			}
			h.noForeignDeployment(user, c.method+" "+c.path, body, d.name)
			if asked := h.bridge.got()[n:]; !change && slices.ContainsFunc(asked, func(r string) bool { return !strings.HasPrefix(r, "GET ") }) {
				t.Errorf("%s %s as %s: the bridge was asked %v", c.method, c.path, user, asked)
			}
			if !read {
				_, missing := h.do(user, c.method, strings.Replace(c.path, d.name, "zz-missing", 1), nil)
				if want := strings.ReplaceAll(string(missing), "zz-missing", d.name); string(body) != want {
					t.Errorf("%s %s: a foreign deployment answers\n%s\nand a missing one\n%s", c.method, c.path, body, missing)
				}
			}
		}
		// On a cluster without a bridge, every name is missing.
		if code, _ := h.do(user, "DELETE", "/v1/deployments/gpu2/"+d.name, nil); code != 404 {
			t.Errorf("DELETE on gpu2 (no bridge) = %d", code)
		}
	}
	// Deploying each job's model.
	for _, j := range allJobs() {
		read := slices.Contains(readable[user], j.id)
		want := map[bool]int{true: 403, false: 404}[read]
		if slices.Contains(deployable[user], j.id) {
			want = 409 // none of them has completed
		}
		n := len(h.bridge.got())
		code, body := h.do(user, "POST", "/v1/deployments", map[string]any{"cluster": j.cluster, "job": j.id, "name": "m"})
		if code != want {
			t.Errorf("POST /v1/deployments job %s/%d = %d, want %d: %s", j.cluster, j.id, code, want, body)
		}
		h.noForeign(user, "POST /v1/deployments", body, j.id)
		if len(h.bridge.got()) != n {
			t.Errorf("POST /v1/deployments job %d as %s asked the bridge %v", j.id, user, h.bridge.got()[n:])
		}
	}
}

// withCompleted puts a completed job of mem's (acme's llm) and one of
// gmem's (globex's rl) on gpu1, and polls.
func (h *harness) withCompleted() {
	h.t.Helper()
	h.beds["gpu1"].SetJobs(append(slices.Clone(gpu1Jobs),
		clustertest.Job{ID: 910107, User: "mem", Account: "acme-llm", State: "COMPLETED", Name: "llm-ft"},
		clustertest.Job{ID: 910108, User: "gmem", Account: "globex-rl", State: "COMPLETED", Name: "rl-ft"})...)
	if err := h.pollers["gpu1"].Poll(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
}

// TestDeploy: a completed job's model deployed through the bridge, with
// its audit record before and its result after; a dry run changes
// nothing and is not audited; the bridge's refusals and failures.
func TestDeploy(t *testing.T) {
	h := newHarness(t)
	h.withCompleted()
	code, body := h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107, "name": "llm-ft"})
	if code != 200 {
		t.Fatalf("deploy = %d %s", code, body)
	}
	var res struct {
		Cluster, Action, Name, Outcome, Version string
		AuditID                                 int64 `json:"audit_id"`
		JobID                                   int64 `json:"job_id"`
		Objects                                 []struct{ Kind, Action, APIVersion string }
	}
	json.Unmarshal(body, &res)
	if res.Cluster != "gpu1" || res.Action != "deploy" || res.Name != "llm-ft" || res.Outcome != "ready" || res.JobID != 910107 ||
		res.Version != "job-910107" || res.AuditID == 0 || len(res.Objects) != 2 || res.Objects[0].Action != "configured" {
		t.Errorf("deploy = %s", body)
	}
	if got := h.bridge.got(); !slices.Contains(got, "POST /v1/deploy") {
		t.Errorf("bridge requests = %v", got)
	}
	log, err := h.store.AuditLog(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "deploy" || log[0].Target != "910107" || log[0].Detail != "llm-ft" || log[0].User != "mem" ||
		log[0].Result != store.ResultOK || log[0].ID != res.AuditID {
		t.Errorf("audit log = %+v", log)
	}

	// A dry run: no audit record.
	code, body = h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107, "dry_run": true})
	if code != 200 || !strings.Contains(string(body), `"outcome":"dry-run"`) || strings.Contains(string(body), "audit_id") {
		t.Errorf("dry run = %d %s", code, body)
	}
	if log, _ := h.store.AuditLog(t.Context(), 10); len(log) != 1 {
		t.Errorf("a dry run was audited: %+v", log)
	}

	// Another tenant's completed job: as missing; a viewer's: 403.
	for user, want := range map[string]int{"mem": 404, "view": 404, "vmem": 404, "gmem": 200, "tadmin": 404} {
		code, body := h.do(user, "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910108, "name": "rl-ft"})
		if code != want {
			t.Errorf("deploy 910108 as %s = %d, want %d: %s", user, code, want, body)
		}
	}
	if code, _ := h.do("view", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107}); code != 403 {
		t.Errorf("a viewer's deploy = %d, want 403", code)
	}

	// Bad requests.
	for _, b := range []any{map[string]any{"cluster": "gpu1"}, map[string]any{"job": 910107}, map[string]any{"cluster": "gpu1", "job": 910107, "extra": 1}} {
		if code, body := h.do("mem", "POST", "/v1/deployments", b); code != 400 {
			t.Errorf("deploy %v = %d %s", b, code, body)
		}
	}

	// A refusal says which check, and never whose a taken name is.
	h.bridge.refuse = "name"
	code, body = h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107, "name": "rl-policy"})
	if code != 422 || !strings.Contains(string(body), `"bridge_refused"`) || !strings.Contains(string(body), "check: name") ||
		strings.Contains(string(body), "globex") {
		t.Errorf("refused deploy = %d %s", code, body)
	}
	h.bridge.refuse = "quota"
	code, body = h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107, "name": "x"})
	if code != 422 || !strings.Contains(string(body), "check: quota") {
		t.Errorf("refused deploy = %d %s", code, body)
	}
	h.bridge.refuse = ""
	// The bridge failing: 502, and the audit record says failed.
	h.bridge.down = true
	code, body = h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107, "name": "x"})
	if code != 502 || !strings.Contains(string(body), "database is locked") {
		t.Errorf("deploy with the bridge failing = %d %s", code, body)
	}
	log, _ = h.store.AuditLog(t.Context(), 100)
	failed := 0
	for _, a := range log {
		if a.Result == "" {
			t.Errorf("audit record without a result: %+v", a)
		}
		if a.Result != store.ResultOK {
			failed++
		}
	}
	if failed != 3 { // two refusals and the failure
		t.Errorf("%d failed actions audited, want 3: %+v", failed, log)
	}
	// A cluster without a bridge.
	h.beds["gpu2"].SetJobs(clustertest.Job{ID: 920209, User: "mem", Account: "acme-llm", State: "COMPLETED"})
	if err := h.pollers["gpu2"].Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, body := h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu2", "job": 920209}); code != 501 {
		t.Errorf("deploy on gpu2 (no bridge) = %d %s", code, body)
	}
}

// TestDeploymentActions: rollback and delete reach the bridge with what
// the caller asked, and are audited; a dry run is not.
func TestDeploymentActions(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "POST", "/v1/deployments/gpu1/llm-chat/rollback", map[string]any{"to": "job-910100"})
	if code != 200 || !strings.Contains(string(body), `"action":"rollback"`) || !strings.Contains(string(body), `"audit_id"`) {
		t.Errorf("rollback = %d %s", code, body)
	}
	code, body = h.do("tadmin", "DELETE", "/v1/deployments/gpu1/vision-det?dry_run=true", nil)
	if code != 200 || !strings.Contains(string(body), `"dry_run":true`) || strings.Contains(string(body), "audit_id") {
		t.Errorf("dry delete = %d %s", code, body)
	}
	code, body = h.do("tadmin", "DELETE", "/v1/deployments/gpu1/vision-det", nil)
	if code != 200 || !strings.Contains(string(body), `"kind":"Deployment"`) || !strings.Contains(string(body), `"audit_id"`) {
		t.Errorf("delete = %d %s", code, body)
	}
	if code, body := h.do("mem", "POST", "/v1/deployments/gpu1/llm-chat/rollback", map[string]any{"to": 1}); code != 400 {
		t.Errorf("rollback with a bad body = %d %s", code, body)
	}
	want := []string{"GET /v1/deployments", "POST /v1/deployments/llm-chat/rollback",
		"GET /v1/deployments", "DELETE /v1/deployments/vision-det?dry_run=true",
		"GET /v1/deployments", "DELETE /v1/deployments/vision-det"}
	if got := h.bridge.got(); !slices.Equal(got, want) {
		t.Errorf("bridge requests:\n%v\nwant\n%v", got, want)
	}
	log, _ := h.store.AuditLog(t.Context(), 10)
	var acts []string
	for _, a := range log {
		acts = append(acts, a.User+" "+a.Action+" "+a.Target+" "+a.Detail+" "+a.Result)
	}
	slices.Sort(acts)
	if wantLog := []string{"mem rollback llm-chat job-910100 ok", "tadmin delete vision-det  ok"}; !slices.Equal(acts, wantLog) {
		t.Errorf("audit log = %q, want %q", acts, wantLog)
	}
	// The bridge down: the list says so; a rollback cannot find the deployment.
	h.bridge.down = true
	code, body = h.do("mem", "GET", "/v1/deployments", nil)
	if code != 200 || !strings.Contains(string(body), `"unavailable_clusters":["gpu1"]`) {
		t.Errorf("list with the bridge down = %d %s", code, body)
	}
	if code, _ := h.do("mem", "POST", "/v1/deployments/gpu1/llm-chat/rollback", nil); code != 503 {
		t.Errorf("rollback with the bridge down = %d", code)
	}
}

// TestDeploymentsShown: a job shows where its model is served, the list
// gives each deployment's version and replicas, and the overview counts
// them per tenant for whom it shows.
func TestDeploymentsShown(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910101", nil)
	var j struct {
		Served *[]struct {
			Name, Namespace, Version, Outcome string
			Replicas                          int
			JobID                             int64 `json:"job_id"`
		}
	}
	json.Unmarshal(body, &j)
	if code != 200 || j.Served == nil || len(*j.Served) != 1 || (*j.Served)[0].Name != "llm-chat" || (*j.Served)[0].Version != "job-910101" ||
		(*j.Served)[0].Replicas != 2 || (*j.Served)[0].JobID != 910101 {
		t.Errorf("GET /v1/jobs/gpu1/910101 served = %s", body)
	}
	// A job whose model is served nowhere: an empty list; on a cluster
	// without a bridge: none at all.
	_, body = h.do("mem", "GET", "/v1/jobs/gpu1/910102", nil)
	if !strings.Contains(string(body), `"served":[]`) {
		t.Errorf("a job served nowhere: %s", body)
	}
	_, body = h.do("mem", "GET", "/v1/jobs/gpu2/920201", nil)
	if strings.Contains(string(body), `"served"`) {
		t.Errorf("a job of a cluster without a bridge: %s", body)
	}
	_, body = h.do("gmem", "GET", "/v1/deployments?tenant=globex", nil)
	if !strings.Contains(string(body), `"name":"rl-policy"`) || !strings.Contains(string(body), `"replicas":4`) ||
		!strings.Contains(string(body), `"version":"job-910104"`) || !strings.Contains(string(body), `"cluster":"gpu1"`) {
		t.Errorf("list = %s", body)
	}
	type tenant struct {
		Tenant                string
		Deployments, Replicas *int
	}
	var ov struct {
		Clusters []struct {
			Cluster               string
			Deployments, Replicas *int
			Tenants               []tenant
		}
	}
	for user, want := range map[string]map[string][2]int{
		"ops":    {"": {5, 11}, "acme": {3, 6}, "globex": {1, 4}, "initech": {1, 1}},
		"tadmin": {"": {3, 6}, "acme": {3, 6}},
	} {
		ov.Clusters = nil
		_, body := h.do(user, "GET", "/v1/overview", nil)
		json.Unmarshal(body, &ov)
		got := map[string][2]int{}
		for _, c := range ov.Clusters {
			if c.Cluster != "gpu1" {
				if c.Deployments != nil {
					t.Errorf("%s: gpu2 has no bridge and shows deployments: %s", user, body)
				}
				continue
			}
			got[""] = [2]int{deref(c.Deployments), deref(c.Replicas)}
			for _, to := range c.Tenants {
				if to.Deployments != nil {
					got[to.Tenant] = [2]int{*to.Deployments, deref(to.Replicas)}
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("overview as %s: deployments and replicas %v, want %v\n%s", user, got, want, body)
		}
	}
	h.bridge.down = true
	_, body = h.do("ops", "GET", "/v1/overview", nil)
	if !strings.Contains(string(body), `"bridge_unavailable":true`) {
		t.Errorf("overview with the bridge down: %s", body)
	}
	if code, body := h.do("mem", "GET", "/v1/jobs/gpu1/910101", nil); code != 200 || strings.Contains(string(body), `"served"`) {
		t.Errorf("a job with the bridge down = %d %s", code, body)
	}
}

// TestBridgeToken: the portal sends the token of bridge_token_file; a
// bridge that refuses it is the portal's configuration, said as such.
func TestBridgeToken(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(http.HandlerFunc(h.bridge.serve))
	t.Cleanup(srv.Close)
	cfg := h.server.cfg
	cfg.Clusters = slices.Clone(cfg.Clusters)
	for i := range cfg.Clusters {
		if cfg.Clusters[i].Bridge != nil {
			cfg.Clusters[i].Bridge = bridgeclient.New(bridgeclient.Config{URL: srv.URL,
				Token: func() ([]byte, error) { return []byte("wrong"), nil }, ListTTL: -1})
		}
	}
	cfg.Registry = prometheus.NewRegistry()
	h.server = New(cfg)
	h.srv = httptest.NewServer(h.server)
	t.Cleanup(h.srv.Close)
	h.withCompleted()
	code, body := h.do("mem", "POST", "/v1/deployments", map[string]any{"cluster": "gpu1", "job": 910107, "name": "x"})
	if code != 502 || !strings.Contains(string(body), "bridge_token_file") || strings.Contains(string(body), bridgeToken) {
		t.Errorf("deploy with a wrong bridge token = %d %s", code, body)
	}
	_, body = h.do("mem", "GET", "/v1/deployments", nil)
	if !strings.Contains(string(body), `"unavailable_clusters":["gpu1"]`) {
		t.Errorf("list with a wrong bridge token: %s", body)
	}
}
