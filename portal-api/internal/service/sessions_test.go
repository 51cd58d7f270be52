package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/session"
)

const sessionSecret = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"

// nodeTransport reaches the replayed cluster's nodes (gpu1, ...): in the
// tests every node is this host.
func nodeTransport() *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}}
}

// server stands in for a session's server (JupyterLab, ttyd): it checks
// the secret, answers JupyterLab's /api/status and echoes on a WebSocket.
type server struct {
	*httptest.Server
	port         int
	mu           sync.Mutex
	lastActivity time.Time
	busy         bool
	auth         []string // the Authorization of every request
	cookies      []string
	statusAsked  atomic.Int64
}

func newServer(t *testing.T, kind session.Kind) *server {
	t.Helper()
	s := &server{}
	want := "token " + sessionSecret
	if kind == session.TTYD {
		want = "Basic " + base64.StdEncoding.EncodeToString([]byte("strata:"+sessionSecret))
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.cookies = append(s.cookies, r.Header.Get("Cookie"))
		last, busy := s.lastActivity, s.busy
		s.mu.Unlock()
		if r.Header.Get("Authorization") != want {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/proxy/api/status"):
			s.statusAsked.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"connections": 0, "kernels": 1, "last_activity": %q, "started": "2026-12-01T10:00:00Z"}`, last.Format(time.RFC3339Nano))
		case strings.HasSuffix(r.URL.Path, "/proxy/api/kernels"):
			if r.URL.Query().Get("no_track_activity") == "" {
				s.setActivity(time.Now()) // as JupyterLab would count it
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `[{"id": "k1", "name": "python3", "execution_state": %q, "connections": 1}]`, map[bool]string{true: "busy", false: "idle"}[busy])
		case strings.HasSuffix(r.URL.Path, "/proxy/ws"):
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, append([]byte("echo "), msg...)); err != nil {
					return
				}
			}
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><script>var c = {"token": %q};</script>%s</html>`, sessionSecret, r.URL.Path)
		}
	}))
	t.Cleanup(s.Close)
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	s.port, _ = strconv.Atoi(p)
	return s
}

func (s *server) setActivity(t time.Time) {
	s.mu.Lock()
	s.lastActivity = t
	s.mu.Unlock()
}

func (s *server) seen() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.auth), slices.Clone(s.cookies)
}

// sessionJobs are the session jobs the test put on gpu1 beside gpu1Jobs.
type sessionJobs struct {
	mu   sync.Mutex
	jobs map[int64]clustertest.Job
}

var jobsOf sync.Map // *harness -> *sessionJobs

// setJob puts a session's job on gpu1 in state and polls.
func (h *harness) setJob(j clustertest.Job) {
	h.t.Helper()
	v, _ := jobsOf.LoadOrStore(h, &sessionJobs{jobs: map[int64]clustertest.Job{}})
	sj := v.(*sessionJobs)
	sj.mu.Lock()
	sj.jobs[j.ID] = j
	all := slices.Clone(gpu1Jobs)
	for _, j := range sj.jobs {
		all = append(all, j)
	}
	sj.mu.Unlock()
	h.beds["gpu1"].SetJobs(all...)
	if err := h.pollers["gpu1"].Poll(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// jobUID is the uid of the captured job record's user, the owner of the
// connection files the tests write.
const jobUID = 26002

type started struct {
	ID    string `json:"id"`
	JobID int64  `json:"job_id"`
	State string `json:"state"`
	URL   string `json:"url"`
}

// start starts a session of template as user on gpu1 and returns it.
func (h *harness) start(user, template string, params map[string]string) started {
	h.t.Helper()
	body := map[string]any{"cluster": "gpu1", "template": template}
	if params != nil {
		body["params"] = params
	}
	code, resp := h.do(user, "POST", "/v1/sessions", body)
	if code != 201 {
		h.t.Fatalf("POST /v1/sessions %s as %s = %d %s", template, user, code, resp)
	}
	var s started
	json.Unmarshal(resp, &s)
	return s
}

// run shows session s's job on gpu1 as state, with GPUs or not.
func (h *harness) run(s started, user, template, state string, gpus bool) {
	h.t.Helper()
	h.setJob(clustertest.Job{ID: s.JobID, User: user, Account: map[string]string{"mem": "acme-llm", "gmem": "globex-rl", "tadmin": "acme-llm"}[user],
		State: state, Comment: "strata:class=interactive strata:template=" + template, QOS: "interactive", CPUOnly: !gpus,
		Reason: map[bool]string{true: "Resources"}[state == "PENDING"]})
}

// writeConn writes session id's connection file as its job would.
func (h *harness) writeConn(id string, kind session.Kind, host string, port int, secret string) {
	h.t.Helper()
	dir := filepath.Join(h.sessionRoot, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(dir, session.FileName)
	data := fmt.Sprintf(`{"version":1,"kind":%q,"host":%q,"port":%d,"secret":%q,"started":"2026-12-01T10:00:00Z"}`, kind, host, port, secret)
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		h.t.Fatal(err)
	}
	if os.Getuid() == 0 {
		for _, p := range []string{dir, path + ".tmp"} {
			if err := os.Chown(p, jobUID, jobUID); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		h.t.Fatal(err)
	}
}

// proxied sends a request through the portal's proxy, with user's token
// (or none) and cookies; it checks that a refusal is the API's JSON error.
func (h *harness) proxied(user, method, path string, cookies ...*http.Cookie) (int, string, http.Header) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+onSessions(path), nil)
	req.Host = testOrigin.Host
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+h.tokens[user])
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		h.checkError(req, resp, body)
	}
	return resp.StatusCode, string(body), resp.Header
}

func (h *harness) sessionView(user, id string) map[string]any {
	h.t.Helper()
	code, body := h.do(user, "GET", "/v1/sessions/"+id, nil)
	if code != 200 {
		h.t.Fatalf("GET /v1/sessions/%s = %d %s", id, code, body)
	}
	var v map[string]any
	json.Unmarshal(body, &v)
	return v
}

func errCode(body string) string {
	var e struct{ Code string }
	json.Unmarshal([]byte(body), &e)
	return e.Code
}

// TestSessionCreate: a session is a template of type session through the
// submission path, as the caller, with its id and folder in the job's
// environment, recorded; the wrong type of template is refused on each
// route, and a refusal of the policy is the submission's.
func TestSessionCreate(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	s := h.start("mem", "notebook", nil)
	if len(s.ID) != 32 || s.JobID == 0 || s.State != "SUBMITTED" || s.URL != testOrigin.ProxyURL(s.ID) {
		t.Errorf("session = %+v", s)
	}
	subs := h.beds["gpu1"].Submits()
	if len(subs) != 1 || subs[0].User != "mem" {
		t.Fatalf("submits = %+v", subs)
	}
	sent := string(subs[0].Body)
	dir := filepath.Join(h.sessionRoot, s.ID)
	for _, want := range []string{"STRATA_SESSION_ID=" + s.ID, "STRATA_SESSION_DIR=" + dir, "STRATA_SESSION_SERVER=jupyterlab", `"account":"acme-llm"`} {
		if !strings.Contains(sent, want) {
			t.Errorf("the job lacks %s: %s", want, sent)
		}
	}
	rec, err := h.store.GetSession(t.Context(), s.ID)
	if err != nil || rec.User != "mem" || rec.Cluster != "gpu1" || rec.JobID != s.JobID || rec.Template != "notebook" || rec.Dir != dir ||
		rec.Server != "jupyterlab" || rec.IdleLimit != 30*time.Minute || rec.Account != "acme-llm" || !rec.Created.Equal(h.now) {
		t.Errorf("recorded = %+v, %v", rec, err)
	}
	// The cluster's idle limit when the template gives none.
	sh := h.start("mem", "shell", nil)
	if rec, _ := h.store.GetSession(t.Context(), sh.ID); rec.IdleLimit != time.Hour || rec.Server != "ttyd" {
		t.Errorf("shell = %+v", rec)
	}
	log, _ := h.store.AuditLog(t.Context(), 10)
	if len(log) != 2 || log[1].Action != "submit" || log[1].Target != "notebook" || log[1].User != "mem" || log[1].Result != "ok" {
		t.Errorf("audit = %+v", log)
	}
	code, body := h.do("mem", "GET", "/v1/sessions", nil)
	if code != 200 || !strings.Contains(string(body), s.ID) || !strings.Contains(string(body), sh.ID) {
		t.Errorf("GET /v1/sessions = %d %s", code, body)
	}
	for name, tc := range map[string]struct {
		user, path string
		req        map[string]any
		code       int
		inBody     string
	}{
		"batch template":          {"mem", "/v1/sessions", map[string]any{"cluster": "gpu1", "template": "small"}, 400, "POST /v1/submissions"},
		"session as a submission": {"mem", "/v1/submissions", map[string]any{"cluster": "gpu1", "template": "notebook"}, 400, "POST /v1/sessions"},
		"viewer":                  {"view", "/v1/sessions", map[string]any{"cluster": "gpu1", "template": "notebook", "account": "acme-llm"}, 403, "viewers"},
		"unknown cluster":         {"mem", "/v1/sessions", map[string]any{"cluster": "nope", "template": "notebook"}, 404, "no cluster"},
		"unknown template":        {"mem", "/v1/sessions", map[string]any{"cluster": "gpu1", "template": "nope"}, 404, "no template"},
		"no policy":               {"mem", "/v1/sessions", map[string]any{"cluster": "gpu2", "template": "notebook"}, 503, "job_policy_file"},
		"over the class's GPUs":   {"mem", "/v1/sessions", map[string]any{"cluster": "gpu1", "template": "gpunotebook", "params": map[string]string{"gpus": "3"}}, 400, "gpus"},
		"another tenant's":        {"mem", "/v1/sessions", map[string]any{"cluster": "gpu1", "template": "notebook", "account": "globex-rl"}, 404, "no project account"},
	} {
		t.Run(name, func(t *testing.T) {
			h.t = t
			code, body := h.do(tc.user, "POST", tc.path, tc.req)
			if code != tc.code || !strings.Contains(string(body), tc.inBody) {
				t.Errorf("= %d %s, want %d with %q", code, body, tc.code, tc.inBody)
			}
		})
	}
	h.t = t
	if n := len(h.beds["gpu1"].Submits()); n != 2 {
		t.Errorf("%d submissions reached Slurm, want 2", n)
	}
	if recs, _ := h.store.Sessions(t.Context(), "mem", time.Time{}); len(recs) != 2 {
		t.Errorf("%d sessions recorded, want 2 (refusals record none)", len(recs))
	}
}

// TestSessionProxy: the proxy through the portal, to a real HTTP and
// WebSocket server standing in for JupyterLab, with the connection file
// the test writes: the states before it runs, the round trips with the
// bearer token and with the cookie, and each refusal.
func TestSessionProxy(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	srv := newServer(t, session.JupyterLab)
	s := h.start("mem", "notebook", nil)
	proxy := s.URL

	// Pending: the job's state and reason; the proxy says it does not run.
	h.run(s, "mem", "notebook", "PENDING", false)
	v := h.sessionView("mem", s.ID)
	if v["state"] != "PENDING" || v["ready"] != false || fmt.Sprint(v["reason"]) == "<nil>" {
		t.Errorf("pending session = %v", v)
	}
	if code, body, _ := h.proxied("mem", "GET", proxy+"lab"); code != 409 || errCode(body) != "session_not_running" {
		t.Errorf("pending: %d %s", code, body)
	}
	// Running, no connection file yet: starting.
	h.run(s, "mem", "notebook", "RUNNING", false)
	if code, body, hdr := h.proxied("mem", "GET", proxy+"lab"); code != 503 || errCode(body) != "session_starting" || hdr.Get("Retry-After") == "" {
		t.Errorf("starting: %d %s", code, body)
	}
	// The connection file: the session is ready, pinned to its host and port.
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	v = h.sessionView("mem", s.ID)
	if v["state"] != "RUNNING" || v["ready"] != true || v["node"] != "gpu1" || v["idle_judge"] != "portal" || v["idle_limit_seconds"] != 1800.0 ||
		v["url"] != proxy {
		t.Errorf("running session = %v", v)
	}
	if rec, _ := h.store.GetSession(t.Context(), s.ID); rec.Host != "gpu1" || rec.Port != srv.port {
		t.Errorf("pin = %s:%d", rec.Host, rec.Port)
	}
	// HTTP with the bearer token: the server gets its secret, not the
	// caller's token; the secret never comes back.
	code, body, _ := h.proxied("mem", "GET", proxy+"lab?x=1")
	if code != 200 || !strings.Contains(body, "/v1/sessions/"+s.ID+"/proxy/lab") || strings.Contains(body, sessionSecret) {
		t.Errorf("proxied page = %d %s", code, body)
	}
	auths, _ := srv.seen()
	if len(auths) != 1 || auths[0] != "token "+sessionSecret {
		t.Errorf("the server got Authorization %q", auths)
	}
	// The browser's way: a cookie, then a WebSocket with no bearer.
	code, cbody := h.do("mem", "POST", "/v1/sessions/"+s.ID+"/cookie", nil)
	if code != 200 {
		t.Fatalf("cookie = %d %s", code, cbody)
	}
	cookie := h.sessionCookie(s.ID)
	wsURL := "ws" + strings.TrimPrefix(h.srv.URL, "http") + onSessions(proxy) + "ws"
	hdr := http.Header{"Cookie": {cookie.String()}}
	c, res, err := websocket.Dial(t.Context(), wsURL, &websocket.DialOptions{HTTPHeader: hdr, Host: testOrigin.Host})
	if res != nil && res.Body != nil {
		res.Body.Close()
	}
	if err != nil {
		t.Fatalf("WebSocket through the portal with the cookie: %v", err)
	}
	if err := c.Write(t.Context(), websocket.MessageText, []byte("1+1")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(t.Context()); err != nil || string(msg) != "echo 1+1" {
		t.Errorf("WebSocket answer %q, %v", msg, err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	_, cookies := srv.seen()
	for _, ck := range cookies {
		if strings.Contains(ck, "strata_session") {
			t.Errorf("the portal's cookie reached the server: %q", ck)
		}
	}
	if code, body, _ := h.proxied("", "GET", proxy+"lab", cookie); code != 200 {
		t.Errorf("page with the cookie = %d %s", code, body)
	}

	// Refusals, each through the portal.
	forged := *cookie
	forged.Value = strings.Replace(cookie.Value, ".", ".x", 1)
	other := h.start("gmem", "notebook", nil)
	code, ocbody := h.do("gmem", "POST", "/v1/sessions/"+other.ID+"/cookie", nil)
	if code != 200 {
		t.Fatalf("gmem's cookie = %d %s", code, ocbody)
	}
	gcookie := h.sessionCookie(other.ID)
	gcookie.Path = proxy // as if the browser sent it to mem's session
	for name, tc := range map[string]struct {
		user    string
		cookies []*http.Cookie
		code    int
		errCode string
	}{
		"another user":                  {"gmem", nil, 404, "session_not_found"},
		"a user in no project":          {"nobody", nil, 404, "session_not_found"},
		"the tenant's admin":            {"tadmin", nil, 404, "session_not_found"},
		"no credentials":                {"", nil, 401, "unauthenticated"},
		"a forged cookie":               {"", []*http.Cookie{&forged}, 401, "unauthenticated"},
		"another session's cookie":      {"", []*http.Cookie{gcookie}, 401, "unauthenticated"},
		"a cookie beside gmem's bearer": {"gmem", []*http.Cookie{cookie}, 404, "session_not_found"},
	} {
		t.Run(name, func(t *testing.T) {
			h.t = t
			code, body, _ := h.proxied(tc.user, "GET", proxy+"lab", tc.cookies...)
			if code != tc.code || errCode(body) != tc.errCode {
				t.Errorf("= %d %s, want %d %s", code, body, tc.code, tc.errCode)
			}
			if strings.Contains(body, sessionSecret) || strings.Contains(body, "gpu1") {
				t.Errorf("the refusal tells: %s", body)
			}
		})
	}
	h.t = t
	// A WebSocket of another user is refused before it reaches the server.
	_, res, err = websocket.Dial(t.Context(), wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + h.tokens["gmem"]}}})
	if res != nil && res.Body != nil {
		res.Body.Close()
	}
	if err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("gmem's WebSocket: %v %v", res, err)
	}
	// The connection file rewritten: another node, another port, no secret.
	for name, tc := range map[string]struct {
		host    string
		port    int
		secret  string
		errCode string
	}{
		"another node": {"gpu2", srv.port, sessionSecret, "session_wrong_host"},
		"another port": {"gpu1", srv.port + 1, sessionSecret, "session_wrong_port"},
		"no secret":    {"gpu1", srv.port, "", "session_no_secret"},
		"a short one":  {"gpu1", srv.port, "abc", "session_no_secret"},
	} {
		t.Run(name, func(t *testing.T) {
			h.t = t
			h.writeConn(s.ID, session.JupyterLab, tc.host, tc.port, tc.secret)
			code, body, _ := h.proxied("mem", "GET", proxy+"lab")
			if code != 502 || errCode(body) != tc.errCode {
				t.Errorf("= %d %s, want 502 %s", code, body, tc.errCode)
			}
		})
	}
	h.t = t
	// A session of another kind than its template's: refused.
	h.writeConn(s.ID, session.CodeServer, "gpu1", srv.port, sessionSecret)
	if code, body, _ := h.proxied("mem", "GET", proxy+"lab"); code != 502 || errCode(body) != "session_bad_connection_file" {
		t.Errorf("another kind: %d %s", code, body)
	}
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	auths, _ = srv.seen()
	n := len(auths)
	// A finished job: refused, and the session shows why it ended.
	h.run(s, "mem", "notebook", "COMPLETED", false)
	if code, body, _ := h.proxied("mem", "GET", proxy+"lab"); code != 409 || errCode(body) != "session_not_running" {
		t.Errorf("finished: %d %s", code, body)
	}
	v = h.sessionView("mem", s.ID)
	if v["state"] != "COMPLETED" || v["ready"] != false || v["end_reason"] != "the session's server stopped" || v["ended_at"] == nil {
		t.Errorf("finished session = %v", v)
	}
	if auths, _ := srv.seen(); len(auths) != n {
		t.Errorf("%d requests reached the server after the job ended", len(auths)-n)
	}
}

// sessionCookie is the cookie the portal set on the last answer to
// POST /v1/sessions/{id}/cookie, read again from the store of h's client.
func (h *harness) sessionCookie(id string) *http.Cookie {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/sessions/"+id+"/cookie", nil)
	req.Host = testOrigin.Host
	req.Header.Set("Authorization", "Bearer "+h.tokens[h.ownerOf(id)])
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "strata_session" {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/v1/sessions/"+id+"/proxy" || c.Secure || c.MaxAge != 3600 {
				h.t.Errorf("cookie = %+v", c)
			}
			return &http.Cookie{Name: c.Name, Value: c.Value, Path: c.Path}
		}
	}
	h.t.Fatalf("no strata_session cookie: %v", resp.Header)
	return nil
}

func (h *harness) ownerOf(id string) string {
	rec, err := h.store.GetSession(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec.User
}

// TestSessionCookie: the cookie is renewed past half its life and refused
// once expired.
func TestSessionCookie(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	srv := newServer(t, session.JupyterLab)
	s := h.start("mem", "notebook", nil)
	h.run(s, "mem", "notebook", "RUNNING", false)
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	cookie := h.sessionCookie(s.ID)
	code, _, hdr := h.proxied("", "GET", s.URL+"lab", cookie)
	if code != 200 || hdr.Get("Set-Cookie") != "" {
		t.Errorf("fresh cookie: %d, Set-Cookie %q", code, hdr.Get("Set-Cookie"))
	}
	h.now = h.now.Add(40 * time.Minute)
	code, _, hdr = h.proxied("", "GET", s.URL+"lab", cookie)
	if code != 200 || !strings.Contains(hdr.Get("Set-Cookie"), "strata_session=") {
		t.Errorf("old cookie: %d, Set-Cookie %q", code, hdr.Get("Set-Cookie"))
	}
	h.now = h.now.Add(30 * time.Minute)
	if code, body, _ := h.proxied("", "GET", s.URL+"lab", cookie); code != 401 || !strings.Contains(body, "cookie") {
		t.Errorf("expired cookie: %d %s", code, body)
	}
}

// TestSessionIdle: a session without GPUs ends at its idle limit by its
// server's own activity (JupyterLab's last_activity; a terminal's input
// through the proxy), cancelled as its owner with the reason stored and
// shown; a session with GPUs is reclaimd's, whose reason is shown.
func TestSessionIdle(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	jl := newServer(t, session.JupyterLab)
	nb := h.start("mem", "notebook", nil) // idle limit 30m
	h.run(nb, "mem", "notebook", "RUNNING", false)
	h.writeConn(nb.ID, session.JupyterLab, "gpu1", jl.port, sessionSecret)
	jl.setActivity(h.now.Add(-5 * time.Minute))
	h.server.CheckSessions(t.Context())
	if jl.statusAsked.Load() != 1 {
		t.Errorf("JupyterLab's status asked %d times", jl.statusAsked.Load())
	}
	rec, _ := h.store.GetSession(t.Context(), nb.ID)
	if !rec.Ended.IsZero() || !rec.LastActivity.Equal(h.now.Add(-5*time.Minute)) {
		t.Errorf("after one look: %+v", rec)
	}
	v := h.sessionView("mem", nb.ID)
	if v["idle_seconds"] != 300.0 || v["idle_limit_seconds"] != 1800.0 || v["last_activity"] == nil {
		t.Errorf("idle time = %v", v)
	}
	// 40 minutes on, its kernel busy with a silent cell: at work.
	h.now = h.now.Add(40 * time.Minute)
	jl.mu.Lock()
	jl.busy = true
	jl.mu.Unlock()
	h.pollers["gpu1"].Poll(t.Context())
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), nb.ID); !rec.Ended.IsZero() || !rec.LastActivity.Equal(h.now) {
		t.Errorf("a busy kernel: %+v", rec)
	}
	jl.mu.Lock()
	jl.busy = false
	jl.mu.Unlock()
	// 40 minutes more, nothing happened in JupyterLab: cancelled.
	h.now = h.now.Add(40 * time.Minute)
	h.pollers["gpu1"].Poll(t.Context())
	h.server.CheckSessions(t.Context())
	ctl := h.beds["gpu1"].Controls()
	if len(ctl) != 1 || ctl[0].Method != http.MethodDelete || ctl[0].User != "mem" || !strings.HasSuffix(ctl[0].Path, "/job/"+strconv.FormatInt(nb.JobID, 10)) {
		t.Fatalf("sent to Slurm: %+v", ctl)
	}
	v = h.sessionView("mem", nb.ID)
	if r, _ := v["end_reason"].(string); !strings.Contains(r, "idle for 40m0s, past the session's idle limit of 30m0s") {
		t.Errorf("end reason = %v", v)
	}
	log, _ := h.store.AuditLog(t.Context(), 1)
	if len(log) != 1 || log[0].Action != "cancel" || log[0].User != core.IdleUser || !strings.Contains(log[0].Detail, "idle") || log[0].Result != "ok" {
		t.Errorf("audit = %+v", log)
	}
	// Once ended, never again.
	h.server.CheckSessions(t.Context())
	if n := len(h.beds["gpu1"].Controls()); n != 1 {
		t.Errorf("%d cancels", n)
	}

	// A terminal: its input through the proxy is its activity; the
	// WebSocket's pongs and resizes are not.
	tt := newServer(t, session.TTYD)
	sh := h.start("mem", "shell", nil) // the cluster's 1h
	h.run(sh, "mem", "shell", "RUNNING", false)
	h.writeConn(sh.ID, session.TTYD, "gpu1", tt.port, sessionSecret)
	wsURL := "ws" + strings.TrimPrefix(h.srv.URL, "http") + onSessions(sh.URL) + "ws"
	c, res, err := websocket.Dial(t.Context(), wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + h.tokens["mem"]}},
		Host: testOrigin.Host})
	if res != nil && res.Body != nil {
		res.Body.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	send := func(msg string) {
		t.Helper()
		if err := c.Write(t.Context(), websocket.MessageBinary, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Read(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"AuthToken":"","columns":80,"rows":24}`)
	send(`1{"columns":100,"rows":30}`)
	if rec, _ := h.store.GetSession(t.Context(), sh.ID); !rec.LastActivity.IsZero() {
		t.Errorf("a resize counted as input: %v", rec.LastActivity)
	}
	h.now = h.now.Add(50 * time.Minute)
	send("0ls\r")
	if rec, _ := h.store.GetSession(t.Context(), sh.ID); !rec.LastActivity.Equal(h.now) {
		t.Errorf("terminal input recorded at %v, want %v", rec.LastActivity, h.now)
	}
	h.now = h.now.Add(30 * time.Minute) // 80m after its start, 30m after its input
	h.pollers["gpu1"].Poll(t.Context())
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), sh.ID); !rec.Ended.IsZero() {
		t.Errorf("a terminal with input 30m ago was ended: %s", rec.EndReason)
	}
	h.now = h.now.Add(31 * time.Minute)
	h.pollers["gpu1"].Poll(t.Context())
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), sh.ID); !strings.Contains(rec.EndReason, "past the session's idle limit of 1h0m0s") {
		t.Errorf("idle terminal: %+v", rec)
	}

	// A session with GPUs: never ended by the portal, however idle; once
	// reclaimd cancelled it, its reason shows.
	gpu := h.start("mem", "gpunotebook", nil)
	h.run(gpu, "mem", "gpunotebook", "RUNNING", true)
	h.writeConn(gpu.ID, session.JupyterLab, "gpu1", jl.port, sessionSecret)
	asked := jl.statusAsked.Load()
	h.now = h.now.Add(10 * time.Hour)
	h.pollers["gpu1"].Poll(t.Context())
	cancels := len(h.beds["gpu1"].Controls())
	h.server.CheckSessions(t.Context())
	if n := len(h.beds["gpu1"].Controls()); n != cancels || jl.statusAsked.Load() != asked {
		t.Errorf("the portal judged a GPU session: %d cancels, status asked %d times", n-cancels, jl.statusAsked.Load()-asked)
	}
	// Before any decision, reclaimd's next step if the GPUs stay idle:
	// on the session and in the list.
	h.reclaimRecords.Store(gpu.JobID, fmt.Sprintf(`{"job_id": %d, "upcoming": {"action": "warn", "at": "2026-12-01T09:45:00Z"}, "decisions": []}`, gpu.JobID))
	v = h.sessionView("mem", gpu.ID)
	if next, _ := v["reclaim_next"].(map[string]any); next["action"] != "warn" || next["at"] != "2026-12-01T09:45:00Z" || v["reclaim"] != nil {
		t.Errorf("GPU session before reclaimd's warning = %v", v)
	}
	if code, body := h.do("mem", "GET", "/v1/sessions", nil); code != 200 ||
		!strings.Contains(string(body), `"reclaim_next":{"action":"warn","at":"2026-12-01T09:45:00Z"}`) {
		t.Errorf("the list lacks the GPU session's next step: %d %s", code, body)
	}
	h.reclaimRecords.Store(gpu.JobID, fmt.Sprintf(`{"job_id": %d, "decisions": [
		{"rule": "interactive-idle", "action": "warn", "reason": "GPU gpu1:0 idle for 2h", "outcome": "sent", "decided_at": "2026-12-01T10:00:00Z"},
		{"rule": "interactive-idle", "action": "cancel", "reason": "GPU gpu1:0 idle for 2h15m", "outcome": "done", "decided_at": "2026-12-01T10:15:00Z"}]}`, gpu.JobID))
	v = h.sessionView("mem", gpu.ID)
	if r, _ := v["reclaim"].(map[string]any); v["idle_judge"] != "reclaimd" || r["action"] != "cancel" || r["rule"] != "interactive-idle" || v["idle_limit_seconds"] != nil {
		t.Errorf("GPU session = %v", v)
	}
	h.run(gpu, "mem", "gpunotebook", "CANCELLED", true)
	h.server.CheckSessions(t.Context())
	v = h.sessionView("mem", gpu.ID)
	if v["end_reason"] != "reclaimd: GPU gpu1:0 idle for 2h15m" || v["state"] != "CANCELLED" {
		t.Errorf("reclaimed session = %v", v)
	}
}

// TestSessionExtendDelete: more time up to the class's maximum, by a job
// update as the poll user after the portal's check, audited as the caller; the end of a session cancels its job as the
// caller; both audited.
func TestSessionExtendDelete(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	s := h.start("mem", "notebook", nil)
	if code, body := h.do("mem", "POST", "/v1/sessions/"+s.ID+"/extend", map[string]int{"minutes": 60}); code != 409 || !strings.Contains(string(body), "session_not_running") {
		t.Errorf("extend before the poll = %d %s", code, body)
	}
	h.run(s, "mem", "notebook", "RUNNING", false) // a time limit of 10 minutes
	code, body := h.do("mem", "POST", "/v1/sessions/"+s.ID+"/extend", map[string]int{"minutes": 60})
	if code != 200 || !strings.Contains(string(body), `"time_limit_seconds":4200`) || !strings.Contains(string(body), `"capped":false`) {
		t.Errorf("extend = %d %s", code, body)
	}
	code, body = h.do("mem", "POST", "/v1/sessions/"+s.ID+"/extend", map[string]int{"minutes": 1000})
	if code != 200 || !strings.Contains(string(body), `"time_limit_seconds":43200`) || !strings.Contains(string(body), `"capped":true`) {
		t.Errorf("extend past the class's 12h = %d %s", code, body)
	}
	// As the poll user (root by default), not as mem: Slurm lets
	// only operators raise a time limit.
	ctl := h.beds["gpu1"].Controls()
	if len(ctl) != 2 || ctl[0].User != "root" || ctl[1].User != "root" || !strings.Contains(string(ctl[0].Body), `"time_limit":{"number":70,"set":true}`) ||
		!strings.Contains(string(ctl[1].Body), `"number":720`) {
		t.Errorf("sent to Slurm: %+v", ctl)
	}
	if code, body := h.do("mem", "POST", "/v1/sessions/"+s.ID+"/extend", map[string]int{"minutes": 0}); code != 400 {
		t.Errorf("0 minutes = %d %s", code, body)
	}
	code, body = h.do("mem", "DELETE", "/v1/sessions/"+s.ID, nil)
	if code != 200 || !strings.Contains(string(body), `"action":"cancel"`) {
		t.Fatalf("delete = %d %s", code, body)
	}
	ctl = h.beds["gpu1"].Controls()
	if len(ctl) != 3 || ctl[2].Method != http.MethodDelete || ctl[2].User != "mem" {
		t.Errorf("sent to Slurm: %+v", ctl)
	}
	v := h.sessionView("mem", s.ID)
	if v["end_reason"] != "ended by mem through the portal" {
		t.Errorf("deleted session = %v", v)
	}
	log, _ := h.store.AuditLog(t.Context(), 3)
	if len(log) != 3 || log[0].Action != "cancel" || log[1].Action != "extend" || log[0].User != "mem" || log[0].Result != "ok" {
		t.Errorf("audit = %+v", log)
	}
	if code, body := h.do("mem", "DELETE", "/v1/sessions/"+s.ID, nil); code != 409 {
		t.Errorf("delete again = %d %s", code, body)
	}
	if code, body := h.do("mem", "POST", "/v1/sessions/"+s.ID+"/extend", map[string]int{"minutes": 5}); code != 409 {
		t.Errorf("extend an ended session = %d %s", code, body)
	}
}

// sessionIsolation: every session route, as user, against sessions of
// mem and gmem: only the owner gets one, anyone else 404
// session_not_found, as for a session that does not exist; no list
// shows another's session.
func (h *harness) sessionIsolation(user string, mine map[string]string) {
	h.t.Helper()
	_, body := h.do(user, "GET", "/v1/sessions", nil)
	for id, owner := range mine {
		if has := strings.Contains(string(body), id); has != (owner == user) {
			h.t.Errorf("GET /v1/sessions as %s shows %s's session: %v", user, owner, has)
		}
	}
	_, missing := h.do(user, "GET", "/v1/sessions/0123456789abcdef0123456789abcdef", nil)
	for id, owner := range mine {
		own := owner == user
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/sessions/" + id}, {"POST", "/v1/sessions/" + id + "/cookie"}, {"POST", "/v1/sessions/" + id + "/extend"},
			{"DELETE", "/v1/sessions/" + id},
		} {
			if own && r.method == "DELETE" {
				continue // TestSessionExtendDelete
			}
			var b any
			if strings.HasSuffix(r.path, "/extend") {
				b = map[string]int{"minutes": 1}
			}
			code, body := h.do(user, r.method, r.path, b)
			if own && code != 200 || !own && (code != 404 || errCode(string(body)) != "session_not_found") {
				h.t.Errorf("%s %s as %s = %d %s, own %v", r.method, r.path, user, code, body, own)
			}
			if !own && strings.ReplaceAll(string(body), id, "0123456789abcdef0123456789abcdef") != string(missing) {
				h.t.Errorf("%s %s as %s: another's session answers\n%s\nand a missing one\n%s", r.method, r.path, user, body, missing)
			}
		}
		code, body, _ := h.proxied(user, "GET", "/v1/sessions/"+id+"/proxy/lab")
		if own && code != 200 || !own && (code != 404 || errCode(body) != "session_not_found") {
			h.t.Errorf("proxy of %s's session as %s = %d %s", owner, user, code, body)
		}
	}
}

// isolationSessions starts a running session for mem and one for gmem,
// each with its server and connection file: session id -> owner.
func (h *harness) isolationSessions() map[string]string {
	h.t.Helper()
	h.store.SetClock(func() time.Time { return h.now })
	out := map[string]string{}
	for _, user := range []string{"mem", "gmem"} {
		srv := newServer(h.t, session.JupyterLab)
		s := h.start(user, "notebook", nil)
		h.run(s, user, "notebook", "RUNNING", false)
		h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
		out[s.ID] = user
	}
	return out
}

// TestSessionStream: a response that streams longer than the portal's
// write timeout, and an upload longer than its read timeout, pass the
// proxy whole.
func TestSessionStream(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		for i := range 6 {
			fmt.Fprintf(w, "chunk %d of %d bytes\n", i, n)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	t.Cleanup(backend.Close)
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(backend.URL, "http://"))
	port, _ := strconv.Atoi(p)
	s := h.start("mem", "notebook", nil)
	h.run(s, "mem", "notebook", "RUNNING", false)
	h.writeConn(s.ID, session.JupyterLab, "gpu1", port, sessionSecret)
	// The portal's server with timeouts far shorter than the stream.
	front := httptest.NewUnstartedServer(h.server)
	front.Config.ReadTimeout, front.Config.WriteTimeout = 250*time.Millisecond, 250*time.Millisecond
	front.Start()
	t.Cleanup(front.Close)
	pr, pw := io.Pipe()
	go func() {
		for range 5 {
			pw.Write([]byte(strings.Repeat("x", 1000)))
			time.Sleep(80 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, front.URL+onSessions(s.URL)+"upload", pr)
	req.Host = testOrigin.Host
	req.Header.Set("Authorization", "Bearer "+h.tokens["mem"])
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || strings.Count(string(body), "chunk") != 6 || !strings.Contains(string(body), "of 5000 bytes") {
		t.Errorf("streamed through the proxy: %d %q %v", resp.StatusCode, body, err)
	}
}

// TestSessionEndWaitsForReclaimd: a GPU session whose job was cancelled
// while reclaimd does not answer is not settled as a plain cancel at once:
// reclaimd may have cancelled it, and once it answers its reason is the
// session's. After core.ReclaimdEndWait without an answer the end is a cancel.
func TestSessionEndWaitsForReclaimd(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	cancelled := func(s started, endedAgo time.Duration) {
		h.setJob(clustertest.Job{ID: s.JobID, User: "mem", Account: "acme-llm", State: "CANCELLED", QOS: "interactive",
			Comment: "strata:class=interactive strata:template=gpunotebook", EndTime: h.now.Add(-endedAgo).Unix()})
	}
	recent := h.start("mem", "gpunotebook", nil)
	h.run(recent, "mem", "gpunotebook", "RUNNING", true)
	cancelled(recent, time.Minute)
	h.reclaimdDown.Store(true)
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), recent.ID); !rec.Ended.IsZero() {
		t.Fatalf("ended while reclaimd did not answer: %+v", rec)
	}
	h.reclaimdDown.Store(false)
	h.reclaimRecords.Store(recent.JobID, fmt.Sprintf(`{"job_id": %d, "decisions": [
		{"rule": "interactive-idle", "action": "cancel", "reason": "GPU gpu1:0 idle for 2h15m", "outcome": "done", "decided_at": "2026-12-01T10:15:00Z"}]}`, recent.JobID))
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), recent.ID); rec.EndReason != "reclaimd: GPU gpu1:0 idle for 2h15m" {
		t.Errorf("once reclaimd answered: %+v", rec)
	}

	old := h.start("mem", "gpunotebook", nil)
	h.run(old, "mem", "gpunotebook", "RUNNING", true)
	cancelled(old, core.ReclaimdEndWait+time.Minute)
	h.reclaimdDown.Store(true)
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), old.ID); rec.EndReason != "the session's job was cancelled in Slurm" {
		t.Errorf("past the wait: %+v", rec)
	}
}

// TestSessionCookieKey: portals given one CookieKey (a restarted one, or
// a second behind the same address, over the same database) take each
// other's cookies; a portal with another key, or with none (a key of its
// own process), refuses them and says to ask for a new one.
func TestSessionCookieKey(t *testing.T) {
	h := newHarness(t)
	srv := newServer(t, session.JupyterLab)
	s := h.start("mem", "notebook", nil)
	h.run(s, "mem", "notebook", "RUNNING", false)
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	// portal is a server over h's clusters and store with key.
	portal := func(key []byte) *httptest.Server {
		cfg := h.server.cfg
		cfg.Registry = prometheus.NewRegistry()
		cfg.Sessions.CookieKey = key
		ts := httptest.NewServer(New(cfg))
		t.Cleanup(ts.Close)
		return ts
	}
	key := []byte("a-cookie-key-the-portals-share-0123456789")
	first, second := portal(key), portal(key)
	other, own := portal([]byte("another-cookie-key-of-a-portal-0123456789")), portal(nil)
	h.srv = first
	cookie := h.sessionCookie(s.ID)
	for name, tc := range map[string]struct {
		ts   *httptest.Server
		want int
	}{
		"the portal that set it": {first, 200}, "another with its key": {second, 200},
		"one with another key": {other, 401}, "one with a key of its own": {own, 401},
	} {
		h.srv = tc.ts
		code, body, _ := h.proxied("", "GET", s.URL+"lab", cookie)
		if code != tc.want || tc.want == 401 && !strings.Contains(body, "cookie") {
			t.Errorf("%s: %d %s, want %d", name, code, body, tc.want)
		}
	}
}

// TestSessionCookieRevoked: a session's cookie ends with the credential
// it was made from: revoking the personal token refuses the cookie on its
// next request, renewal included, and so does revoking the user
// (strata-portal-api token revoke-user), for a cookie made with a new
// token.
func TestSessionCookieRevoked(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	srv := newServer(t, session.JupyterLab)
	s := h.start("mem", "notebook", nil)
	h.run(s, "mem", "notebook", "RUNNING", false)
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	cookie := h.sessionCookie(s.ID)
	if code, body, _ := h.proxied("", "GET", s.URL+"lab", cookie); code != 200 {
		t.Fatalf("fresh cookie: %d %s", code, body)
	}
	toks, err := h.store.Tokens(t.Context(), "mem")
	if err != nil || len(toks) != 1 {
		t.Fatalf("mem's tokens = %+v, %v", toks, err)
	}
	if err := h.store.RevokeToken(t.Context(), toks[0].ID); err != nil {
		t.Fatal(err)
	}
	code, body, hdr := h.proxied("", "GET", s.URL+"lab", cookie)
	if code != 401 || !strings.Contains(body, "no longer valid") || hdr.Get("Set-Cookie") != "" {
		t.Errorf("the cookie of a revoked token: %d %s (Set-Cookie %q)", code, body, hdr.Get("Set-Cookie"))
	}
	h.now = h.now.Add(40 * time.Minute) // past half its life: it would renew
	if code, _, hdr := h.proxied("", "GET", s.URL+"lab", cookie); code != 401 || hdr.Get("Set-Cookie") != "" {
		t.Errorf("the cookie of a revoked token, due for renewal: %d (Set-Cookie %q)", code, hdr.Get("Set-Cookie"))
	}

	tok, _, err := h.store.CreateToken(t.Context(), "mem", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h.tokens["mem"] = tok
	cookie = h.sessionCookie(s.ID)
	if code, body, _ := h.proxied("", "GET", s.URL+"lab", cookie); code != 200 {
		t.Fatalf("a cookie of the new token: %d %s", code, body)
	}
	h.now = h.now.Add(time.Second)
	if _, err := h.store.RevokeUser(t.Context(), "mem"); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := h.proxied("", "GET", s.URL+"lab", cookie); code != 401 || !strings.Contains(body, "no longer valid") {
		t.Errorf("the cookie of a revoked user: %d %s", code, body)
	}
}

// testOrigin is the harness's session origin: the same listener as the
// API, told apart by the Host a request names.
var testOrigin = func() *SessionOrigin {
	o, err := ParseSessionOrigin("http://sessions.test")
	if err != nil {
		panic(err)
	}
	return o
}()

// onSessions is the path of a URL on the session origin (a path stays).
func onSessions(u string) string {
	return strings.TrimPrefix(u, testOrigin.Scheme+"://"+testOrigin.Host)
}

// TestSessionMetrics: the open sessions by cluster and state as the idle
// loop counts them, every series there from the start; a session the
// loop ends leaves the count in the same look. The proxy's own series are
// on the same /metrics (sessionproxy's TestMetrics checks them).
func TestSessionMetrics(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	scrape := func() string {
		t.Helper()
		resp, err := h.srv.Client().Get(h.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	expect := func(step string, want ...string) {
		t.Helper()
		text := scrape()
		for _, w := range want {
			if !strings.Contains(text, w+"\n") {
				t.Errorf("%s: /metrics lacks %s", step, w)
			}
		}
	}
	expect("at start",
		`strata_portal_sessions_open{cluster="gpu1",state="SUBMITTED"} 0`,
		`strata_portal_sessions_open{cluster="gpu1",state="RUNNING"} 0`,
		`strata_portal_sessions_open{cluster="gpu2",state="PENDING"} 0`,
		`strata_portal_sessions_open{cluster="gpu2",state="SUSPENDED"} 0`,
		`strata_portal_session_proxy_max_connections 64`,
		`strata_portal_session_proxy_connections 0`,
		`strata_portal_session_proxy_refusals_total{code="session_busy"} 0`)

	nb := h.start("mem", "notebook", nil) // idle limit 30m
	sh := h.start("mem", "shell", nil)
	h.server.CheckSessions(t.Context())
	expect("two submitted", `strata_portal_sessions_open{cluster="gpu1",state="SUBMITTED"} 2`)

	h.run(nb, "mem", "notebook", "RUNNING", false)
	h.run(sh, "mem", "shell", "PENDING", false)
	h.server.CheckSessions(t.Context())
	expect("one running, one pending",
		`strata_portal_sessions_open{cluster="gpu1",state="SUBMITTED"} 0`,
		`strata_portal_sessions_open{cluster="gpu1",state="RUNNING"} 1`,
		`strata_portal_sessions_open{cluster="gpu1",state="PENDING"} 1`,
		`strata_portal_sessions_open{cluster="gpu2",state="RUNNING"} 0`)

	// The notebook idle past its limit (its server never answered): the
	// look that ends it does not count it.
	h.now = h.now.Add(40 * time.Minute)
	h.pollers["gpu1"].Poll(t.Context())
	h.server.CheckSessions(t.Context())
	if rec, _ := h.store.GetSession(t.Context(), nb.ID); rec.Ended.IsZero() {
		t.Fatalf("the idle notebook was not ended: %+v", rec)
	}
	expect("the notebook ended",
		`strata_portal_sessions_open{cluster="gpu1",state="RUNNING"} 0`,
		`strata_portal_sessions_open{cluster="gpu1",state="PENDING"} 1`)

	text := scrape()
	if strings.Contains(text, nb.ID) || strings.Contains(text, `"mem"`) {
		t.Errorf("/metrics names a session or a user")
	}
	// The portal's whole exposition passes Prometheus's own lint.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus): the lint is skipped")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
