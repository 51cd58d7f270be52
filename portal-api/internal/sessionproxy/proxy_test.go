package sessionproxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/strata-hpc/strata/portal-api/internal/session"
)

const secret = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed"

// bed is a session's server (an httptest backend), its connection file in
// a session folder, the job it belongs to, and the proxy in front.
type bed struct {
	backend *httptest.Server
	front   *httptest.Server
	proxy   *Proxy
	dir     string
	hits    atomic.Int64
	mu      sync.Mutex
	job     session.Job
	pin     session.Pin
}

func newBed(t testing.TB, kind session.Kind, handler http.Handler, cfg Config) *bed {
	t.Helper()
	b := &bed{dir: t.TempDir()}
	b.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(b.backend.Close)
	host, port := hostPort(t, b.backend.URL)
	b.job = session.Job{State: "RUNNING", Nodes: []string{"gpu01", host}}
	b.writeFile(t, kind, host, port, secret, 0o600)
	cfg.Lookup = func(r *http.Request, id string) (session.Target, error) {
		if id != "s1" {
			return session.Target{}, ErrNotFound
		}
		b.mu.Lock()
		job, pin := b.job, b.pin
		b.mu.Unlock()
		return session.Resolve(b.dir, uint32(os.Getuid()), job, pin)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.proxy = p
	b.front = httptest.NewServer(p)
	t.Cleanup(b.front.Close)
	return b
}

func (b *bed) writeFile(t testing.TB, kind session.Kind, host string, port int, sec string, mode os.FileMode) {
	t.Helper()
	data := fmt.Sprintf(`{"version":1,"kind":%q,"host":%q,"port":%d,"secret":%q,"started":"2026-12-01T10:00:00Z"}`, kind, host, port, sec)
	path := filepath.Join(b.dir, session.FileName)
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func hostPort(t testing.TB, u string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func (b *bed) url(path string) string { return b.front.URL + "/v1/sessions/s1/proxy/" + path }

// seen is what a backend received.
type seen struct {
	mu     sync.Mutex
	path   string
	auth   string
	cookie string
	host   string
}

func (s *seen) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path, s.auth, s.cookie, s.host = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Host
}

func TestRoundTrip(t *testing.T) {
	for name, tc := range map[session.Kind]struct {
		wantPath   string
		wantAuth   string
		wantCookie string
	}{
		session.JupyterLab: {wantPath: "/v1/sessions/s1/proxy/api/status", wantAuth: "token " + secret, wantCookie: "_xsrf=x"},
		session.TTYD:       {wantPath: "/v1/sessions/s1/proxy/api/status", wantAuth: "Basic " + base64.StdEncoding.EncodeToString([]byte("strata:"+secret)), wantCookie: "_xsrf=x"},
		session.CodeServer: {wantPath: "/api/status", wantCookie: "_xsrf=x; code-server-session=" + secret},
	} {
		t.Run(string(name), func(t *testing.T) {
			var s seen
			b := newBed(t, name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.record(r)
				_, _ = io.WriteString(w, "ok "+r.URL.RawQuery)
			}), Config{DropCookies: []string{"strata_portal"}})
			req, _ := http.NewRequest(http.MethodGet, b.url("api/status?x=1"), nil)
			req.Header.Set("Authorization", "Bearer portal-token")
			req.Header.Set("Cookie", "strata_portal=portal-login; _xsrf=x; code-server-session=browser")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(body) != "ok x=1" {
				t.Fatalf("%d %q, want 200 from the server", res.StatusCode, body)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.path != tc.wantPath || s.auth != tc.wantAuth || s.cookie != tc.wantCookie {
				t.Errorf("the server got path %q, Authorization %q, Cookie %q; want %q, %q, %q", s.path, s.auth, s.cookie, tc.wantPath, tc.wantAuth, tc.wantCookie)
			}
			if s.host != strings.TrimPrefix(b.front.URL, "http://") {
				t.Errorf("the server got Host %q, want the portal's %s (Origin checks)", s.host, b.front.URL)
			}
			if res := get(t, b.front.URL+"/v1/sessions/s1/proxy"); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/v1/sessions/s1/proxy/" {
				t.Errorf("the bare prefix: %d to %q, want a redirect to the prefix with its slash", res.StatusCode, res.Header.Get("Location"))
			}
		})
	}
}

// reply is a response read to its end.
type reply struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// get GETs u without following redirects.
func get(t *testing.T, u string) reply {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return reply{StatusCode: res.StatusCode, Header: res.Header, Body: body}
}

func TestWebSocket(t *testing.T) {
	for _, kind := range session.Kinds {
		t.Run(string(kind), func(t *testing.T) { testWebSocket(t, kind) })
	}
}

// authorized says whether r carries the secret as a server of kind wants it.
func authorized(kind session.Kind, r *http.Request) bool {
	switch kind {
	case session.JupyterLab:
		return r.Header.Get("Authorization") == "token "+secret
	case session.TTYD:
		return r.Header.Get("Authorization") == "Basic "+base64.StdEncoding.EncodeToString([]byte("strata:"+secret))
	case session.CodeServer:
		c, err := r.Cookie("code-server-session")
		return err == nil && c.Value == secret
	}
	return false
}

func testWebSocket(t *testing.T, kind session.Kind) {
	b := newBed(t, kind, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(kind, r) {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		c, err := websocket.Accept(w, r, nil)
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
	}), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.url("api/kernels/k1/channels"), "http"), nil)
	if res != nil && res.Body != nil {
		defer res.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial through the proxy: %v", err)
	}
	defer c.CloseNow()
	for _, m := range []string{"1+1", "2+2"} {
		if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "echo "+m {
			t.Fatalf("read %q, %v; want the echo of %s", got, err, m)
		}
	}
	if n := b.proxy.Active("s1"); n != 1 {
		t.Errorf("an open WebSocket counts %d connections, want 1", n)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
}

func TestStreaming(t *testing.T) {
	more := make(chan struct{})
	var once sync.Once
	b := newBed(t, session.JupyterLab, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A download of known length: the case a proxy buffers unless
		// told not to (chunked responses are flushed anyway).
		w.Header().Set("Content-Length", "11")
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-more
		_, _ = io.WriteString(w, "last\n")
	}), Config{})
	// After newBed's: cleanups run last first, and the servers' Close
	// waits for the held handler.
	t.Cleanup(func() { once.Do(func() { close(more) }) })
	got := make(chan string, 1)
	go func() {
		// Headers too come only with the first flush: all of it waits here.
		res, err := http.Get(b.url("files/big"))
		if err != nil {
			got <- err.Error()
			return
		}
		defer res.Body.Close()
		line, _ := bufio.NewReader(res.Body).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "first\n" {
			t.Errorf("first chunk %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first chunk did not arrive before the response ended: the proxy buffers")
	}
	once.Do(func() { close(more) })
}

type errorBody struct {
	Error struct{ Code, Message string }
}

func decodeError(t *testing.T, res reply) errorBody {
	t.Helper()
	var e errorBody
	data := res.Body
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("body %q is not the proxy's JSON error", data)
	}
	if strings.Contains(string(data), secret) {
		t.Fatalf("the refusal quotes the secret: %s", data)
	}
	return e
}

func TestRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		setup      func(t *testing.T, b *bed)
		path       string
		wantStatus int
		wantCode   string
	}{
		"another user's session": {path: "/v1/sessions/s2/proxy/", wantStatus: 404, wantCode: CodeNotFound},
		"not a proxy path":       {path: "/v1/sessions/s1/other", wantStatus: 404, wantCode: CodeNotFound},
		"odd id":                 {path: "/v1/sessions/..%2f/proxy/", wantStatus: 404, wantCode: CodeNotFound},
		"finished job": {setup: func(t *testing.T, b *bed) { b.job.State = "COMPLETED" },
			wantStatus: 409, wantCode: CodeNotRunning},
		"pending job": {setup: func(t *testing.T, b *bed) { b.job = session.Job{State: "PENDING"} },
			wantStatus: 409, wantCode: CodeNotRunning},
		"another node": {setup: func(t *testing.T, b *bed) { b.job.Nodes = []string{"gpu01"} },
			wantStatus: 502, wantCode: CodeWrongHost},
		"another port": {setup: func(t *testing.T, b *bed) {
			h, p := hostPort(t, b.backend.URL)
			b.pin = session.Pin{Host: h, Port: p + 1}
		}, wantStatus: 502, wantCode: CodeWrongPort},
		"missing secret": {setup: func(t *testing.T, b *bed) {
			h, p := hostPort(t, b.backend.URL)
			b.writeFile(t, session.JupyterLab, h, p, "", 0o600)
		}, wantStatus: 502, wantCode: CodeNoSecret},
		"readable by others": {setup: func(t *testing.T, b *bed) {
			h, p := hostPort(t, b.backend.URL)
			b.writeFile(t, session.JupyterLab, h, p, secret, 0o644)
		}, wantStatus: 502, wantCode: CodeBadConnection},
		"a symbolic link": {setup: func(t *testing.T, b *bed) {
			f := filepath.Join(b.dir, session.FileName)
			if err := os.Rename(f, f+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(f+".real", f); err != nil {
				t.Fatal(err)
			}
		}, wantStatus: 502, wantCode: CodeBadConnection},
		"not written yet": {setup: func(t *testing.T, b *bed) { _ = os.Remove(filepath.Join(b.dir, session.FileName)) },
			wantStatus: 503, wantCode: CodeStarting},
		"server gone": {setup: func(t *testing.T, b *bed) { b.backend.Close() },
			wantStatus: 502, wantCode: CodeUnreachable},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t, session.JupyterLab, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Config{})
			if tc.setup != nil {
				b.mu.Lock()
				tc.setup(t, b)
				b.mu.Unlock()
			}
			path := tc.path
			if path == "" {
				path = "/v1/sessions/s1/proxy/api/status"
			}
			res := get(t, b.front.URL+path)
			if res.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", res.StatusCode, tc.wantStatus)
			}
			if e := decodeError(t, res); e.Error.Code != tc.wantCode {
				t.Errorf("code %q (%s), want %q", e.Error.Code, e.Error.Message, tc.wantCode)
			}
			if n := b.hits.Load(); n != 0 {
				t.Errorf("the server was reached %d times, want none", n)
			}
		})
	}
}

// TestSecretNotReturned: a server that echoes its credential in headers
// (a cookie, a redirect) does not hand it to the browser.
func TestSecretNotReturned(t *testing.T) {
	for _, kind := range session.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			b := newBed(t, kind, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Echo", r.Header.Get("Authorization"))
				w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
				w.Header().Add("Set-Cookie", "login="+secret+"; Path=/")
				w.Header().Set("Location", "/lab?token="+secret)
				w.Header().Set("X-Fine", "kept")
				w.WriteHeader(http.StatusFound)
			}), Config{})
			res := get(t, b.url("login"))
			var all strings.Builder
			_ = res.Header.Write(&all)
			all.Write(res.Body)
			basic := base64.StdEncoding.EncodeToString([]byte("strata:" + secret))
			if strings.Contains(all.String(), secret) || strings.Contains(all.String(), basic) {
				t.Errorf("the response carries the secret:\n%s", all.String())
			}
			if res.Header.Get("X-Fine") != "kept" {
				t.Errorf("a header without the secret was dropped too")
			}
		})
	}
}

func TestConcurrencyCap(t *testing.T) {
	release := make(chan struct{})
	var inside sync.WaitGroup
	inside.Add(2)
	b := newBed(t, session.TTYD, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") == "1" {
			inside.Done()
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}), Config{MaxConns: 2})
	var done sync.WaitGroup
	for range 2 {
		done.Go(func() {
			res, err := http.Get(b.url("x?hold=1"))
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
	inside.Wait()
	res := get(t, b.url("x"))
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("a third connection: %d, want 429 with Retry-After", res.StatusCode)
	}
	if e := decodeError(t, res); e.Error.Code != CodeBusy {
		t.Errorf("code %q, want %s", e.Error.Code, CodeBusy)
	}
	close(release)
	done.Wait()
	// The client has its response a moment before the handler returns.
	for deadline := time.Now().Add(5 * time.Second); b.proxy.Active("s1") != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := b.proxy.Active("s1"); n != 0 {
		t.Errorf("%d connections counted after all ended", n)
	}
	if res := get(t, b.url("x")); res.StatusCode != http.StatusOK {
		t.Errorf("after the others ended: %d, want 200", res.StatusCode)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a Lookup: no error")
	}
	lookup := func(*http.Request, string) (session.Target, error) { return session.Target{}, errors.New("x") }
	if _, err := New(Config{Lookup: lookup, MaxConns: -1}); err == nil {
		t.Error("New with a negative cap: no error")
	}
}

func TestSessionID(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/sessions/abc-1_2/proxy/":                          "abc-1_2",
		"/v1/sessions/abc/proxy":                               "abc",
		"/v1/sessions/abc/proxy/lab/tree":                      "abc",
		"/v1/sessions/abc/proxyx":                              "",
		"/v1/sessions//proxy/":                                 "",
		"/v1/sessions/a.b/proxy/":                              "",
		"/v2/sessions/abc/proxy/":                              "",
		"/v1/sessions/abc":                                     "",
		"/v1/sessions/" + strings.Repeat("a", 129) + "/proxy/": "",
	} {
		got, ok := sessionID(path)
		if got != want || ok != (want != "") {
			t.Errorf("sessionID(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
}
