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
		if err := st.StartVersion(ctx, v); err != nil {
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
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "strata_test 1\n") })}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
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
			want: []string{`unknown field \"jbo\"`}},
		"deploy: no job": {method: "POST", path: "/v1/deploy", body: `{}`, wantCode: 400,
			want: []string{`\"job\" is required`}},
		"deploy: not JSON": {method: "POST", path: "/v1/deploy", body: `job=5`, wantCode: 400, want: []string{`"error": "body: `}},
		"deploy: two values": {method: "POST", path: "/v1/deploy", body: `{"job":5}{"job":6}`, wantCode: 400,
			want: []string{"more than one JSON value"}},
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
