package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// fakeBridge is strata-bridge's JSON API at the network edge (a real
// bridge needs a Kubernetes apiserver; the service's integration test
// runs one): acme/llm's llm-chat (two versions, the second serving) and
// globex/rl's rl-policy on gpu1. It records every request.
type fakeBridge struct {
	mu       sync.Mutex
	requests []string
}

func (b *fakeBridge) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// actions are the requests that change something.
func (b *fakeBridge) actions() []string {
	var out []string
	for _, r := range b.got() {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

var fakeDeployments = []struct {
	name, tenant, project string
	job                   int64
}{{"llm-chat", "acme", "llm", 910101}, {"rl-policy", "globex", "rl", 910104}}

func (b *fakeBridge) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.requests = append(b.requests, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(body)))
	b.mu.Unlock()
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if r.Header.Get("Authorization") != "Bearer bridge-token" {
		reply(http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
		return
	}
	version := func(i int, job int64, at string) map[string]any {
		d := fakeDeployments[i]
		return map[string]any{"version": fmt.Sprintf("job-%d", job), "job_id": job, "name": d.name, "namespace": "strata-" + d.tenant,
			"tenant": d.tenant, "project": d.project, "account": d.tenant + "-" + d.project, "user": "mem", "gpus": 1, "max_replicas": 2,
			"model": fmt.Sprintf("/shared/models/%s/%d", d.name, job), "spec": map[string]any{}, "outcome": "ready", "created_at": at, "finished_at": at}
	}
	summary := func(i int) map[string]any {
		d := fakeDeployments[i]
		return map[string]any{"name": d.name, "namespace": "strata-" + d.tenant, "tenant": d.tenant, "project": d.project, "state": "active",
			"current_job": d.job, "created_at": "2026-11-29T10:00:00Z", "updated_at": "2026-11-30T10:05:00Z", "version": fmt.Sprintf("job-%d", d.job),
			"current": version(i, d.job, "2026-11-30T10:05:00Z")}
	}
	find := func(name string) (int, bool) {
		for i, d := range fakeDeployments {
			if d.name == name {
				return i, true
			}
		}
		return 0, false
	}
	if r.Method == http.MethodPost && r.URL.Path == "/v1/deploy" {
		// Serving a finished job of acme/llm's: "taken" is another
		// tenant's name; without a name, the job's own (its marker).
		var req struct {
			Job    int64  `json:"job"`
			Name   string `json:"name"`
			DryRun bool   `json:"dry_run"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Name == "taken" {
			reply(http.StatusUnprocessableEntity, map[string]string{"error": "name taken is held by tenant globex", "check": "name"})
			return
		}
		name, outcome := cmp.Or(req.Name, "from-marker"), "ready"
		if req.DryRun {
			outcome = "dry-run"
		}
		reply(http.StatusOK, map[string]any{"action": "deploy", "name": name, "namespace": "strata-acme", "tenant": "acme", "project": "llm",
			"job_id": req.Job, "version": fmt.Sprintf("job-%d", req.Job), "dry_run": req.DryRun, "changed": true, "outcome": outcome,
			"message": "would create 2 objects", "objects": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"namespace": "strata-acme", "name": name, "action": "create"}}})
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/deployments/")
	name, action, _ := strings.Cut(rest, "/")
	i, known := find(name)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/deployments":
		reply(http.StatusOK, map[string]any{"deployments": []any{summary(0), summary(1)}})
	case !known:
		reply(http.StatusNotFound, map[string]string{"error": "not found"})
	case r.Method == http.MethodGet && action == "":
		d := summary(i)
		delete(d, "current")
		d["versions"] = []any{version(i, fakeDeployments[i].job-1, "2026-11-29T10:00:00Z"), version(i, fakeDeployments[i].job, "2026-11-30T10:05:00Z")}
		d["events"] = []any{map[string]any{"id": 1, "name": name, "job_id": fakeDeployments[i].job, "action": "deploy", "outcome": "ready", "at": "2026-11-30T10:05:00Z"}}
		reply(http.StatusOK, d)
	case r.Method == http.MethodPost && action == "rollback":
		d := fakeDeployments[i]
		reply(http.StatusOK, map[string]any{"action": "rollback", "name": d.name, "namespace": "strata-" + d.tenant, "tenant": d.tenant, "project": d.project,
			"job_id": d.job - 1, "version": fmt.Sprintf("job-%d", d.job-1), "changed": true, "outcome": "ready", "message": "rolled out", "objects": []any{}})
	case r.Method == http.MethodDelete && action == "":
		reply(http.StatusOK, map[string]any{"name": name, "namespace": "strata-" + fakeDeployments[i].tenant, "deleted": []any{}})
	default:
		reply(http.StatusNotFound, map[string]string{"error": "no route"})
	}
}

// newFakeBridge starts the bridge and its client (no list kept).
func newFakeBridge(t *testing.T) (*fakeBridge, *bridgeclient.Client) {
	t.Helper()
	fb := &fakeBridge{}
	srv := httptest.NewServer(http.HandlerFunc(fb.serve))
	t.Cleanup(srv.Close)
	return fb, bridgeclient.New(bridgeclient.Config{URL: srv.URL, Token: func() ([]byte, error) { return []byte("bridge-token"), nil }, ListTTL: -1})
}

// TestDeploymentsPage: alice (mem) sees her project's deployment by
// project, in English and Korean, with its versions; rolls it back to the
// version before and deletes it, each asked first and sent to the bridge
// only once confirmed; a viewer of her project sees it and is refused a
// change by the core's rbac; bob (gmem) finds nothing of hers by list,
// address or post, and the bridge is asked no change for him.
func TestDeploymentsPage(t *testing.T) {
	b, _ := submitBed(t, "../service/testdata/templates")
	fb := b.bridge
	alice := b.client(t)
	b.signIn(t, alice, "mem")
	for _, lang := range []string{"en", "ko"} {
		l := i18n.For(lang, "")
		resp, page := get(t, alice, b.srv.URL+"/deployments", "Accept-Language", lang)
		for _, want := range []string{html.EscapeString(l.T("deploy.title")), `href="/deployments/gpu1/llm-chat"`, "acme / llm", "job-910101", "ready"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the deployments page (%s) lacks %q", lang, resp.Status, want)
			}
		}
		if strings.Contains(page, "rl-policy") || strings.Contains(page, "%!") {
			t.Errorf("%s: alice's deployments show globex's, or a badly formatted word: %s", lang, main(page))
		}
		resp, detail := get(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat", "Accept-Language", lang)
		for _, want := range []string{"job-910100", "job-910101", html.EscapeString(l.T("deploy.current")),
			`href="/deployments/gpu1/llm-chat/confirm/rollback?to=job-910100"`, `href="/deployments/gpu1/llm-chat/confirm/delete"`, `href="/jobs/gpu1/910101"`} {
			if !strings.Contains(detail, want) {
				t.Errorf("%s: the deployment page (%s) lacks %q", lang, resp.Status, want)
			}
		}
	}
	resp, confirm := get(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat/confirm/rollback?to=job-910100")
	if resp.StatusCode != http.StatusOK || !strings.Contains(confirm, `action="/deployments/gpu1/llm-chat/rollback"`) || !strings.Contains(confirm, `name="to" value="job-910100"`) {
		t.Errorf("confirm rollback: %s", resp.Status)
	}
	for _, bad := range []string{"/confirm/rollback?to=job-910101", "/confirm/rollback?to=job-1", "/confirm/rollback?to=x", "/confirm/shoot"} {
		if resp, _ := get(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat"+bad); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404 (no such version of hers to go back to)", bad, resp.Status)
		}
	}
	if resp, _ := post(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat/rollback", url.Values{"to": {"job-910100"}}, sameOrigin...); resp.StatusCode != http.StatusBadRequest || len(fb.actions()) != 0 {
		t.Errorf("an unconfirmed rollback: %s, bridge asked %v", resp.Status, fb.actions())
	}
	resp, _ = post(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat/rollback", url.Values{"to": {"job-910100"}, "confirm": {"yes"}}, sameOrigin...)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/deployments/gpu1/llm-chat?done=rollback" {
		t.Errorf("rollback: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if a := fb.actions(); len(a) != 1 || !strings.HasPrefix(a[0], "POST /v1/deployments/llm-chat/rollback") || !strings.Contains(a[0], `"to":"job-910100"`) {
		t.Errorf("the bridge saw %v, want the rollback to job-910100", a)
	}
	resp, _ = post(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat/delete", url.Values{"confirm": {"yes"}}, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden || len(fb.actions()) != 1 {
		t.Errorf("a cross-site delete: %s", resp.Status)
	}
	resp, _ = post(t, alice, b.srv.URL+"/deployments/gpu1/llm-chat/delete", url.Values{"confirm": {"yes"}}, sameOrigin...)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/deployments?done=delete" {
		t.Errorf("delete: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if a := fb.actions(); len(a) != 2 || a[1] != "DELETE /v1/deployments/llm-chat" {
		t.Errorf("the bridge saw %v, want the delete", a)
	}

	viewer := b.client(t)
	b.signIn(t, viewer, "view")
	if resp, page := get(t, viewer, b.srv.URL+"/deployments/gpu1/llm-chat"); resp.StatusCode != http.StatusOK || strings.Contains(page, "/confirm/") {
		t.Errorf("a viewer of acme/llm reading llm-chat (%s) is offered its rollback or delete", resp.Status)
	}
	resp, page := post(t, viewer, b.srv.URL+"/deployments/gpu1/llm-chat/delete", url.Values{"confirm": {"yes"}}, sameOrigin...)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, html.EscapeString(i18n.For("", "").T("deploy.forbidden"))) || len(fb.actions()) != 2 {
		t.Errorf("a viewer's delete: %s, bridge actions %v", resp.Status, fb.actions())
	}

	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	_, list := get(t, bob, b.srv.URL+"/deployments")
	if strings.Contains(list, "llm-chat") || !strings.Contains(list, "rl-policy") {
		t.Errorf("bob's deployments: %s", main(list))
	}
	for _, u := range []string{"/deployments/gpu1/llm-chat", "/deployments/gpu1/llm-chat/confirm/delete", "/deployments/gpu1/llm-chat/confirm/rollback?to=job-910100"} {
		if resp, body := get(t, bob, b.srv.URL+u); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "llm-chat") {
			t.Errorf("bob GET %s: %s", u, resp.Status)
		}
	}
	for _, f := range []struct {
		path string
		v    url.Values
	}{{"/deployments/gpu1/llm-chat/delete", url.Values{"confirm": {"yes"}}}, {"/deployments/gpu1/llm-chat/rollback", url.Values{"confirm": {"yes"}, "to": {"job-910100"}}}} {
		if resp, _ := post(t, bob, b.srv.URL+f.path, f.v, sameOrigin...); resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob POST %s: %s", f.path, resp.Status)
		}
	}
	if n := len(fb.actions()); n != 2 {
		t.Errorf("bob's and the viewer's requests made the bridge act: %v", fb.actions())
	}
}

// TestMayChange: the buttons are offered to whom rbac's deploy models
// lets change a deployment: a member of its project, an admin of its
// tenant or cluster; not a viewer, not a member of another project, not
// a project's member for a tenant's own deployment, not on another
// cluster.
func TestMayChange(t *testing.T) {
	role := func(r string) *string { return &r }
	proj := func(cluster, tenant, project, r string) api.Project {
		return api.Project{Cluster: cluster, Tenant: tenant, Project: project, Role: role(r)}
	}
	llm := api.Deployment{Cluster: "gpu1", Tenant: "acme", Project: "llm"}
	base := api.Deployment{Cluster: "gpu1", Tenant: "acme"}
	for name, tc := range map[string]struct {
		projects []api.Project
		d        api.Deployment
		want     bool
	}{
		"member":                    {[]api.Project{proj("gpu1", "acme", "llm", "member")}, llm, true},
		"viewer":                    {[]api.Project{proj("gpu1", "acme", "llm", "viewer")}, llm, false},
		"member of another":         {[]api.Project{proj("gpu1", "acme", "vision", "member")}, llm, false},
		"tenant admin":              {[]api.Project{proj("gpu1", "acme", "vision", "tenant-admin")}, llm, true},
		"member, tenant's own":      {[]api.Project{proj("gpu1", "acme", "llm", "member")}, base, false},
		"tenant admin, tenant's":    {[]api.Project{proj("gpu1", "acme", "llm", "tenant-admin")}, base, true},
		"cluster admin":             {[]api.Project{proj("gpu1", "globex", "rl", "cluster-admin"), proj("gpu1", "acme", "llm", "cluster-admin")}, llm, true},
		"member on another cluster": {[]api.Project{proj("gpu2", "acme", "llm", "member")}, llm, false},
		"no role":                   {[]api.Project{{Cluster: "gpu1", Tenant: "acme", Project: "llm"}}, llm, false},
	} {
		if got := mayChange(api.ProjectList{Projects: tc.projects}, tc.d); got != tc.want {
			t.Errorf("%s: mayChange = %v, want %v", name, got, tc.want)
		}
	}
}

// TestServeModelPage: alice (mem) is offered to serve the model of her
// completed job (not of her running one, which the page shows served by
// llm-chat), in English and Korean; a check sends the bridge a dry run
// and shows its plan; a deploy leads to the deployment's page; a name
// another tenant holds comes back on the form, refused; a running job's
// deploy is refused by the core before the bridge is asked, as are a
// cross-site post, a viewer's and bob's (gmem), who finds neither the job
// nor its serve page.
func TestServeModelPage(t *testing.T) {
	done := clustertest.Job{ID: 910103, User: "mem", Account: "acme-llm", State: "COMPLETED", Name: "llm-done"}
	b, _ := submitBedWith(t, "../service/testdata/templates", append(slices.Clone(pagesGPU1), done), pagesGPU2)
	fb := b.bridge
	alice := b.client(t)
	b.signIn(t, alice, "mem")
	for _, lang := range []string{"en", "ko"} {
		l := i18n.For(lang, "")
		resp, page := get(t, alice, b.srv.URL+"/jobs/gpu1/910103", "Accept-Language", lang)
		for _, want := range []string{`href="/jobs/gpu1/910103/serve"`, html.EscapeString(l.T("job.serve.open")), html.EscapeString(l.T("job.serve.lead"))} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the completed job's page (%s) lacks %q", lang, resp.Status, want)
			}
		}
		resp, page = get(t, alice, b.srv.URL+"/jobs/gpu1/910103/serve", "Accept-Language", lang)
		for _, want := range []string{`action="/jobs/gpu1/910103/serve"`, `name="name"`, `value="check"`, `value="deploy"`,
			html.EscapeString(l.T("serve.heading", "gpu1", "910103"))} {
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
				t.Errorf("%s: the serve page (%s) lacks %q", lang, resp.Status, want)
			}
		}
	}
	_, running := get(t, alice, b.srv.URL+"/jobs/gpu1/910101")
	if strings.Contains(running, "/serve") || !strings.Contains(running, `href="/deployments/gpu1/llm-chat"`) {
		t.Errorf("the running job's page offers to serve it, or does not show llm-chat serving it: %s", main(running))
	}

	serve := func(c *http.Client, job string, v url.Values, headers ...string) (answer, string) {
		t.Helper()
		return post(t, c, b.srv.URL+"/jobs/gpu1/"+job+"/serve", v, headers...)
	}
	resp, plan := serve(alice, "910103", url.Values{"action": {"check"}, "name": {"llm-done"}}, sameOrigin...)
	for _, want := range []string{"strata-acme", "Deployment/llm-done", "job-910103", `value="llm-done"`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(plan, want) {
			t.Errorf("the check (%s) does not show %q: %s", resp.Status, want, main(plan))
		}
	}
	if a := fb.actions(); len(a) != 1 || a[0] != `POST /v1/deploy {"job":910103,"name":"llm-done","dry_run":true}` {
		t.Errorf("the check sent the bridge %v, want one dry run", a)
	}
	resp, refused := serve(alice, "910103", url.Values{"action": {"deploy"}, "name": {"taken"}}, sameOrigin...)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(refused, "the deployment name is in use by another tenant") ||
		strings.Contains(refused, "globex") || !strings.Contains(refused, html.EscapeString(i18n.For("", "").T("serve.refused"))) {
		t.Errorf("a name another tenant holds: %s %s", resp.Status, main(refused))
	}
	resp, _ = serve(alice, "910103", url.Values{"action": {"deploy"}, "name": {"llm-done"}}, sameOrigin...)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/deployments/gpu1/llm-done?done=deploy" {
		t.Errorf("deploy: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if a := fb.actions(); len(a) != 3 || a[2] != `POST /v1/deploy {"job":910103,"name":"llm-done"}` {
		t.Errorf("the bridge saw %v, want the deploy last", a)
	}

	// Refused before the bridge is asked.
	viewer := b.client(t)
	b.signIn(t, viewer, "view")
	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	for _, tc := range []struct {
		who     string
		c       *http.Client
		job     string
		v       url.Values
		headers []string
		want    int
	}{
		{"alice, a running job", alice, "910101", url.Values{"action": {"deploy"}, "name": {"x"}}, sameOrigin, http.StatusConflict},
		{"alice, no action", alice, "910103", url.Values{"name": {"x"}}, sameOrigin, http.StatusBadRequest},
		{"alice, cross-site", alice, "910103", url.Values{"action": {"deploy"}, "name": {"x"}}, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"a viewer", viewer, "910103", url.Values{"action": {"deploy"}, "name": {"x"}}, sameOrigin, http.StatusForbidden},
		{"bob", bob, "910103", url.Values{"action": {"deploy"}, "name": {"x"}}, sameOrigin, http.StatusNotFound},
	} {
		if resp, _ := serve(tc.c, tc.job, tc.v, tc.headers...); resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.who, resp.Status, tc.want)
		}
	}
	if resp, page := get(t, bob, b.srv.URL+"/jobs/gpu1/910103/serve"); resp.StatusCode != http.StatusNotFound || strings.Contains(page, "llm-done") {
		t.Errorf("bob opens alice's serve page: %s", resp.Status)
	}
	if a := fb.actions(); len(a) != 3 {
		t.Errorf("refused requests reached the bridge: %v", a[3:])
	}
}
