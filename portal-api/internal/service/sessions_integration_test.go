//go:build integration

package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/session"
	"github.com/strata-hpc/strata/portal-api/internal/session/sessiontest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// Sessions through the whole portal on a test bed started with
// `testbed.sh up --sessions` (JupyterLab and ttyd in its root): alice
// starts the shipped templates with POST /v1/sessions, as the portal's
// own jobs, and reaches their servers through /v1/sessions/{id}/proxy/
// with her token or the session's cookie; bob reaches none of it.

const shippedTemplates = "../../../etc/strata/templates"

// sessionPortal is a strata-portal-api over one bed with sessions: its
// poller and idle loop running, the shipped templates, a job policy whose
// interactive class runs on the bed's partition.
type sessionPortal struct {
	b       *testbed.Bed
	name    string           // the cluster's name in the portal
	srv     *httptest.Server // the pages' and the API's origin (127.0.0.1)
	origin  string           // the sessions' origin: the same listener as localhost
	server  *Server
	st      *store.Store
	admin   *slurmrest.Client
	tokens  map[string]string
	alice   string
	bob     string
	h       *harness // validates the API's answers against openapi.yaml
	logs    *syncBuffer
	started time.Time
}

// syncBuffer keeps the portal's log, printed when a test fails.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sessionBed runs fn on every bed that has the session servers.
func sessionBed(t *testing.T, fn func(t *testing.T, b *testbed.Bed)) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		if !b.Sessions {
			t.Skipf("test bed %s has no session servers: start it with testbed.sh up --sessions", b.Name)
		}
		b.DumpLogsOnFailure(t)
		fn(t, b)
	})
}

// sessionRootOf is the portal's session_root on b. The portal runs on the
// host and reads a session's folder at its host path, beneath the bed's
// root; the jobs run chrooted in the root and are given the same path
// (STRATA_SESSION_DIR), so the root holds its own host path as a link to
// "/", as a site mounts its shared file system at one path everywhere.
// Each user has a folder of their own, as under /home/{user}.
func sessionRootOf(t *testing.T, b *testbed.Bed, users ...string) string {
	t.Helper()
	self := b.HostPath(b.Root)
	if err := os.MkdirAll(filepath.Dir(self), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", self); err != nil {
		if to, lerr := os.Readlink(self); lerr != nil || to != "/" {
			t.Fatalf("the root's link to itself: %v", err)
		}
	}
	root := b.HostPath(path.Join(b.JobDir, "portal-sessions"))
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		uid, err := sessiontest.UserID(b, u)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, u)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(uid), int(uid)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "{user}")
}

// bedJobPolicy is the job policy of the bed: alice's project may start
// the interactive class (two GPUs a job at most, 12 hours) on the bed's
// partition.
func bedJobPolicy(t *testing.T, b *testbed.Bed, alice string) *jobpolicy.Policy {
	t.Helper()
	p, err := jobpolicy.Parse([]byte(fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "JobPolicy", "source": "policy.yaml",
	  "cluster": %q, "default_class": "interactive", "classes_line": 10,
	  "classes": {"interactive": {"partition": %q, "default_time": 120, "max_time": 720, "requeue": false, "whole_nodes": false,
	    "switches": 0, "max_gpus_per_job": 2, "line": 30, "max_time_line": 32, "max_gpus_line": 33, "whole_nodes_line": 30}},
	  "partitions": {%q: "interactive"},
	  "accounts": {%q: {"tenant": "lab", "project": "main", "line": 50, "classes": ["interactive"], "classes_line": 51,
	    "gpus": {"limit": 16, "owner": "account %s", "line": 52}, "gpus_by_type": {}, "members": [%q], "viewers": {}}},
	  "users": {%q: %q}}`, b.Cluster, b.Partition, b.Partition, b.Account, b.Account, alice, alice, b.Account)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newSessionPortal serves b as cluster s<version> of a portal whose
// reclaimd is reclaimdURL ("": none).
func newSessionPortal(t *testing.T, b *testbed.Bed, reclaimdURL string) *sessionPortal {
	t.Helper()
	return newPortal(t, b, portalOpts{reclaimdURL: reclaimdURL})
}

// portalOpts are what the portals of these tests differ in.
type portalOpts struct {
	reclaimdURL string            // "": no reclaimd
	set         *templates.Set    // nil: the shipped templates
	policy      *jobpolicy.Policy // nil: bedJobPolicy
	workDir     string            // "": the bed's JobDir
	sessionRoot string            // "": sessionRootOf the bed, for alice and bob
}

// newPortal serves b as cluster s<version> of a portal set up as o says.
func newPortal(t *testing.T, b *testbed.Bed, o portalOpts) *sessionPortal {
	t.Helper()
	reclaimdURL := o.reclaimdURL
	if len(b.Users) < 2 {
		t.Fatalf("the test bed has users %v: two are needed", b.Users)
	}
	ctx := testbed.Context(t)
	p := &sessionPortal{b: b, name: "s" + strings.ReplaceAll(b.Version, ".", ""), admin: b.Client(t), tokens: map[string]string{},
		alice: b.Users[0], bob: b.Users[1], h: &harness{t: t, router: specRouter(t)}, logs: &syncBuffer{}}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p.st = st
	for _, u := range []string{p.alice, p.bob} {
		tok, _, err := st.CreateToken(ctx, u, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		p.tokens[u] = tok
	}
	set := o.set
	if set == nil {
		if set, err = templates.Load(shippedTemplates); err != nil {
			t.Fatal(err)
		}
	}
	signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The poller reads the cluster every second: a session's job shows
	// RUNNING, and its proxy opens, at most a second after Slurm starts it.
	poller := cluster.New(cluster.Config{Name: p.name, Slurm: slurmrest.Config{URL: b.URL, User: b.AdminUser, Tokens: signer},
		Interval: time.Second, StaleAfter: 30 * time.Second, Log: log})
	if err := poller.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	m := tenantsOf(t, b, p.alice, p.bob)
	policy := o.policy
	if policy == nil {
		policy = bedJobPolicy(t, b, p.alice)
	}
	workDir, sessionRoot := cmp.Or(o.workDir, b.JobDir), o.sessionRoot
	if sessionRoot == "" {
		sessionRoot = sessionRootOf(t, b, p.alice, p.bob)
	}
	c := Cluster{Poller: poller, Tenants: func() *tenantmap.Map { return m }, Policy: func() *jobpolicy.Policy { return policy },
		ReclaimdURL: reclaimdURL, WorkDir: workDir, SessionRoot: sessionRoot, SessionIdleLimit: 2 * time.Hour,
		ReclaimdToken: func() ([]byte, error) { return []byte(sessionReclaimdToken), nil }}
	// The sessions' origin is the same listener by another name
	// (localhost), so a browser's cookies of one are not the other's.
	var s *Server
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.ServeHTTP(w, r) }))
	_, port, _ := net.SplitHostPort(p.srv.Listener.Addr().String())
	p.origin = "http://localhost:" + port
	origin, err := ParseSessionOrigin(p.origin)
	if err != nil {
		t.Fatal(err)
	}
	s = New(Config{Clusters: []Cluster{c}, Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st,
		Templates: func() *templates.Set { return set }, Log: log,
		Sessions: SessionConfig{Transport: &http.Transport{DialContext: sessiontest.NodeDialer(b)}, IdleInterval: 2 * time.Second, Origin: origin}})
	p.server = s
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	p.h.srv, p.h.tokens, p.h.server = p.srv, p.tokens, s
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{poller.Run, s.IdleLoop().Run} {
		wg.Go(func() { _ = run(runCtx) })
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the portal's log:\n%s", p.logs.String())
		}
	})
	return p
}

// do sends an API request as user and validates the answer against
// openapi.yaml.
func (p *sessionPortal) do(user, method, path string, body any) (int, []byte) {
	return p.h.do(user, method, path, body)
}

// answer is a proxied request's answer, its body read and closed.
type answer struct {
	StatusCode   int
	Header       http.Header
	Method, Path string
}

// proxied sends a request to a session's proxy as user (its bearer
// token), or with client's cookies when user is "".
func (p *sessionPortal) proxied(t *testing.T, client *http.Client, user, method, id, rest string, body io.Reader) (answer, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.origin+"/v1/sessions/"+id+"/proxy/"+rest, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+p.tokens[user])
	}
	if client == nil {
		client = p.srv.Client()
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{StatusCode: resp.StatusCode, Header: resp.Header, Method: method, Path: req.URL.Path}, data
}

// sessionView is the part of a session's answer the tests read.
type sessionView struct {
	ID        string   `json:"id"`
	State     string   `json:"state"`
	Ready     bool     `json:"ready"`
	URL       string   `json:"url"`
	JobID     int64    `json:"job_id"`
	Node      string   `json:"node"`
	GPUs      []string `json:"gpus"`
	EndReason string   `json:"end_reason"`
	IdleJudge string   `json:"idle_judge"`
	Reclaim   *struct {
		Action  string `json:"action"`
		Reason  string `json:"reason"`
		Rule    string `json:"rule"`
		Outcome string `json:"outcome"`
	} `json:"reclaim"`
}

// start starts a session of template as alice and returns it as the
// portal answered; its job is cancelled when the test ends.
func (p *sessionPortal) start(t *testing.T, template string, params map[string]string) sessionView {
	t.Helper()
	p.started = time.Now()
	code, body := p.do(p.alice, http.MethodPost, "/v1/sessions", map[string]any{"cluster": p.name, "template": template, "params": params})
	var s sessionView
	if err := json.Unmarshal(body, &s); code != http.StatusCreated || err != nil || s.ID == "" || s.JobID == 0 {
		t.Fatalf("POST /v1/sessions %s as %s = %d %s", template, p.alice, code, body)
	}
	t.Cleanup(func() { _ = p.admin.Cancel(context.Background(), s.JobID) })
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{fmt.Sprintf("slurm-%d.out", s.JobID)} {
				out, _ := os.ReadFile(p.b.HostPath(path.Join(p.b.JobDir, f)))
				t.Logf("%s of session %s:\n%s", f, s.ID, out)
			}
		}
	})
	return s
}

// get is GET /v1/sessions/{id} as alice.
func (p *sessionPortal) get(t *testing.T, id string) sessionView {
	t.Helper()
	code, body := p.do(p.alice, http.MethodGet, "/v1/sessions/"+id, nil)
	var s sessionView
	if err := json.Unmarshal(body, &s); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/sessions/%s = %d %s", id, code, body)
	}
	return s
}

// waitReady waits until GET /v1/sessions/{id} says the session is ready.
func (p *sessionPortal) waitReady(t *testing.T, id string) sessionView {
	t.Helper()
	for end := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		s := p.get(t, id)
		if s.Ready {
			return s
		}
		if s.EndReason != "" || time.Now().After(end) {
			t.Fatalf("session %s not ready: %+v", id, s)
		}
	}
}

// wantRefused wants a proxied request refused with status and code.
func wantRefused(t *testing.T, resp answer, body []byte, status int, code string) {
	t.Helper()
	var e struct{ Code string }
	_ = json.Unmarshal(body, &e)
	if resp.StatusCode != status || e.Code != code {
		t.Errorf("%s %s = %d %s, want %d %s", resp.Method, resp.Path, resp.StatusCode, body, status, code)
	}
}

// dialProxy opens a WebSocket through the session's proxy, as user (its
// bearer token) or with client's cookies.
func (p *sessionPortal) dialProxy(t *testing.T, client *http.Client, user, id, rest string, subprotocols ...string) *websocket.Conn {
	t.Helper()
	h := http.Header{"Origin": {p.origin}}
	if user != "" {
		h.Set("Authorization", "Bearer "+p.tokens[user])
	}
	u := "ws" + strings.TrimPrefix(p.origin, "http") + "/v1/sessions/" + id + "/proxy/" + rest
	ws, resp, err := websocket.Dial(testbed.Context(t), u, &websocket.DialOptions{HTTPClient: client, HTTPHeader: h, Subprotocols: subprotocols})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("WebSocket %s through the portal: %v", rest, err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// TestIntegrationSessionJupyterLab: alice starts the shipped JupyterLab
// template through the portal; it turns ready with its proxy URL; through
// the proxy, with her token and then with the session's cookie as a
// browser holds it, a Jupyter API call and a kernel round trip (1+1 is 2)
// work and the kernel sees the job's GPUs; bob gets 404 on the session,
// its proxy and its cookie; DELETE cancels the job, audited, and the
// proxy then refuses the session. It prints the time from POST
// /v1/sessions to /lab answering 200 through the portal's proxy.
func TestIntegrationSessionJupyterLab(t *testing.T) {
	sessionBed(t, func(t *testing.T, b *testbed.Bed) {
		p := newSessionPortal(t, b, "")
		ctx := testbed.Context(t)
		s := p.start(t, "jupyterlab", map[string]string{"gpus": "2", "hours": "1"})
		t0 := p.started
		if want := p.origin + "/v1/sessions/" + s.ID + "/proxy/"; s.URL != want || s.Ready {
			t.Errorf("the started session: url %q, ready %v; want %q, not ready", s.URL, s.Ready, want)
		}
		// Usable: /lab answers 200 through the portal's proxy.
		var running, ready, usable time.Duration
		for end := time.Now().Add(3 * time.Minute); usable == 0 || ready == 0; time.Sleep(100 * time.Millisecond) {
			if ready == 0 {
				v := p.get(t, s.ID)
				if running == 0 && v.State == "RUNNING" {
					running = time.Since(t0)
				}
				if v.Ready {
					ready = time.Since(t0)
					s = v
				}
				if v.EndReason != "" {
					t.Fatalf("session ended: %+v", v)
				}
			}
			if usable == 0 {
				if resp, _ := p.proxied(t, nil, p.alice, http.MethodGet, s.ID, "lab", nil); resp.StatusCode == http.StatusOK {
					usable = time.Since(t0)
				}
			}
			if time.Now().After(end) {
				t.Fatalf("session %s: not usable after 3 minutes (running after %s, ready after %s)", s.ID, running, ready)
			}
		}
		t.Logf("\nPOST /v1/sessions (jupyterlab, 2 GPUs) to a usable JupyterLab through the portal, the portal polling every second:\n"+
			"  RUNNING in GET /v1/sessions/{id}  %s\n  ready (connection file pinned)   %s\n  /lab 200 through the proxy       %s",
			running.Round(10*time.Millisecond), ready.Round(10*time.Millisecond), usable.Round(10*time.Millisecond))
		if s.State != "RUNNING" || s.Node == "" || len(s.GPUs) != 2 || s.IdleJudge != "reclaimd" {
			t.Errorf("the ready session: %+v, want RUNNING on a node with 2 GPUs, judged idle by reclaimd", s)
		}
		// The server's secret, as the job wrote it, never reaches the browser.
		rec, err := p.st.GetSession(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := os.ReadFile(filepath.Join(rec.Dir, session.FileName))
		if err != nil {
			t.Fatal(err)
		}
		var file struct{ Secret string }
		if err := json.Unmarshal(conn, &file); err != nil || len(file.Secret) < 32 {
			t.Fatalf("the session's connection file: %v", err)
		}
		for _, rest := range []string{"lab", "api/status", "lab/api/settings"} {
			resp, body := p.proxied(t, nil, p.alice, http.MethodGet, s.ID, rest, nil)
			if bytes.Contains(body, []byte(file.Secret)) || strings.Contains(fmt.Sprint(resp.Header), file.Secret) {
				t.Errorf("GET %s through the portal (%d) holds the server's secret", rest, resp.StatusCode)
			}
		}

		// With alice's token: a Jupyter API call, a kernel, its WebSocket.
		resp, body := p.proxied(t, nil, p.alice, http.MethodGet, s.ID, "api/status", nil)
		var status struct {
			Started string `json:"started"`
		}
		if err := json.Unmarshal(body, &status); resp.StatusCode != http.StatusOK || err != nil || status.Started == "" {
			t.Fatalf("GET api/status through the portal: %d %s", resp.StatusCode, body)
		}
		resp, body = p.proxied(t, nil, p.alice, http.MethodPost, s.ID, "api/kernels", strings.NewReader(`{"name":"python3"}`))
		var kernel struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &kernel); resp.StatusCode != http.StatusCreated || err != nil || kernel.ID == "" {
			t.Fatalf("POST api/kernels through the portal: %d %s", resp.StatusCode, body)
		}
		ws := p.dialProxy(t, nil, p.alice, s.ID, "api/kernels/"+kernel.ID+"/channels")
		if got, err := sessiontest.Execute(ctx, ws, "1+1"); err != nil || got != "2" {
			t.Errorf("1+1 in the kernel, through the portal: %q, %v; want 2", got, err)
		}
		j, err := p.admin.Job(ctx, s.JobID)
		if err != nil {
			t.Fatal(err)
		}
		var idx []string
		for _, g := range j.GPUs {
			idx = append(idx, strconv.Itoa(g.Index))
		}
		want := "'" + strings.Join(idx, ",") + "'"
		if got, err := sessiontest.Execute(ctx, ws, "import os; os.environ.get('CUDA_VISIBLE_DEVICES')"); err != nil || len(idx) != 2 || got != want {
			t.Errorf("CUDA_VISIBLE_DEVICES in the kernel: %s (%v), want the job's 2 GPUs %v as %s", got, err, j.GPUs, want)
		}
		ws.Close(websocket.StatusNormalClosure, "")

		// A browser's path: the pages hand it a launch URL on the
		// sessions' origin, which sets the session's cookie there; then
		// no bearer header.
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		browser := &http.Client{Jar: jar}
		launch, pr := p.server.SessionLaunchURL(httptest.NewRequest(http.MethodPost, "/", nil), auth.Identity{User: p.alice}, s.ID)
		if pr != nil {
			t.Fatal(pr)
		}
		lresp, err := browser.Get(launch)
		if err != nil {
			t.Fatal(err)
		}
		lresp.Body.Close()
		var cookie *http.Cookie
		ou, _ := url.Parse(p.origin + "/v1/sessions/" + s.ID + "/proxy/lab")
		for _, c := range jar.Cookies(ou) {
			if c.Name == sessionCookie {
				cookie = c
			}
		}
		// The launch answers a page of the sessions' origin that
		// refreshes to the server (a redirect would lose the cookie
		// where that origin is another site): followed as a browser does.
		to, ok := strings.CutPrefix(lresp.Header.Get("Refresh"), "0; url=")
		if lresp.StatusCode != http.StatusOK || cookie == nil || !ok || to != "/v1/sessions/"+s.ID+"/proxy/" {
			t.Fatalf("launch %s: %d, Refresh %q, cookie %+v", launch, lresp.StatusCode, lresp.Header.Get("Refresh"), cookie)
		}
		if lresp, err = browser.Get(p.origin + to); err != nil {
			t.Fatal(err)
		}
		lresp.Body.Close()
		if lresp.StatusCode != http.StatusOK || !strings.HasPrefix(lresp.Request.URL.String(), p.origin+"/v1/sessions/"+s.ID+"/proxy/") {
			t.Fatalf("the refresh to %s: %d at %s", to, lresp.StatusCode, lresp.Request.URL)
		}
		if pu, _ := url.Parse(p.srv.URL + "/v1/sessions/" + s.ID + "/proxy/lab"); len(jar.Cookies(pu)) != 0 {
			t.Errorf("the session's cookie is sent to the pages' origin: %v", jar.Cookies(pu))
		}
		if resp, body := p.proxied(t, browser, "", http.MethodGet, s.ID, "lab", nil); resp.StatusCode != http.StatusOK ||
			!bytes.Contains(body, []byte("JupyterLab")) {
			t.Errorf("GET lab with the cookie: %d", resp.StatusCode)
		}
		resp, body = p.proxied(t, browser, "", http.MethodPost, s.ID, "api/kernels", strings.NewReader(`{"name":"python3"}`))
		if err := json.Unmarshal(body, &kernel); resp.StatusCode != http.StatusCreated || err != nil || kernel.ID == "" {
			t.Fatalf("POST api/kernels with the cookie: %d %s", resp.StatusCode, body)
		}
		ws = p.dialProxy(t, browser, "", s.ID, "api/kernels/"+kernel.ID+"/channels")
		if got, err := sessiontest.Execute(ctx, ws, "1+1"); err != nil || got != "2" {
			t.Errorf("1+1 in the kernel, with the cookie: %q, %v; want 2", got, err)
		}
		ws.Close(websocket.StatusNormalClosure, "")
		// The cookie is the proxy's only, on the sessions' origin: the
		// API does not take it, and the pages' origin serves no session.
		for path, want := range map[string]int{"/v1/sessions/" + s.ID: http.StatusUnauthorized, "/v1/sessions/" + s.ID + "/proxy/lab": http.StatusNotFound} {
			req, _ := http.NewRequest(http.MethodGet, p.srv.URL+path, nil)
			req.AddCookie(cookie)
			if resp, err := p.srv.Client().Do(req); err != nil || resp.StatusCode != want {
				t.Errorf("GET %s on the pages' origin with the cookie: %v %v, want %d", path, resp.Status, err, want)
			} else {
				resp.Body.Close()
			}
		}

		// bob: the session, its proxy and its cookie are not there.
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/v1/sessions/" + s.ID}, {http.MethodPost, "/v1/sessions/" + s.ID + "/cookie"},
			{http.MethodDelete, "/v1/sessions/" + s.ID},
		} {
			if code, body := p.do(p.bob, r.method, r.path, nil); code != http.StatusNotFound || !bytes.Contains(body, []byte(`"session_not_found"`)) {
				t.Errorf("bob %s %s = %d %s, want 404 session_not_found", r.method, r.path, code, body)
			}
		}
		for _, rest := range []string{"api/status", "lab"} {
			resp, body := p.proxied(t, nil, p.bob, http.MethodGet, s.ID, rest, nil)
			wantRefused(t, resp, body, http.StatusNotFound, "session_not_found")
		}
		if code, body := p.do(p.bob, http.MethodGet, "/v1/sessions", nil); code != http.StatusOK || bytes.Contains(body, []byte(s.ID)) {
			t.Errorf("bob's sessions = %d %s: alice's is listed", code, body)
		}

		// DELETE: the job is cancelled in Slurm as alice, audited; the
		// proxy then refuses the session, with the cookie too.
		code, body := p.do(p.alice, http.MethodDelete, "/v1/sessions/"+s.ID, nil)
		var act struct {
			AuditID int64 `json:"audit_id"`
		}
		if err := json.Unmarshal(body, &act); code != http.StatusOK || err != nil || act.AuditID == 0 {
			t.Fatalf("DELETE /v1/sessions/%s = %d %s", s.ID, code, body)
		}
		testbed.WaitJob(t, p.admin, s.JobID, time.Minute, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
		log, err := p.st.AuditLog(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		audited := slices.ContainsFunc(log, func(a store.Audit) bool {
			return a.ID == act.AuditID && a.User == p.alice && a.Action == "cancel" && a.Target == strconv.FormatInt(s.JobID, 10) &&
				a.Result == store.ResultOK && a.Detail == "session "+s.ID
		})
		if !audited {
			t.Errorf("no audit record %d of alice's cancel of job %d: %+v", act.AuditID, s.JobID, log)
		}
		resp, body = p.proxied(t, nil, p.alice, http.MethodGet, s.ID, "api/status", nil)
		wantRefused(t, resp, body, http.StatusConflict, "session_not_running")
		resp, body = p.proxied(t, browser, "", http.MethodGet, s.ID, "lab", nil)
		wantRefused(t, resp, body, http.StatusConflict, "session_not_running")
		if e := p.get(t, s.ID); e.Ready || e.EndReason != "ended by "+p.alice+" through the portal" {
			t.Errorf("the deleted session: %+v", e)
		}
		if code, _ := p.do(p.alice, http.MethodDelete, "/v1/sessions/"+s.ID, nil); code != http.StatusConflict {
			t.Errorf("DELETE of the ended session = %d, want 409", code)
		}
	})
}

// TestIntegrationSessionTerminal: alice's web terminal through the
// portal's proxy WebSocket, in ttyd's protocol: `echo $SLURM_JOB_ID`
// reads the session's job id back; bob cannot open it; DELETE ends it and
// the proxy refuses it.
func TestIntegrationSessionTerminal(t *testing.T) {
	sessionBed(t, func(t *testing.T, b *testbed.Bed) {
		p := newSessionPortal(t, b, "")
		ctx := testbed.Context(t)
		s := p.waitReady(t, p.start(t, "terminal", map[string]string{"gpus": "1", "hours": "1"}).ID)
		t.Logf("terminal session %s (job %d on %s): ready %s after POST /v1/sessions", s.ID, s.JobID, s.Node, time.Since(p.started).Round(10*time.Millisecond))
		// ttyd's page fetches its token and sends it first on the WebSocket.
		resp, body := p.proxied(t, nil, p.alice, http.MethodGet, s.ID, "token", nil)
		var tok struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(body, &tok); resp.StatusCode != http.StatusOK || err != nil || tok.Token == "" {
			t.Fatalf("GET token through the portal: %d %s", resp.StatusCode, body)
		}
		resp, body = p.proxied(t, nil, p.bob, http.MethodGet, s.ID, "token", nil)
		wantRefused(t, resp, body, http.StatusNotFound, "session_not_found")
		ws := p.dialProxy(t, nil, p.alice, s.ID, "ws", sessiontest.TerminalSubprotocol)
		if out, err := sessiontest.Terminal(ctx, ws, tok.Token, "echo $SLURM_JOB_ID", strconv.FormatInt(s.JobID, 10)); err != nil {
			t.Fatalf("job id %d through the portal's terminal: %v; it printed:\n%q", s.JobID, err, out)
		}
		ws.Close(websocket.StatusNormalClosure, "")
		// The proxy saw the input pass: ttyd has no activity of its own.
		if rec, err := p.st.GetSession(ctx, s.ID); err != nil || rec.LastActivity.Before(p.started) {
			t.Errorf("the terminal's input is not recorded: last activity %v (%v)", rec.LastActivity, err)
		}

		if code, body := p.do(p.alice, http.MethodDelete, "/v1/sessions/"+s.ID, nil); code != http.StatusOK {
			t.Fatalf("DELETE /v1/sessions/%s = %d %s", s.ID, code, body)
		}
		testbed.WaitJob(t, p.admin, s.JobID, time.Minute, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
		resp, body = p.proxied(t, nil, p.alice, http.MethodGet, s.ID, "token", nil)
		wantRefused(t, resp, body, http.StatusConflict, "session_not_running")
	})
}

// interactiveRules is the test's reclaim rule for the interactive class:
// idle (GPU and memory activity 5 % or less) for a minute, the shortest
// window a rule takes, then a warning and, 10 s later, the job cancelled.
const interactiveRules = `{
  "apiVersion": "strata/v1",
  "kind": "ReclaimRules",
  "rules": [
    {
      "name": "interactive",
      "match": {"classes": ["interactive"]},
      "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
      "warn": "10s",
      "action": "cancel"
    }
  ]
}
`

// TestIntegrationSessionReclaim: reclaimd (the controller and an agent
// per node replaying GPU use, as the packages run them) judges alice's
// two GPU sessions by the interactive class's rule: the one whose GPU is
// replayed idle is warned, the warning shown in GET /v1/sessions/{id},
// then cancelled, and the session shows reclaimd's reason as its end;
// the busy one beside it keeps running, untouched.
func TestIntegrationSessionReclaim(t *testing.T) {
	sessionBed(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		work := t.TempDir()
		reclaimd := filepath.Join(work, "reclaimd")
		if out, err := exec.Command("go", "build", "-o", reclaimd, "../../../reclaimd/cmd/reclaimd").CombinedOutput(); err != nil {
			t.Fatalf("build reclaimd: %v\n%s", err, out)
		}
		ctlAddr := freeAddr(t)
		p := newSessionPortal(t, b, "http://"+ctlAddr)
		idle := p.start(t, "terminal", map[string]string{"gpus": "1", "hours": "1"})
		busy := p.start(t, "terminal", map[string]string{"gpus": "1", "hours": "1"})
		idle, busy = p.waitReady(t, idle.ID), p.waitReady(t, busy.ID)
		idleJob, err := p.admin.Job(ctx, idle.JobID)
		if err != nil || len(idleJob.GPUs) != 1 {
			t.Fatalf("the idle session's job %d: %+v, %v", idle.JobID, idleJob.GPUs, err)
		}
		busyJob, err := p.admin.Job(ctx, busy.JobID)
		if err != nil || len(busyJob.GPUs) != 1 {
			t.Fatalf("the busy session's job %d: %+v, %v", busy.JobID, busyJob.GPUs, err)
		}
		t.Logf("idle session %s: job %d on %v; busy session %s: job %d on %v", idle.ID, idle.JobID, idleJob.GPUs, busy.ID, busy.JobID, busyJob.GPUs)

		ds := startReclaimd(t, b, reclaimd, work, ctlAddr, tenantsJSON(b, p.alice, p.bob), idleJob, busyJob)
		// Warned while it runs, the warning on the session; then ended
		// with reclaimd's reason.
		var warned, ended sessionView
		for end := time.Now().Add(4 * time.Minute); ended.ID == ""; time.Sleep(time.Second) {
			ds.died(t)
			v := p.get(t, idle.ID)
			if warned.ID == "" && v.Reclaim != nil && v.Reclaim.Action == "warn" && v.State == "RUNNING" {
				warned = v
				t.Logf("the idle session warned: %+v", *v.Reclaim)
			}
			if v.EndReason != "" {
				ended = v
			}
			if bv := p.get(t, busy.ID); bv.Reclaim != nil || bv.EndReason != "" || bv.State != "RUNNING" {
				t.Fatalf("the busy session was touched: %+v", bv)
			}
			if time.Now().After(end) {
				t.Fatalf("the idle session not ended by reclaimd after 4 minutes: %+v\n%s", v, ds.logs())
			}
		}
		if warned.ID == "" {
			t.Errorf("GET /v1/sessions/%s never showed reclaimd's warning before the end", idle.ID)
		}
		if ended.State != "ENDED" && ended.State != "CANCELLED" || !strings.HasPrefix(ended.EndReason, "reclaimd: ") ||
			ended.Reclaim == nil || ended.Reclaim.Action != "cancel" || ended.Reclaim.Rule != "interactive" ||
			!strings.Contains(ended.EndReason, ended.Reclaim.Reason) || ended.Ready {
			t.Errorf("the reclaimed session: %+v, reclaim %+v; want ended with reclaimd's reason of its cancel by rule interactive", ended, ended.Reclaim)
		}
		t.Logf("the idle session ended: %s", ended.EndReason)
		code, body := p.do(p.alice, http.MethodGet, "/v1/sessions", nil)
		var list struct{ Sessions []sessionView }
		if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil ||
			!slices.ContainsFunc(list.Sessions, func(v sessionView) bool { return v.ID == idle.ID && v.EndReason == ended.EndReason }) {
			t.Errorf("GET /v1/sessions = %d %s: the reclaimed session is not listed with its end", code, body)
		}
		j := testbed.WaitJob(t, p.admin, idle.JobID, 30*time.Second, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
		if !strings.HasPrefix(j.AdminComment, "strata: reclaimed (cancel, rule interactive)") {
			t.Errorf("the idle session's job: admin comment %q", j.AdminComment)
		}
		// The busy one: running, ready, never judged.
		time.Sleep(6 * time.Second) // one more controller cycle
		ds.died(t)
		if v := p.get(t, busy.ID); v.State != "RUNNING" || !v.Ready || v.EndReason != "" || v.Reclaim != nil {
			t.Errorf("the busy session: %+v", v)
		}
		// reclaimd judged it, found it busy and decided nothing.
		code, rbody := ds.reclaim(t, busy.JobID)
		var rec struct {
			Skipped *struct {
				Reason string `json:"reason"`
				Judged bool   `json:"judged"`
			} `json:"skipped"`
			Decisions []json.RawMessage `json:"decisions"`
		}
		if err := json.Unmarshal([]byte(rbody), &rec); code != http.StatusOK || err != nil || rec.Skipped == nil ||
			rec.Skipped.Reason != "busy" || !rec.Skipped.Judged || len(rec.Decisions) != 0 {
			t.Errorf("reclaimd's record of the busy session's job %d: %d %s, want judged busy, no decision", busy.JobID, code, rbody)
		}
		if code, body := p.do(p.alice, http.MethodDelete, "/v1/sessions/"+busy.ID, nil); code != http.StatusOK {
			t.Errorf("DELETE the busy session = %d %s", code, body)
		}
	})
}

// reclaimdRun is a reclaimd controller and its agents, one per node of
// the bed, started for one test.
type reclaimdRun struct {
	work, api string
	mu        sync.Mutex
	ended     []string
}

// startReclaimd starts reclaimd on b as its packages run it: an agent per
// node replaying GPU use (the idle job's GPUs at 0 %, every other GPU at
// 95 %, so that no other job on the bed is judged idle) behind one
// address, and the controller at ctlAddr with interactiveRules and the
// bed's tenants.
// sessionReclaimdToken is the test controller's API token (its
// api.token_file), which the portal presents.
const sessionReclaimdToken = "session-test-reclaimd-api-token"

func startReclaimd(t *testing.T, b *testbed.Bed, bin, work, ctlAddr, tenants string, idle, busy slurmrest.Job) *reclaimdRun {
	t.Helper()
	r := &reclaimdRun{work: work, api: "http://" + ctlAddr}
	secret := filepath.Join(work, "agent.token")
	write := func(name, data string) string {
		t.Helper()
		f := filepath.Join(work, name)
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	write("agent.token", "session test agent secret\n")
	apiToken := write("reclaimd-api.token", sessionReclaimdToken+"\n")
	holders := map[string]map[int]int64{}
	for _, j := range []slurmrest.Job{idle, busy} {
		for _, g := range j.GPUs {
			if holders[g.Node] == nil {
				holders[g.Node] = map[int]int64{}
			}
			holders[g.Node][g.Index] = j.ID
		}
	}
	mux := http.NewServeMux()
	for _, node := range b.Nodes {
		var csv strings.Builder
		csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib,jobs\n")
		for off := range 2 {
			for g := range b.GPUsPerNode {
				util, job := 95, ""
				if id, ok := holders[node][g]; ok {
					job = strconv.FormatInt(id, 10)
					if id == idle.ID {
						util = 0
					}
				}
				fmt.Fprintf(&csv, "%d,%d,%d,%d,2048,%s\n", off, g, util, util/2, job)
			}
		}
		replay := write("replay-"+node+".csv", csv.String())
		addr := freeAddr(t)
		cfg := write("agent-"+node+".yaml", b.ReclaimdAgentConfig(node, addr, secret, replay))
		r.start(t, bin, "agent-"+node, "--config", cfg, "--log-level", "warn", "agent")
		mux.Handle("/"+node+"/", http.StripPrefix("/"+node, httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})))
	}
	// The agents share this host: one address answers for all of them,
	// routing /<node>/... to that node's agent (agents.url_template).
	agents := httptest.NewServer(mux)
	t.Cleanup(agents.Close)
	cfg := write("reclaimd.yaml", b.ReclaimdControllerConfig(ctlAddr, filepath.Join(work, "reclaimd.db"), write("reclaim-rules.json", interactiveRules),
		write("tenants.json", tenants), agents.URL, secret, apiToken))
	r.start(t, bin, "controller", "--config", cfg, "run")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reclaimd's logs:\n%s", r.logs())
		}
	})
	return r
}

// start runs reclaimd as name, logging to <work>/<name>.log, until the
// test ends.
func (r *reclaimdRun) start(t *testing.T, bin, name string, args ...string) {
	t.Helper()
	log, err := os.Create(filepath.Join(r.work, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start reclaimd %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		r.mu.Lock()
		r.ended = append(r.ended, name)
		r.mu.Unlock()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// died fails the test when a daemon stopped before its end.
func (r *reclaimdRun) died(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	ended := slices.Clone(r.ended)
	r.mu.Unlock()
	if len(ended) > 0 {
		t.Fatalf("reclaimd %v stopped:\n%s", ended, r.logs())
	}
}

// logs are the daemons' logs.
func (r *reclaimdRun) logs() string {
	files, _ := filepath.Glob(filepath.Join(r.work, "*.log"))
	var sb strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&sb, "--- %s\n%s", filepath.Base(f), data)
	}
	return sb.String()
}

// reclaim is reclaimd's record of job id, as the portal reads it.
func (r *reclaimdRun) reclaim(t *testing.T, id int64) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, r.api+"/v1/jobs/"+strconv.FormatInt(id, 10)+"/reclaim", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sessionReclaimdToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// freeAddr is a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
