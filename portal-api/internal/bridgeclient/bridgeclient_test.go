package bridgeclient

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/bridgeapi"
)

// server is the bridge's API at the network edge: it answers each path
// with a canned body and records what it was sent.
type server struct {
	mu   sync.Mutex
	reqs []string
	// answers by "METHOD path": status and body.
	answers map[string]struct {
		code int
		body string
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Method+" "+r.URL.RequestURI()+" auth="+r.Header.Get("Authorization")+" type="+r.Header.Get("Content-Type")+" "+string(body))
	s.mu.Unlock()
	a, ok := s.answers[r.Method+" "+r.URL.Path]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error": "no route"}`))
		return
	}
	w.WriteHeader(a.code)
	_, _ = w.Write([]byte(a.body))
}

func (s *server) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.reqs
	s.reqs = nil
	return out
}

const list = `{"deployments": [{"name": "llama-ft", "namespace": "strata-acme", "tenant": "acme", "project": "llm", "state": "active",
  "current_job": 4242, "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:05:00Z", "version": "job-4242",
  "current": {"version": "job-4242", "job_id": 4242, "name": "llama-ft", "namespace": "strata-acme", "tenant": "acme", "project": "llm",
    "account": "acme-llm", "user": "alice", "gpus": 2, "tier": "dedicated", "max_replicas": 3, "model": "/shared/llm/llama-ft",
    "spec": {"name": "llama-ft"}, "outcome": "ready", "created_at": "2026-11-30T10:00:00Z", "a_later_field": true}}]}`

func newServer(t *testing.T) (*server, string) {
	s := &server{answers: map[string]struct {
		code int
		body string
	}{
		"GET /v1/deployments": {200, list},
		"POST /v1/deploy": {200, `{"action": "deploy", "name": "llama-ft", "namespace": "strata-acme", "tenant": "acme", "job_id": 4243,
			"version": "job-4243", "changed": true, "outcome": "ready", "message": "rolled out",
			"objects": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "strata-acme", "name": "llama-ft", "action": "configured", "generation_after": 2}]}`},
		"POST /v1/deployments/llama-ft/rollback": {422, `{"error": "refused by the quota check: ...", "check": "quota", "reason": "no room", "fix": "ask for fewer GPUs"}`},
		"DELETE /v1/deployments/llama-ft":        {200, `{"name": "llama-ft", "namespace": "strata-acme", "dry_run": true, "deleted": [{"apiVersion": "v1", "kind": "Service", "namespace": "strata-acme", "name": "llama-ft"}]}`},
	}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func token() ([]byte, error) { return []byte("s3cret"), nil }

// TestDeployments: the list decoded, a field the bridge adds ignored, and
// kept for ListTTL by the clock; an action forgets it.
func TestDeployments(t *testing.T) {
	s, url := newServer(t)
	now := time.Unix(1795983872, 0)
	c := New(Config{URL: url + "/", Token: token, ListTTL: 5 * time.Second, Now: func() time.Time { return now }})
	ds, err := c.Deployments(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	want := []Deployment{{Deployment: bridgeapi.Deployment{Name: "llama-ft", Namespace: "strata-acme", Tenant: "acme", Project: "llm", State: "active", Current: 4242,
		CreatedAt: created, UpdatedAt: created.Add(5 * time.Minute)}, Version: "job-4242",
		Current: &Version{Label: "job-4242", Version: &bridgeapi.Version{JobID: 4242, Name: "llama-ft", Namespace: "strata-acme", Tenant: "acme", Project: "llm", Account: "acme-llm", User: "alice", GPUs: 2, Tier: "dedicated",
			MaxReplicas: 3, ModelPath: "/shared/llm/llama-ft", Spec: json.RawMessage(`{"name": "llama-ft"}`), Outcome: "ready", CreatedAt: created}}}}
	if diff := cmp.Diff(want, ds); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := s.got(); len(got) != 1 || got[0] != "GET /v1/deployments auth=Bearer s3cret type= " {
		t.Errorf("requests = %q", got)
	}
	now = now.Add(4 * time.Second)
	if _, err := c.Deployments(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.got(); len(got) != 0 {
		t.Errorf("a list 4 s old was asked again: %q", got)
	}
	now = now.Add(2 * time.Second)
	_, _ = c.Deployments(t.Context())
	if got := s.got(); len(got) != 1 {
		t.Errorf("a list 6 s old was not asked again: %q", got)
	}
	// A dry run keeps the list; an action forgets it.
	if _, err := c.Delete(t.Context(), "llama-ft", true); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Deployments(t.Context())
	if got := s.got(); len(got) != 1 || !strings.HasPrefix(got[0], "DELETE /v1/deployments/llama-ft?dry_run=true ") {
		t.Errorf("after a dry run: %q", got)
	}
	if _, err := c.Deploy(t.Context(), 4243, "", false); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Deployments(t.Context())
	if got := s.got(); len(got) != 2 || !strings.HasPrefix(got[1], "GET /v1/deployments") {
		t.Errorf("after a deploy the list was not asked again: %q", got)
	}
	// Never kept.
	c = New(Config{URL: url, Token: token, ListTTL: -1})
	_, _ = c.Deployments(t.Context())
	_, _ = c.Deployments(t.Context())
	if got := s.got(); len(got) != 2 {
		t.Errorf("ListTTL < 0 kept the list: %q", got)
	}
}

// TestActions: what each action sends, and what it gets back.
func TestActions(t *testing.T) {
	s, url := newServer(t)
	c := New(Config{URL: url, Token: token})
	res, err := c.Deploy(t.Context(), 4243, "llama-ft", false)
	if err != nil {
		t.Fatal(err)
	}
	want := &Result{Action: "deploy", Name: "llama-ft", Namespace: "strata-acme", Tenant: "acme", JobID: 4243, Version: "job-4243",
		Changed: true, Outcome: "ready", Message: "rolled out",
		Objects: []Applied{{ObjectRef: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "strata-acme", Name: "llama-ft"}, Action: "configured", GenerationAfter: 2}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, err = c.Rollback(t.Context(), "llama-ft", "job-4240", true)
	var be *Error
	if !errors.As(err, &be) || !be.Refused() || be.Check != "quota" || be.Fix != "ask for fewer GPUs" || be.Status != 422 {
		t.Errorf("rollback refused: %#v", err)
	}
	del, err := c.Delete(t.Context(), "llama-ft", false)
	if err != nil || len(del.Deleted) != 1 || del.Deleted[0].Kind != "Service" {
		t.Errorf("delete = %+v, %v", del, err)
	}
	_, err = c.Delete(t.Context(), "a/b", false)
	if !errors.As(err, &be) || be.Status != 404 || be.Msg != "no route" {
		t.Errorf("delete of an unknown name: %#v", err)
	}
	want2 := []string{
		`POST /v1/deploy auth=Bearer s3cret type=application/json {"job":4243,"name":"llama-ft"}`,
		`POST /v1/deployments/llama-ft/rollback auth=Bearer s3cret type=application/json {"to":"job-4240","dry_run":true}`,
		`DELETE /v1/deployments/llama-ft auth=Bearer s3cret type= `,
		`DELETE /v1/deployments/a%2Fb auth=Bearer s3cret type= `,
	}
	if diff := cmp.Diff(want2, s.got()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestErrors: a token that cannot be read sends nothing; a bridge that is
// not there, or answers what is not its error, is an error with the status.
func TestErrors(t *testing.T) {
	s, url := newServer(t)
	c := New(Config{URL: url, Token: func() ([]byte, error) {
		return nil, errors.New("bridge-api.token (mode 0644) is readable by every user")
	}})
	if _, err := c.Deployments(t.Context()); err == nil || !strings.Contains(err.Error(), "bridge token") {
		t.Errorf("unreadable token: %v", err)
	}
	if got := s.got(); len(got) != 0 {
		t.Errorf("sent without a token: %q", got)
	}
	if _, err := New(Config{URL: url}).Deployments(t.Context()); err == nil {
		t.Error("no token configured: no error")
	}
	s.answers["GET /v1/deployments"] = struct {
		code int
		body string
	}{502, "<html>bad gateway</html>"}
	_, err := New(Config{URL: url, Token: token}).Deployments(t.Context())
	var be *Error
	if !errors.As(err, &be) || be.Status != 502 || be.Error() != "the bridge answered 502" {
		t.Errorf("a proxy's error page: %#v", err)
	}
	s.answers["GET /v1/deployments"] = struct {
		code int
		body string
	}{200, "not json"}
	if _, err := New(Config{URL: url, Token: token}).Deployments(t.Context()); err == nil || errors.As(err, &be) {
		t.Errorf("an answer that is not JSON: %v", err)
	}
	if _, err := New(Config{URL: "http://127.0.0.1:1", Token: token}).Deployments(t.Context()); err == nil {
		t.Error("no bridge: no error")
	}
}
