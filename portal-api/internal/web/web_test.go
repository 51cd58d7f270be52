package web

import (
	"crypto/sha256"
	"encoding/hex"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	assets "github.com/strata-hpc/strata/portal-api/web"

	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

type bed struct {
	srv   *httptest.Server
	store *store.Store
	h     *Handler
	// bridge is gpu1's bridge, in the beds that have one (submitBed).
	bridge *fakeBridge
	// pollers are the clusters' pollers, in the beds over the core.
	pollers []*cluster.Poller
}

func newBed(t *testing.T, mod func(*Config)) *bed {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Store: st, IdleTimeout: time.Hour, MaxAge: 8 * time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"api":true}`)
	})
	srv := httptest.NewTLSServer(Mount(api, h, ""))
	t.Cleanup(srv.Close)
	return &bed{srv: srv, store: st, h: h}
}

// client is a browser of the bed: cookies kept, redirects not followed.
func (b *bed) client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := *b.srv.Client() // a browser of its own: the server's client is shared
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// answer is a response read whole, its body closed.
type answer struct {
	StatusCode int
	Status     string
	Header     http.Header
	cookies    []*http.Cookie
}

func (a answer) Cookies() []*http.Cookie { return a.cookies }

func read(t *testing.T, c *http.Client, req *http.Request) (answer, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header, cookies: resp.Cookies()}, string(body)
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (answer, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return read(t, c, req)
}

func post(t *testing.T, c *http.Client, u string, form url.Values, hdr ...string) (answer, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return read(t, c, req)
}

// signIn signs c in as user through a one-time link, as a browser would.
func (b *bed) signIn(t *testing.T, c *http.Client, user string) {
	t.Helper()
	tok, _, err := b.store.CreateLoginLink(t.Context(), user, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := post(t, c, b.srv.URL+"/signin/link", url.Values{"token": {tok}}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with a fresh link: %s", resp.Status)
	}
}

// TestTemplatesParse: every page parses with the layout, and every key a
// template asks of the catalogue is there in both languages.
func TestTemplatesParse(t *testing.T) {
	r, err := ParseTemplates(assets.Templates)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"home", "signin", "signin_link", "error"} {
		if _, ok := r.pages[want]; !ok {
			t.Errorf("page %s missing", want)
		}
	}
	key := regexp.MustCompile(`\.T "([^"]+)"`)
	files, _ := fs.Glob(assets.Templates, "templates/*.html")
	n := 0
	for _, f := range files {
		b, _ := fs.ReadFile(assets.Templates, f)
		for _, m := range key.FindAllStringSubmatch(string(b), -1) {
			n++
			if !i18n.Has(m[1]) {
				t.Errorf("%s uses key %q, which the catalogue lacks in English or Korean", f, m[1])
			}
		}
	}
	if n < 20 {
		t.Errorf("found only %d keys in the templates: is the pattern stale?", n)
	}
	// Keys handed to templates from Go.
	src, _ := filepath.Glob("*.go")
	goKey := regexp.MustCompile(`"((?:error|signin|home|jobs|job|operator|nav|prefs|chart|state|reason|deploy|session|submit|refusal)\.[a-z_.]*[a-z_])"`)
	for _, f := range src {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(f)
		for _, m := range goKey.FindAllStringSubmatch(string(b), -1) {
			if !i18n.Has(m[1]) {
				t.Errorf("%s uses key %q, which the catalogue lacks", f, m[1])
			}
		}
	}
}

// TestNoInlineCode: no template or asset holds inline script, inline
// style or an event-handler attribute, which the CSP would block.
func TestNoInlineCode(t *testing.T) {
	bad := regexp.MustCompile(`(?i)<script>|<script\s+(?:type="[^"]*"\s*)?>|style="|<style|\son[a-z]+="|javascript:`)
	err := fs.WalkDir(assets.Templates, "templates", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(assets.Templates, p)
		if m := bad.FindString(string(b)); m != "" {
			t.Errorf("%s holds %q", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHtmxVendored: the vendored htmx is the release and the bytes its
// record names.
func TestHtmxVendored(t *testing.T) {
	rec, err := fs.ReadFile(assets.Static, "static/htmx.version")
	if err != nil {
		t.Fatal(err)
	}
	var version, sum string
	for _, line := range strings.Split(string(rec), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "version" {
			version = f[1]
		}
		if len(f) == 2 && f[0] == "sha256" {
			sum = f[1]
		}
	}
	if version != "4.0.1" {
		t.Errorf("htmx version recorded %q, want 4.0.1", version)
	}
	b, err := fs.ReadFile(assets.Static, "static/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.Sum256(b)
	if hex.EncodeToString(got[:]) != sum {
		t.Errorf("htmx.min.js has SHA-256 %x, the record says %s", got, sum)
	}
	if !strings.Contains(string(b), `"4.0.1"`) {
		t.Errorf("htmx.min.js does not name its version 4.0.1")
	}
}

// TestSecurityHeaders: the CSP, nosniff and the referrer policy on every
// response, the pages', the static files' and the JSON API's, found or
// not, signed in or not; none on a session's proxied server.
func TestSecurityHeaders(t *testing.T) {
	b := newBed(t, nil)
	c := b.client(t)
	check := func(path string) {
		resp, _ := get(t, c, b.srv.URL+path)
		if got := resp.Header.Get("Content-Security-Policy"); got != CSP {
			t.Errorf("%s: CSP %q", path, got)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", path, got)
		}
		if got := resp.Header.Get("Referrer-Policy"); got != ReferrerPolicy {
			t.Errorf("%s: Referrer-Policy %q", path, got)
		}
	}
	for _, p := range []string{"/", "/signin", "/nowhere", "/static/style.css", "/static/htmx.min.js", "/v1/me", "/healthz", "/metrics"} {
		check(p)
	}
	b.signIn(t, c, "alice")
	for _, p := range []string{"/", "/nowhere"} {
		check(p)
	}
	if resp, _ := get(t, c, b.srv.URL+"/v1/sessions/abc/proxy/lab"); resp.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("the session proxy got the pages' CSP")
	}
	if isProxy("/v1/sessions/abc") || !isProxy("/v1/sessions/abc/proxy") || isProxy("/v1/sessionsx/a/proxy/") {
		t.Errorf("isProxy wrong")
	}
}

// TestCrossOriginRefused: a form post from another site is refused and
// changes nothing; the same post from the portal's own page passes.
func TestCrossOriginRefused(t *testing.T) {
	b := newBed(t, nil)
	c := b.client(t)
	b.signIn(t, c, "alice")
	resp, body := post(t, c, b.srv.URL+"/signout", nil, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, html.EscapeString(i18n.For("", "").T("error.cross_origin"))) {
		t.Errorf("cross-site sign-out: %s", resp.Status)
	}
	if resp, _ := get(t, c, b.srv.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Errorf("the refused post ended the session: %s", resp.Status)
	}
	resp, _ = post(t, c, b.srv.URL+"/prefs", url.Values{"lang": {"ko"}}, "Origin", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin preferences by Origin alone: %s", resp.Status)
	}
	resp, _ = post(t, c, b.srv.URL+"/signout", nil, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("same-origin sign-out: %s", resp.Status)
	}
}

// TestLoginLinkSignIn: a link signs in once; the cookie is __Host-,
// Secure, HttpOnly, SameSite=Lax; sign-out ends the session on the
// server, so the old cookie no longer works.
func TestLoginLinkSignIn(t *testing.T) {
	b := newBed(t, nil)
	c := b.client(t)
	resp, _ := get(t, c, b.srv.URL+"/")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?next=") {
		t.Fatalf("signed out home: %s %s", resp.Status, resp.Header.Get("Location"))
	}
	tok, _, _ := b.store.CreateLoginLink(t.Context(), "alice", 10*time.Minute)
	// The GET of a link (a preview bot) does not spend it.
	resp, body := get(t, c, b.srv.URL+"/signin/link?t="+tok)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `value="`+tok+`"`) {
		t.Fatalf("link page: %s", resp.Status)
	}
	resp, _ = post(t, c, b.srv.URL+"/signin/link", url.Values{"token": {tok}}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("link sign-in: %s", resp.Status)
	}
	var sc *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie {
			sc = ck
		}
	}
	if sc == nil || !sc.Secure || !sc.HttpOnly || sc.SameSite != http.SameSiteLaxMode || sc.Path != "/" || sc.Domain != "" ||
		sc.MaxAge != int((8*time.Hour)/time.Second) {
		t.Fatalf("session cookie %+v", sc)
	}
	_, body = get(t, c, b.srv.URL+"/")
	if !strings.Contains(body, "alice") {
		t.Errorf("home does not name alice")
	}
	// Used once: a second browser with the same link is refused.
	c2 := b.client(t)
	resp, body = post(t, c2, b.srv.URL+"/signin/link", url.Values{"token": {tok}}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") {
		t.Errorf("a spent link: %s", resp.Status)
	}
	if resp, _ := post(t, c, b.srv.URL+"/signout", nil, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %s", resp.Status)
	}
	// Replay the old cookie: the server ended it.
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: sc.Value})
	resp, _ = read(t, b.client(t), req)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the cookie still works after sign-out: %s", resp.Status)
	}
}

// TestProxySignIn: the trusted proxy's header signs in from a trusted
// address, and not from another.
func TestProxySignIn(t *testing.T) {
	for name, tc := range map[string]struct {
		trusted string
		want    int
	}{
		"trusted":   {trusted: "127.0.0.0/8", want: http.StatusOK},
		"untrusted": {trusted: "10.0.0.0/8", want: http.StatusSeeOther},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t, func(c *Config) {
				c.Auth = auth.New(auth.Config{Proxies: []netip.Prefix{netip.MustParsePrefix(tc.trusted)}, Header: "X-Remote-User"})
			})
			c := b.client(t)
			c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
				if len(via) > 3 || strings.HasPrefix(r.URL.Path, "/signin") {
					return http.ErrUseLastResponse
				}
				r.Header.Set("X-Remote-User", "carol")
				return nil
			}
			resp, body := get(t, c, b.srv.URL+"/", "X-Remote-User", "carol")
			if resp.StatusCode != tc.want {
				t.Fatalf("status %s, want %d", resp.Status, tc.want)
			}
			if tc.want == 200 && !strings.Contains(body, "carol") {
				t.Errorf("home does not name carol")
			}
		})
	}
}

// TestLanguage: Accept-Language picks Korean, the stored choice wins over
// it, and no page shows a bare key.
func TestLanguage(t *testing.T) {
	b := newBed(t, nil)
	c := b.client(t)
	_, body := get(t, c, b.srv.URL+"/signin", "Accept-Language", "ko-KR,ko;q=0.9")
	if !strings.Contains(body, `<html lang="ko"`) || !strings.Contains(body, "로그인") {
		t.Errorf("Korean browser got no Korean sign-in page")
	}
	b.signIn(t, c, "alice")
	_, body = get(t, c, b.srv.URL+"/", "Accept-Language", "ko")
	if !strings.Contains(body, "환영합니다") {
		t.Errorf("Korean home missing")
	}
	post(t, c, b.srv.URL+"/prefs", url.Values{"lang": {"en"}, "theme": {"dark"}, "next": {"/"}}, "Sec-Fetch-Site", "same-origin")
	_, body = get(t, c, b.srv.URL+"/", "Accept-Language", "ko")
	if !strings.Contains(body, `<html lang="en" data-theme="dark"`) || !strings.Contains(body, "Welcome, alice") {
		t.Errorf("the stored choice did not win:\n%.300s", body)
	}
	if regexp.MustCompile(`>(?:nav|home|signin|prefs|error)\.[a-z_.]+<`).MatchString(body) {
		t.Errorf("a bare catalogue key on the page")
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{"/jobs": "/jobs", "//evil.example/": "/", "https://evil.example": "/", "/\\evil": "/", "": "/"} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func assetsTemplates() fs.FS { return assets.Templates }

func sessOf(user string) store.PageSession { return store.PageSession{User: user, Via: ViaLink} }
