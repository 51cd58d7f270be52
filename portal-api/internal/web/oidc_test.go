package web

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// provider starts a real OpenID provider (zitadel/oidc's pkg/op, with the
// in-memory storage of its example server) on loopback, with alice as a
// user and the pages as a confidential client.
func provider(t *testing.T, redirect string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	users := map[string]*storage.User{"u-alice": {ID: "u-alice", Username: "alice", Password: "correct horse", FirstName: "Alice",
		LastName: "Kim", Email: "alice@example.org", EmailVerified: true}}
	f := filepath.Join(t.TempDir(), "users.json")
	b, _ := json.Marshal(users)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	us, err := storage.StoreFromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	storage.RegisterClients(storage.WebClient("strata-pages", "pages-secret", redirect))
	router := exampleop.SetupServer(issuer, storage.NewStorage(us), nil, false)
	srv := &http.Server{Handler: router}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return issuer
}

// TestOIDCCodeFlow: alice signs in through the provider's code flow with
// PKCE; the state and the flow's cookie are checked, so a callback with
// another state signs no one in.
func TestOIDCCodeFlow(t *testing.T) {
	var issuer string
	b := newBed(t, func(c *Config) {
		c.OIDC = &OIDC{ClientID: "strata-pages", ClientSecret: "pages-secret", UserClaim: "preferred_username"}
	})
	b.h.cfg.OIDC.RedirectURL = b.srv.URL + "/signin/callback"
	issuer = provider(t, b.h.cfg.OIDC.RedirectURL)
	b.h.cfg.OIDC.Issuer = issuer

	c := b.client(t)
	resp, body := get(t, c, b.srv.URL+"/signin")
	if !strings.Contains(body, `href="/signin/oidc?next=`) {
		t.Fatalf("the sign-in page offers no OIDC sign-in")
	}
	resp, _ = get(t, c, b.srv.URL+"/signin/oidc?next=/jobs")
	auth, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(auth.String(), issuer) {
		t.Fatalf("start: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) < 43 || q.Get("nonce") == "" || q.Get("state") == "" ||
		q.Get("response_type") != "code" {
		t.Fatalf("the authorization request lacks PKCE, nonce or state: %v", q)
	}
	// The provider: authorize, its login form, its callback, back to us.
	op := b.client(t)
	resp, _ = get(t, op, auth.String())
	login := resp.Header.Get("Location")
	id := regexp.MustCompile(`authRequestID=([^&]+)`).FindStringSubmatch(login)
	if id == nil {
		t.Fatalf("the provider did not ask for a login: %s %q", resp.Status, login)
	}
	resp, _ = post(t, op, issuer+"/login/username", url.Values{"username": {"alice"}, "password": {"correct horse"}, "id": {id[1]}})
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "http") {
		loc = issuer + loc
	}
	resp, _ = get(t, op, loc)
	cb := resp.Header.Get("Location")
	if !strings.HasPrefix(cb, b.srv.URL+"/signin/callback?") {
		t.Fatalf("the provider did not send the browser back: %s %q", resp.Status, cb)
	}

	// A callback with another state is refused and signs no one in.
	forged := strings.Replace(cb, "state="+url.QueryEscape(q.Get("state")), "state=forged", 1)
	if forged == cb {
		t.Fatalf("no state in the callback %q", cb)
	}
	c2 := b.client(t)
	u, _ := url.Parse(b.srv.URL)
	c2.Jar.SetCookies(u, c.Jar.Cookies(u))
	resp, _ = get(t, c2, forged)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a forged state: %s", resp.Status)
	}
	if resp, _ := get(t, c2, b.srv.URL+"/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("signed in after a forged state")
	}
	// A callback without the flow's cookie (another browser) is refused.
	resp, _ = get(t, b.client(t), cb)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a callback without the flow's cookie: %s", resp.Status)
	}

	// A flow cookie whose last part is spelt another way (bits past the
	// end of the base64, which a lax decoder drops) is refused before the
	// code is spent.
	c4 := b.client(t)
	var respelt []*http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == oidcCookie {
			v := []byte(ck.Value)
			v[len(v)-1]++ // "/jobs" ends "nM": N keeps the bytes and changes the spare bits
			ck = &http.Cookie{Name: ck.Name, Value: string(v)}
		}
		respelt = append(respelt, ck)
	}
	c4.Jar.SetCookies(u, respelt)
	if resp, _ := get(t, c4, cb); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a flow cookie spelt another way: %s", resp.Status)
	}

	// A copy of the browser, flow cookie and all, to replay the callback.
	c3 := b.client(t)
	c3.Jar.SetCookies(u, c.Jar.Cookies(u))
	resp, _ = get(t, c, cb)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs" {
		t.Fatalf("callback: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	_, body = get(t, c, b.srv.URL+"/")
	if !strings.Contains(body, "alice") {
		t.Errorf("home after the code flow does not name alice")
	}
	// The code was spent: replaying the callback signs no one in.
	if resp, _ := get(t, c3, cb); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a replayed callback: %s", resp.Status)
	}
}
