package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/sqlite"
	"github.com/strata-hpc/strata/internal/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// server serves the API over a real store holding deployment "llama"
// (versions job-101, ready, then job-102, current) and a deployer whose
// cluster is unreachable: these tests cover what answers without one
// (the integration tests cover the rest on a real apiserver).
func server(t *testing.T, health func() (any, error)) *httptest.Server {
	t.Helper()
	return serverAt(t, health, filepath.Join(t.TempDir(), "bridge.db"), store.Options{})
}

func serverAt(t *testing.T, health func() (any, error), path string, o store.Options) *httptest.Server {
	t.Helper()
	ctx := t.Context()
	st, err := store.OpenOptions(ctx, path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, job := range []int64{101, 102} {
		v := store.Version{JobID: job, Name: "llama", Namespace: "strata-acme", Tenant: "acme", Account: "acme-llm", User: "alice",
			GPUs: 1, MaxReplicas: 1, ModelPath: "/shared/llama", Spec: json.RawMessage(`{"name":"llama"}`),
			Objects: json.RawMessage(`[{"apiVersion":"apps/v1","kind":"Deployment"}]`), CreatedAt: t0.Add(time.Duration(i) * time.Hour)}
		if err := st.StartVersion(ctx, v, "deploy"); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishVersion(ctx, store.Finish{Name: "llama", JobID: job, Action: "deploy", Outcome: store.OutcomeReady,
			Applied: true, At: v.CreatedAt.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	kube, err := deploy.NewKube(&rest.Config{Host: "https://127.0.0.1:1"}, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	empty := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind}
	dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Serving: func() *servingquota.File { return empty }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Config{Deployer: dep, Store: st, Health: health,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "strata_test 1\n") }),
		Token:   func() ([]byte, error) { return []byte(testToken), nil }, AllowedHosts: []string{"bridge.example.org"}}))
	t.Cleanup(srv.Close)
	return srv
}

const testToken = "t0ken-for-tests"

// do makes a request as a client that knows the token: the bearer token,
// and Content-Type: application/json on a POST.
func do(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + testToken}}
	if method == http.MethodPost || body != "" {
		h.Set("Content-Type", "application/json")
	}
	return doWith(t, srv, method, path, body, h)
}

func doWith(t *testing.T, srv *httptest.Server, method, path, body string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if k == "Host" {
			req.Host = v[0]
			continue
		}
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); path != "/metrics" && ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp.StatusCode, string(data)
}

// Each route's answer without a cluster: status code and what the body
// must hold.
func TestRoutes(t *testing.T) {
	srv := server(t, nil)
	tests := map[string]struct {
		method, path, body string
		wantCode           int
		want               []string
		notWant            []string
	}{
		"list": {method: "GET", path: "/v1/deployments", wantCode: 200,
			want: []string{`"name": "llama"`, `"version": "job-102"`, `"current_job": 102`, `"outcome": "ready"`}, notWant: []string{`"objects"`}},
		"one, without objects": {method: "GET", path: "/v1/deployments/llama", wantCode: 200,
			want: []string{`"version": "job-101"`, `"version": "job-102"`, `"action": "deploy"`, `"spec": {`}, notWant: []string{`"objects"`}},
		"one, with objects": {method: "GET", path: "/v1/deployments/llama?objects=true", wantCode: 200,
			want: []string{`"objects": [`, `"kind": "Deployment"`}},
		"unknown deployment": {method: "GET", path: "/v1/deployments/nope", wantCode: 404,
			want: []string{`"error": "deployment nope: not found"`}},
		"deploy: unknown field": {method: "POST", path: "/v1/deploy", body: `{"job": 5, "jbo": 6}`, wantCode: 400,
			want: []string{`body: 1:12: jbo: unknown field; the fields here are job, name, dry_run`}},
		"deploy: a field given twice": {method: "POST", path: "/v1/deploy", body: `{"job": 5, "job": 6}`, wantCode: 400,
			want: []string{`body: 1:12: job: given twice (first at 1:2)`}},
		"deploy: dry_run given twice": {method: "POST", path: "/v1/deploy", body: `{"job": 5, "dry_run": true, "dry_run": false}`, wantCode: 400,
			want: []string{`dry_run: given twice`}},
		"deploy: a trailing bracket": {method: "POST", path: "/v1/deploy", body: `{"job": 5}]`, wantCode: 400,
			want: []string{`body: 1:11: `}},
		"deploy: a job of the wrong type": {method: "POST", path: "/v1/deploy", body: `{"job": "5"}`, wantCode: 400,
			want: []string{`body: 1:9: job: `}},
		"rollback: a field given twice": {method: "POST", path: "/v1/deployments/llama/rollback", body: `{"to":"job-101","to":"job-100"}`, wantCode: 400,
			want: []string{`to: given twice`}},
		"deploy: no job": {method: "POST", path: "/v1/deploy", body: `{}`, wantCode: 400,
			want: []string{`\"job\" is required`}},
		"deploy: not JSON": {method: "POST", path: "/v1/deploy", body: `job=5`, wantCode: 400, want: []string{`"error": "body: `}},
		"deploy: two values": {method: "POST", path: "/v1/deploy", body: `{"job":5}{"job":6}`, wantCode: 400,
			want: []string{"unexpected data after the document"}},
		"rollback: bad version": {method: "POST", path: "/v1/deployments/llama/rollback", body: `{"to":"v1"}`, wantCode: 400,
			want: []string{`version \"v1\": want job-\u003cid\u003e`}},
		"rollback: unknown deployment is refused": {method: "POST", path: "/v1/deployments/nope/rollback", wantCode: 422,
			want: []string{`"check": "version"`, `there is no deployment named \"nope\"`, `"fix": "see the deployments with strata-bridge list"`}},
		"rollback: the account left the policy": {method: "POST", path: "/v1/deployments/llama/rollback", body: `{"to":"job-101"}`, wantCode: 422,
			want: []string{`"check": "tenant"`, `account \"acme-llm\" is not in serving.json`}},
		"delete: unknown": {method: "DELETE", path: "/v1/deployments/nope", wantCode: 404, want: []string{"there is no deployment named"}},
		"delete: bad dry_run": {method: "DELETE", path: "/v1/deployments/llama?dry_run=maybe", wantCode: 400,
			want: []string{`dry_run=\"maybe\": want true or false`}},
		"unknown route": {method: "GET", path: "/v2/things", wantCode: 404, want: []string{"no route GET /v2/things"}},
		"wrong method":  {method: "PUT", path: "/v1/deploy", wantCode: 404, want: []string{"no route PUT /v1/deploy: see"}},
		"healthz":       {method: "GET", path: "/healthz", wantCode: 200, want: []string{`"status": "ok"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, body := do(t, srv, tc.method, tc.path, tc.body)
			if code != tc.wantCode {
				t.Errorf("%s %s = %d, want %d\n%s", tc.method, tc.path, code, tc.wantCode, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s:\n%s", w, body)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(body, w) {
					t.Errorf("body holds %s:\n%s", w, body)
				}
			}
		})
	}
}

// Every /v1 route wants the token, an allowed Host and a JSON body;
// /healthz and /metrics want none of them.
func TestGuard(t *testing.T) {
	srv := server(t, nil)
	auth := "Bearer " + testToken
	tests := map[string]struct {
		method, path, body string
		header             http.Header
		wantCode           int
		want               string
	}{
		"list without a token":       {method: "GET", path: "/v1/deployments", wantCode: 401, want: "missing or wrong bearer token"},
		"list with a wrong token":    {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {"Bearer nope"}}, wantCode: 401},
		"list with a longer token":   {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth + "x"}}, wantCode: 401},
		"list with a prefix":         {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth[:len(auth)-1]}}, wantCode: 401},
		"token as Basic":             {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {"Basic " + testToken}}, wantCode: 401},
		"token without a scheme":     {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {testToken}}, wantCode: 401},
		"list with the token":        {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth}}, wantCode: 200, want: `"llama"`},
		"scheme in lower case":       {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {"bearer " + testToken}}, wantCode: 200},
		"delete without a token":     {method: "DELETE", path: "/v1/deployments/llama", wantCode: 401},
		"unknown route, no token":    {method: "GET", path: "/v2/x", wantCode: 401},
		"deploy without a token":     {method: "POST", path: "/v1/deploy", body: `{"job": 5}`, header: http.Header{"Content-Type": {"application/json"}}, wantCode: 401},
		"deploy as text/plain":       {method: "POST", path: "/v1/deploy", body: `{"job": 5}`, header: http.Header{"Authorization": {auth}, "Content-Type": {"text/plain"}}, wantCode: 415, want: "reads JSON only"},
		"deploy as a form":           {method: "POST", path: "/v1/deploy", body: `job=5`, header: http.Header{"Authorization": {auth}, "Content-Type": {"application/x-www-form-urlencoded"}}, wantCode: 415},
		"deploy without a type":      {method: "POST", path: "/v1/deploy", body: `{"job": 5}`, header: http.Header{"Authorization": {auth}}, wantCode: 415},
		"rollback, no body, no type": {method: "POST", path: "/v1/deployments/llama/rollback", header: http.Header{"Authorization": {auth}}, wantCode: 415},
		"deploy as JSON with charset": {method: "POST", path: "/v1/deploy", body: `{}`, header: http.Header{"Authorization": {auth}, "Content-Type": {"application/json; charset=utf-8"}}, wantCode: 400,
			want: `\"job\" is required`},
		"delete with a text body": {method: "DELETE", path: "/v1/deployments/llama", body: "x", header: http.Header{"Authorization": {auth}, "Content-Type": {"text/plain"}}, wantCode: 415},
		"foreign Host":            {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth}, "Host": {"evil.example.com"}}, wantCode: 421, want: "is not a name of this API"},
		"foreign Host, port":      {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth}, "Host": {"evil.example.com:9464"}}, wantCode: 421},
		"allowed Host":            {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth}, "Host": {"Bridge.Example.ORG:9464"}}, wantCode: 200},
		"localhost":               {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth}, "Host": {"localhost:9464"}}, wantCode: 200},
		"[::1]":                   {method: "GET", path: "/v1/deployments", header: http.Header{"Authorization": {auth}, "Host": {"[::1]:9464"}}, wantCode: 200},
		"foreign Host, no token":  {method: "GET", path: "/v1/deployments", header: http.Header{"Host": {"evil.example.com"}}, wantCode: 421},
		"healthz, anyone":         {method: "GET", path: "/healthz", header: http.Header{"Host": {"evil.example.com"}}, wantCode: 200},
		"metrics, anyone":         {method: "GET", path: "/metrics", header: http.Header{"Host": {"prometheus.example.com"}}, wantCode: 200, want: "strata_test 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, body := doWith(t, srv, tc.method, tc.path, tc.body, tc.header)
			if code != tc.wantCode || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s = %d, want %d with %q\n%s", tc.method, tc.path, code, tc.wantCode, tc.want, body)
			}
			if strings.Contains(body, testToken) {
				t.Errorf("the answer quotes the token:\n%s", body)
			}
		})
	}
}

// Without a token source, or with one that fails (a token file made
// world-readable), every /v1 request is refused.
func TestGuardWithoutToken(t *testing.T) {
	for name, token := range map[string]func() ([]byte, error){
		"none":    nil,
		"failing": func() ([]byte, error) { return nil, errors.New("api.token_file: mode 0644") },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(Config{Token: token}))
			defer srv.Close()
			code, body := doWith(t, srv, "GET", "/v1/deployments", "", http.Header{"Authorization": {"Bearer "}})
			if code != http.StatusServiceUnavailable {
				t.Errorf("= %d %s, want 503", code, body)
			}
			if strings.Contains(body, "0644") {
				t.Errorf("the answer says why to an anonymous client: %s", body)
			}
		})
	}
}

func TestHealthAndMetrics(t *testing.T) {
	srv := server(t, func() (any, error) {
		return map[string]int{"jobs": 3}, errors.New("the last poll failed: slurmrestd down")
	})
	code, body := do(t, srv, "GET", "/healthz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "slurmrestd down") || !strings.Contains(body, `"jobs": 3`) {
		t.Errorf("/healthz = %d %s, want 503 with the error and the detail", code, body)
	}
	code, body = do(t, srv, "GET", "/metrics", "")
	if code != 200 || body != "strata_test 1\n" {
		t.Errorf("/metrics = %d %q", code, body)
	}
}

func TestParseVersion(t *testing.T) {
	tests := map[string]int64{"job-122": 122, "122": 122, "job-0": 0, "job-": 0, "v1": 0, "job--3": 0, "": 0, "job-9223372036854775808": 0}
	for in, want := range tests {
		got, err := ParseVersion(in)
		if got != want || (want == 0) != (err != nil) {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"job-122", "122", "job-", "v1", "job--3", "job-9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseVersion(s)
		if err == nil && n <= 0 {
			t.Errorf("ParseVersion(%q) = %d without error", s, n)
		}
		if err == nil {
			if m, err := ParseVersion(versionName(n)); err != nil || m != n {
				t.Errorf("round trip of %d: %d, %v", n, m, err)
			}
		}
	})
}

// FuzzDecodeDeploy feeds request bodies to the strict decoder: it never
// panics, and whatever it accepts re-encodes to a body it accepts again.
func FuzzDecodeDeploy(f *testing.F) {
	for _, s := range []string{`{"job": 5}`, `{"job": 5, "name": "x", "dry_run": true}`, `{"jbo": 1}`, ``, `{"job":5}{}`, `[1]`, `{"job": "5"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req DeployRequest
		r := httptest.NewRequest(http.MethodPost, "/v1/deploy", strings.NewReader(body))
		if err := decode(r, &req); err != nil {
			return
		}
		data, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var again DeployRequest
		if err := decode(httptest.NewRequest(http.MethodPost, "/v1/deploy", strings.NewReader(string(data))), &again); err != nil || again != req {
			t.Errorf("re-decoding %s: %+v, %v; want %+v", data, again, err, req)
		}
	})
}

// FuzzGuard: whatever the Authorization and Host headers say, a /v1
// request is served only with the exact token and an allowed Host, and
// no answer quotes the token. Seeded from TestGuard's headers.
func FuzzGuard(f *testing.F) {
	for _, s := range [][2]string{{"Bearer " + testToken, "127.0.0.1"}, {"bearer " + testToken, "localhost:9464"}, {"Bearer nope", "[::1]:1"},
		{"Basic " + testToken, "bridge.example.org"}, {testToken, "127.0.0.1"}, {"Bearer " + testToken + "x", "evil.example.com"},
		{"Bearer  " + testToken, "127.0.0.1"}, {"", ""}, {"Bearer " + testToken, "127.0.0.1.evil.example.com"}} {
		f.Add(s[0], s[1])
	}
	h := Handler(Config{Token: func() ([]byte, error) { return []byte(testToken), nil }, AllowedHosts: []string{"bridge.example.org"}})
	f.Fuzz(func(t *testing.T, auth, host string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/nothing", nil)
		r.Header.Set("Authorization", auth)
		r.Host = host
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, r)
		scheme, tok, _ := strings.Cut(auth, " ")
		allowed := map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "bridge.example.org": true}[normalHost(host)]
		authorized := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == testToken
		if served := rr.Code == http.StatusNotFound; served != (allowed && authorized) {
			t.Errorf("Authorization %q, Host %q: %d (allowed host %v, token %v)", auth, host, rr.Code, allowed, authorized)
		}
		if strings.Contains(rr.Body.String(), testToken) {
			t.Errorf("the answer quotes the token: %s", rr.Body)
		}
	})
}

// With the database locked by another process, a refusal is answered only
// once its event is written: a lock that lets go within the retries gives
// the refusal and its event; one that outlasts them gives 500, no verdict.
// A delete that fails in the cluster is recorded as a failed delete.
func TestActionsUnderALockedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bridge.db")
	fast := store.Options{BusyTimeout: 20 * time.Millisecond, Retry: sqlite.Retry{Attempts: 20, Wait: 10 * time.Millisecond, MaxWait: 50 * time.Millisecond}}
	srv := serverAt(t, nil, path, fast)
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events := func(action, outcome string) []store.Event {
		t.Helper()
		ev, err := st.Events(t.Context(), "llama")
		if err != nil {
			t.Fatal(err)
		}
		var out []store.Event
		for _, e := range ev {
			if e.Action == action && e.Outcome == outcome {
				out = append(out, e)
			}
		}
		return out
	}
	rollback := func() (int, string) {
		return do(t, srv, "POST", "/v1/deployments/llama/rollback", `{"to":"job-101"}`)
	}

	release := sqlitetest.Lock(t, path)
	go func() {
		time.Sleep(200 * time.Millisecond) // past several busy timeouts, within the retries
		release()
	}()
	if code, body := rollback(); code != http.StatusUnprocessableEntity || !strings.Contains(body, `"check": "tenant"`) {
		t.Errorf("rollback refused under a short lock = %d %s; want 422", code, body)
	}
	if got := events("rollback", "refused"); len(got) != 1 {
		t.Errorf("refusal events after a short lock: %+v; want one", got)
	}

	sqlitetest.Lock(t, path) // held to the test's end
	code, body := rollback()
	if code != http.StatusInternalServerError || !strings.Contains(body, "rollback refusal of llama could not be recorded") ||
		!strings.Contains(body, "database locked by another process after 20 tries") {
		t.Errorf("rollback refused under a lasting lock = %d %s; want 500 saying the refusal was not recorded", code, body)
	}
}

// A delete that fails in the cluster (here: the apiserver is unreachable)
// is an event of its own, with what it had removed and why it stopped.
func TestFailedDeleteIsRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bridge.db")
	srv := serverAt(t, nil, path, store.Options{})
	code, body := do(t, srv, "DELETE", "/v1/deployments/llama", "")
	if code != http.StatusInternalServerError || !strings.Contains(body, "the Kubernetes apiserver did not answer discovery") ||
		strings.Contains(body, "does not serve this kind") {
		t.Errorf("DELETE with the apiserver unreachable = %d %s; want 500 saying the apiserver did not answer", code, body)
	}
	code, body = do(t, srv, "GET", "/v1/deployments/llama", "")
	if code != 200 || !strings.Contains(body, `"action": "delete"`) || !strings.Contains(body, `"outcome": "failed"`) ||
		!strings.Contains(body, "delete failed after 0 objects") || !strings.Contains(body, `"state": "active"`) {
		t.Errorf("deployment after a failed delete = %d %s; want a failed delete event and the deployment still active", code, body)
	}
}
