package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
)

// hostileSession is what a session's server may serve its owner: script
// that tries the pages with the owner's browser. It reads a page, posts
// the language form, frames a page, and writes what it got into the
// title.
const hostileSession = `<!DOCTYPE html><html lang="en"><title>running</title><body><iframe src="%[1]s/"></iframe><script>
(async () => {
  const out = {};
  try { const r = await fetch("%[1]s/", {credentials: "include"}); out.read = "read " + r.status + " " + (await r.text()).length; }
  catch (e) { out.read = "refused " + e.name; }
  try { await fetch("%[1]s/prefs", {method: "POST", mode: "no-cors", credentials: "include", body: new URLSearchParams({lang: "ko", next: "/"})}); out.post = "sent"; }
  catch (e) { out.post = "refused " + e.name; }
  await new Promise(r => setTimeout(r, 300));
  try { out.frame = document.querySelector("iframe").contentDocument === null ? "closed" : "open"; }
  catch (e) { out.frame = "refused " + e.name; }
  document.title = JSON.stringify(out);
})();
</script></body></html>`

// TestBrowserSessionOrigin: a session's script on the session origin
// (here localhost, the pages being 127.0.0.1, as a sessions host is apart
// from the pages') cannot read a page, cannot frame one, and its post is
// refused by the pages (403); the browser sends it none of the page
// session's cookie.
func TestBrowserSessionOrigin(t *testing.T) {
	ctx := browsertest.Tab(t)
	cb, _ := coreBed(t)
	bb := newBrowserBed(t, cb)
	w := watchTab(t, ctx)

	var mu sync.Mutex
	var cookies []string
	sess := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cookies = append(cookies, r.Header.Values("Cookie")...)
		mu.Unlock()
		rw.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(rw, hostileSession, bb.srv.URL)
	}))
	t.Cleanup(sess.Close)
	sessURL := strings.Replace(sess.URL, "127.0.0.1", "localhost", 1)

	tok, _, err := bb.store.CreateLoginLink(t.Context(), "mem", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signInWithLink(t, ctx, bb.srv.URL, tok)
	w.reset()
	if err := chromedp.Do(ctx, chromedp.Navigate(sessURL+"/v1/sessions/s1/proxy/lab"),
		chromedp.Poll[chromedp.Void](`document.title !== "running"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Read, Post, Frame string }
	if err := json.Unmarshal([]byte(title), &got); err != nil {
		t.Fatalf("the session's script wrote %q: %v", title, err)
	}
	if !strings.HasPrefix(got.Read, "refused") {
		t.Errorf("the session's script read a page: %s", got.Read)
	}
	if got.Frame == "open" {
		t.Errorf("the session's script reached into a framed page")
	}
	w.mu.Lock()
	post := w.status[bb.srv.URL+"/prefs"]
	pages := 0
	for u, h := range w.responses {
		// The pages it asked (the browser sends the Lax cookie on none of
		// these cross-site requests, so sign-in is what it got).
		if !strings.HasPrefix(u, bb.srv.URL+"/") || strings.HasSuffix(u, "/prefs") || strings.HasSuffix(u, "/csp-report") {
			continue
		}
		pages++
		if csp := header(h, "Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s asked from the session origin has CSP %q", u, csp)
		}
		if acao := header(h, "Access-Control-Allow-Origin"); acao != "" {
			t.Errorf("%s allows origin %q", u, acao)
		}
	}
	w.mu.Unlock()
	if post != http.StatusForbidden || pages == 0 {
		t.Errorf("the session's post to /prefs answered %d, want 403; %d pages seen", post, pages)
	}
	// The frame was refused by the page's frame-ancestors.
	if r := strings.Join(bb.cspReports(), "\n"); !strings.Contains(r, "frame-ancestors") {
		t.Errorf("no frame-ancestors report of the framed page: %q", r)
	}
	mu.Lock()
	for _, c := range cookies {
		if strings.Contains(c, SessionCookie) {
			t.Errorf("the page session's cookie reached the session origin: %s", c)
		}
	}
	mu.Unlock()
	// The refused post changed nothing.
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if lang, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`)); lang != "en" {
		t.Errorf("after the session's post the pages speak %q", lang)
	}
}

// TestSessionOriginSameSite: a sessions host is the same site as the
// pages (a subdomain); its post is refused all the same, and a page
// answers it with no CORS grant and no framing.
func TestSessionOriginSameSite(t *testing.T) {
	b := newBed(t, nil)
	c := b.client(t)
	b.signIn(t, c, "mem")
	for _, hdr := range []map[string]string{
		{"Sec-Fetch-Site": "same-site", "Origin": "https://0123abcd.sessions.portal.test"},
		{"Origin": "https://0123abcd.sessions.portal.test"},
	} {
		req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/prefs", strings.NewReader("lang=ko&next=/"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /prefs from the session origin (%v) = %d, want 403", hdr, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/", nil)
	req.Header.Set("Origin", "https://0123abcd.sessions.portal.test")
	req.Header.Set("Sec-Fetch-Site", "same-site")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Credentials") != "" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("a page asked from the session origin: %v", resp.Header)
	}
}
