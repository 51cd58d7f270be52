package service

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// originReq sends a request to ts as host, with a bearer token of user
// (none for "") and cookies; redirects are not followed.
func originReq(t *testing.T, ts *httptest.Server, host, method, path, token string, cookies ...*http.Cookie) (originAnswer, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return originAnswer{StatusCode: resp.StatusCode, Header: resp.Header, cookies: resp.Cookies()}, string(body)
}

// originAnswer is a response, its body read and closed.
type originAnswer struct {
	StatusCode int
	Header     http.Header
	cookies    []*http.Cookie
}

// TestSessionOrigin: with a session origin, the pages' host serves no
// session (bearer or cookie) and names where it is; the session origin
// serves sessions and nothing else; a launch URL, made for the owner
// only, gives the browser the session's cookie on the session origin
// once, within its minute.
func TestSessionOrigin(t *testing.T) {
	h := newHarness(t)
	h.store.SetClock(func() time.Time { return h.now })
	srv := newServer(t, session.JupyterLab)
	s := h.start("mem", "notebook", nil)
	h.run(s, "mem", "notebook", "RUNNING", false)
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	ts, pages, sess := h.srv, "portal.test", testOrigin.Host
	proxy := "/v1/sessions/" + s.ID + "/proxy/lab"
	cookie := h.sessionCookie(s.ID)

	// The pages' host: no session content, with a token or the cookie.
	for name, tc := range map[string]struct {
		token   string
		cookies []*http.Cookie
	}{"token": {h.tokens["mem"], nil}, "cookie": {"", []*http.Cookie{cookie}}} {
		resp, body := originReq(t, ts, pages, "GET", proxy, tc.token, tc.cookies...)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, sessionSecret) || !strings.Contains(body, testOrigin.ProxyURL(s.ID)) {
			t.Errorf("proxy on the pages' host with the %s: %d %s", name, resp.StatusCode, body)
		}
	}
	// The session's cookie is no credential on the pages' host.
	if resp, body := originReq(t, ts, pages, "GET", "/v1/sessions/"+s.ID, "", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/sessions/%s with the session's cookie: %d %s", s.ID, resp.StatusCode, body)
	}
	if resp, body := originReq(t, ts, pages, "POST", "/v1/sessions/"+s.ID+"/cookie", h.tokens["mem"]); resp.StatusCode != http.StatusNotFound ||
		resp.Header.Get("Set-Cookie") != "" || !strings.Contains(body, "http://sessions.test/v1/sessions/"+s.ID+"/cookie") {
		t.Errorf("cookie asked on the pages' host: %d %q %s", resp.StatusCode, resp.Header.Get("Set-Cookie"), body)
	}
	// The session origin: the session, and none of the API.
	if resp, body := originReq(t, ts, sess, "GET", proxy, "", cookie); resp.StatusCode != http.StatusOK {
		t.Errorf("proxy on the session origin with the cookie: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/v1/sessions/" + s.ID, "/v1/sessions", "/v1/me", "/healthz", "/metrics", "/v1/openapi.yaml"} {
		if resp, body := originReq(t, ts, sess, "GET", p, h.tokens["mem"]); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the session origin: %d %s", p, resp.StatusCode, body)
		}
	}
	// The API names the session's address on its origin.
	if v := h.sessionView("mem", s.ID); v["url"] != "http://sessions.test/v1/sessions/"+s.ID+"/proxy/" {
		t.Errorf("url = %v", v["url"])
	}

	// A launch URL: the owner's only.
	req := httptest.NewRequest(http.MethodPost, "/sessions/"+s.ID+"/open", nil)
	if _, p := h.server.SessionLaunchURL(req, auth.Identity{User: "gmem"}, s.ID); p == nil || p.Status != http.StatusNotFound {
		t.Errorf("gmem's launch URL of mem's session: %v", p)
	}
	launch := func() *url.URL {
		u, p := h.server.SessionLaunchURL(req, auth.Identity{User: "mem"}, s.ID)
		if p != nil {
			t.Fatal(p)
		}
		lu, err := url.Parse(u)
		if err != nil || lu.Host != sess || lu.Path != "/v1/sessions/"+s.ID+"/launch" {
			t.Fatalf("launch URL %q", u)
		}
		return lu
	}
	lu := launch()
	resp, body := originReq(t, ts, sess, "GET", lu.RequestURI(), "")
	var got *http.Cookie
	for _, c := range resp.cookies {
		if c.Name == sessionCookie {
			got = c
		}
	}
	// Not a redirect: the browser would send the new SameSite=Strict
	// cookie on none of a redirect chain that the pages (another site)
	// began. A page of the session origin's own refreshes to the server.
	to := "/v1/sessions/" + s.ID + "/proxy/"
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" || resp.Header.Get("Refresh") != "0; url="+to ||
		!strings.Contains(body, `<meta http-equiv="refresh" content="0; url=`+to+`">`) || !strings.Contains(body, `<a href="`+to+`">`) ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || got == nil || !got.HttpOnly || got.SameSite != http.SameSiteStrictMode ||
		got.Path != "/v1/sessions/"+s.ID+"/proxy" || got.Domain != "" || resp.Header.Get("Referrer-Policy") != "no-referrer" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("launch: %d %v %+v %s", resp.StatusCode, resp.Header, got, body)
	}
	if resp, body := originReq(t, ts, sess, "GET", proxy, "", &http.Cookie{Name: got.Name, Value: got.Value}); resp.StatusCode != http.StatusOK {
		t.Errorf("the launched cookie on the session origin: %d %s", resp.StatusCode, body)
	}
	// Once only; not on the pages' host; not for another session; not late.
	if resp, body := originReq(t, ts, sess, "GET", lu.RequestURI(), ""); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("launch used twice: %d %s", resp.StatusCode, body)
	}
	// Nor a second time under another spelling: encoding/base64 skips
	// line breaks, and the spent token is recorded as it was written.
	respelt := *lu
	q := respelt.Query()
	q.Set("t", q.Get("t")[:4]+"\n"+q.Get("t")[4:])
	respelt.RawQuery = q.Encode()
	if resp, body := originReq(t, ts, sess, "GET", respelt.RequestURI(), ""); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("launch used again with a line break in it: %d %s", resp.StatusCode, body)
	}
	fresh := launch()
	q = fresh.Query()
	tok := q.Get("t")
	q.Set("t", tok[:len(tok)-3]+"\r\n"+tok[len(tok)-3:])
	fresh.RawQuery = q.Encode()
	if resp, body := originReq(t, ts, sess, "GET", fresh.RequestURI(), ""); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("a fresh launch with a line break in its signature: %d %s", resp.StatusCode, body)
	}
	if resp, body := originReq(t, ts, pages, "GET", launch().RequestURI(), ""); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("launch on the pages' host: %d %s", resp.StatusCode, body)
	}
	other := launch()
	other.Path = "/v1/sessions/0123456789abcdef0123456789abcdef/launch"
	if resp, body := originReq(t, ts, sess, "GET", other.RequestURI(), ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("launch of another session: %d %s", resp.StatusCode, body)
	}
	late := launch()
	h.now = h.now.Add(launchLifetime)
	if resp, body := originReq(t, ts, sess, "GET", late.RequestURI(), ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("launch after its minute: %d %s", resp.StatusCode, body)
	}
}

// TestSessionOriginPerSession: on a per-session origin each session's
// host serves that session alone.
func TestSessionOriginPerSession(t *testing.T) {
	h := newHarness(t)
	srv := newServer(t, session.JupyterLab)
	a := h.start("mem", "notebook", nil)
	h.run(a, "mem", "notebook", "RUNNING", false)
	h.writeConn(a.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	o, err := ParseSessionOrigin("https://*.sessions.portal.test")
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.server.cfg
	cfg.Registry, cfg.Sessions.Origin = prometheus.NewRegistry(), o
	ts := httptest.NewServer(New(cfg))
	t.Cleanup(ts.Close)
	if got, want := o.ProxyURL(a.ID), "https://"+a.ID+".sessions.portal.test/v1/sessions/"+a.ID+"/proxy/"; got != want {
		t.Errorf("ProxyURL = %s, want %s", got, want)
	}
	path := "/v1/sessions/" + a.ID + "/proxy/lab"
	for host, want := range map[string]int{
		a.ID + ".sessions.portal.test":                          200,
		strings.ToUpper(a.ID) + ".Sessions.Portal.Test:443":     200, // a host name has no case
		"0123456789abcdef0123456789abcdef.sessions.portal.test": 404,
		"sessions.portal.test":                                  404,
		"x." + a.ID + ".sessions.portal.test":                   404,
		"portal.test":                                           404,
	} {
		if resp, body := originReq(t, ts, host, "GET", path, h.tokens["mem"]); resp.StatusCode != want {
			t.Errorf("Host %s: %d %s, want %d", host, resp.StatusCode, body, want)
		}
	}
}

// TestNoSessionOrigin: without a session origin no browser can open a
// session (no cookie is made, none is taken), and API clients still
// reach it with their token.
func TestNoSessionOrigin(t *testing.T) {
	h := newHarness(t)
	srv := newServer(t, session.JupyterLab)
	s := h.start("mem", "notebook", nil)
	h.run(s, "mem", "notebook", "RUNNING", false)
	h.writeConn(s.ID, session.JupyterLab, "gpu1", srv.port, sessionSecret)
	cookie := h.sessionCookie(s.ID) // made by the harness's portal, which has an origin
	cfg := h.server.cfg
	cfg.Registry, cfg.Sessions.Origin = prometheus.NewRegistry(), nil
	bare := New(cfg)
	ts := httptest.NewServer(bare)
	t.Cleanup(ts.Close)
	host := strings.TrimPrefix(ts.URL, "http://")
	path := "/v1/sessions/" + s.ID + "/proxy/lab"
	if resp, body := originReq(t, ts, host, "POST", "/v1/sessions/"+s.ID+"/cookie", h.tokens["mem"]); resp.StatusCode != http.StatusNotImplemented ||
		resp.Header.Get("Set-Cookie") != "" || !strings.Contains(body, "sessions.origin") {
		t.Errorf("cookie without an origin: %d %s", resp.StatusCode, body)
	}
	if resp, body := originReq(t, ts, host, "GET", path, "", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a cookie without an origin: %d %s", resp.StatusCode, body)
	}
	if resp, body := originReq(t, ts, host, "GET", path, h.tokens["mem"]); resp.StatusCode != http.StatusOK {
		t.Errorf("a token without an origin: %d %s", resp.StatusCode, body)
	}
	if resp, body := originReq(t, ts, host, "GET", "/v1/sessions/"+s.ID+"/launch?t=x", ""); resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("launch without an origin: %d %s", resp.StatusCode, body)
	}
	if _, p := bare.SessionLaunchURL(httptest.NewRequest(http.MethodPost, "/", nil), auth.Identity{User: "mem"}, s.ID); p == nil || p.Status != http.StatusNotImplemented {
		t.Errorf("a launch URL without an origin: %v", p)
	}
}

func TestParseSessionOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://sessions.portal.test":       "https sessions.portal.test  false",
		"https://Sessions.Portal.Test:8443/": "https sessions.portal.test 8443 false",
		"https://*.sessions.portal.test":     "https sessions.portal.test  true",
		"http://127.0.0.1:9000":              "http 127.0.0.1 9000 false",
		"https://sessions.portal.test/x":     "error",
		"ftp://sessions.portal.test":         "error",
		"https://*.10.0.0.1":                 "error",
		"https://a.*.portal.test":            "error",
		"https://*.":                         "error",
		"sessions.portal.test":               "error",
		"https://u@sessions.portal.test":     "error",
		"https://sessions.portal.test/?a=1":  "error",
	} {
		o, err := ParseSessionOrigin(in)
		got := "error"
		if err == nil {
			got = strings.Join([]string{o.Scheme, o.Host, o.Port, map[bool]string{true: "true", false: "false"}[o.PerSession]}, " ")
		}
		if got != want {
			t.Errorf("ParseSessionOrigin(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
}
