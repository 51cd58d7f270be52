package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
)

// axeSource is axe-core, test data only, checked against its record.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/axe/axe.min.js")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := os.ReadFile("testdata/axe/axe.version")
	sum := sha256.Sum256(b)
	if !strings.Contains(string(rec), "sha256 "+hex.EncodeToString(sum[:])) || !strings.Contains(string(rec), "version 4.14.1") {
		t.Fatalf("testdata/axe/axe.min.js is not the axe-core 4.14.1 its record names (sha256 %x)", sum)
	}
	return string(b)
}

// browserBed is the pages served to a real browser: the portal's handler
// under the security headers with a report-uri, and the reports it got.
type browserBed struct {
	*bed
	mu      sync.Mutex
	reports []string
}

func newBrowserBed(t *testing.T, b *bed) *browserBed {
	bb := &browserBed{bed: b}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /csp-report", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bb.mu.Lock()
		bb.reports = append(bb.reports, string(b))
		bb.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.Handle("/", Mount(api, bb.h, "/csp-report"))
	bb.srv.Config.Handler = mux
	return bb
}

func (bb *browserBed) cspReports() []string {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return append([]string(nil), bb.reports...)
}

// watch records, for the tab, every request's URL and every response's
// CSP header and status.
type watch struct {
	mu        sync.Mutex
	requests  []string
	responses map[string]network.Headers
	status    map[string]int64
}

func watchTab(t *testing.T, ctx context.Context) *watch {
	w := &watch{responses: map[string]network.Headers{}, status: map[string]int64{}}
	if err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			w.mu.Lock()
			w.requests = append(w.requests, ev.Request.URL)
			w.mu.Unlock()
		case *network.EventResponseReceived:
			w.mu.Lock()
			w.responses[ev.Response.URL] = ev.Response.Headers
			w.status[ev.Response.URL] = ev.Response.Status
			w.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *watch) reset() {
	w.mu.Lock()
	w.requests = nil
	w.responses = map[string]network.Headers{}
	w.status = map[string]int64{}
	w.mu.Unlock()
}

func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

const axeRun = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}, resultTypes: ["violations"]})
  .then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(" ") + ": " + n.failureSummary)}))))`

// clippedText lists the elements of tables and cards whose text is cut
// off: wider (or taller) than their box, which hides the rest (overflow
// hidden or clip, or an ellipsis). A box that scrolls shows the rest and
// is not clipped. Each is named by its tag, class and first words.
const clippedText = `(() => {
  const out = [];
  for (const el of document.querySelectorAll("table *, .card, .card *")) {
    if (!el.textContent.trim() || el.getClientRects().length === 0) continue;
    // Hidden on purpose, for screen readers alone (.visually-hidden).
    let shown = true;
    for (let a = el; a; a = a.parentElement) if (getComputedStyle(a).clipPath !== "none") shown = false;
    if (!shown) continue;
    const cs = getComputedStyle(el);
    const hides = v => v === "hidden" || v === "clip";
    const wide = el.scrollWidth > el.clientWidth + 1 && (hides(cs.overflowX) || cs.textOverflow === "ellipsis");
    const tall = el.scrollHeight > el.clientHeight + 1 && hides(cs.overflowY);
    if (wide || tall) {
      out.push(el.tagName.toLowerCase() + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "") +
        " (" + el.scrollWidth + "x" + el.scrollHeight + " in " + el.clientWidth + "x" + el.clientHeight + "): " + el.textContent.trim().slice(0, 60));
    }
  }
  return out;
})()`

// TestBrowser drives Debian's headless Chromium over the pages: at 1280
// and 390 px, light and dark, English and Korean, each page carries the
// CSP and draws no CSP violation, asks no other host, has no horizontal
// overflow and no text clipped in a table or a card, draws Hangul with a
// CJK font, passes axe-core, and leaves a screenshot; the cookie's
// attributes are as set; a cross-site form post is refused.
func TestBrowser(t *testing.T) {
	ctx := browsertest.Tab(t)
	axe := axeSource(t)
	cb, beds := submitBed(t, "../service/testdata/templates")
	setFinished(beds)
	bb := newBrowserBed(t, cb)
	w := watchTab(t, ctx)
	base, _ := url.Parse(bb.srv.URL)
	shots := browsertest.ArtifactDir(t, "portal-pages")
	t.Logf("screenshots in %s", shots)

	tok, _, err := bb.store.CreateLoginLink(t.Context(), "mem", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signedOut := []string{"/signin"}
	signedIn := []string{"/", "/jobs", "/jobs/finished?" + finishedWindow, "/jobs/gpu1/930001", "/jobs/gpu1/910101", "/jobs/gpu1/910102", "/jobs/gpu1/910102/confirm/cancel", "/jobs/gpu1/910101/serve", "/submit", "/submit/small", "/nowhere",
		"/sessions", "/sessions/" + testSession + "/confirm/end", "/sessions/gpunotebook/start",
		"/deployments", "/deployments/gpu1/llm-chat", "/deployments/gpu1/llm-chat/confirm/rollback?to=job-910100", "/notices"}

	check := func(t *testing.T, path, lang, theme string, width int64) {
		w.reset()
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": lang}}); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: theme}}}); err != nil {
			t.Fatal(err)
		}
		err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(bb.srv.URL+path))
		if err != nil && strings.Contains(err.Error(), "ERR_ABORTED") {
			// A navigation still settling from the step before (a
			// sign-in's redirect, an in-place refresh) cancels the new
			// one; once more is the same page load, not a retry of a
			// failure of the page.
			time.Sleep(200 * time.Millisecond)
			err = chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+path))
		}
		if err != nil {
			t.Fatal(err)
		}
		htmlLang, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`))
		if err != nil || htmlLang != lang {
			t.Errorf("<html lang> is %q, want %q (%v)", htmlLang, lang, err)
		}
		w.mu.Lock()
		for _, u := range w.requests {
			if pu, err := url.Parse(u); err == nil && pu.Scheme != "data" && pu.Host != base.Host {
				t.Errorf("a request to another host: %s", u)
			}
		}
		n := 0
		for u, h := range w.responses {
			if strings.HasPrefix(u, "data:") {
				continue
			}
			n++
			if got := header(h, "Content-Security-Policy"); got != CSP+"; report-uri /csp-report" {
				t.Errorf("%s: CSP %q", u, got)
			}
		}
		w.mu.Unlock()
		if n < 4 {
			t.Errorf("only %d responses seen: the page, its stylesheet and two scripts at least", n)
		}
		overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
		if err != nil || overflow {
			t.Errorf("horizontal overflow at %d px (%v)", width, err)
		}
		clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](clippedText))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range clipped {
			t.Errorf("text clipped at %d px: %s", width, c)
		}
		if path == "/sessions" {
			// Links drawn as buttons (start, open) are styled as buttons;
			// axe checks their contrast in each theme.
			st, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const a = document.querySelector("a.button"); if (!a) return "none";
  const s = getComputedStyle(a); return [s.display, s.borderTopStyle, s.paddingLeft, s.textDecorationLine].join(" "); })()`))
			if f := strings.Fields(st); err != nil || len(f) != 4 || !strings.Contains(f[0], "block") || f[1] != "solid" || f[2] == "0px" || f[3] != "none" {
				t.Errorf("a.button on /sessions: %q (%v), want a box with a border and padding, not underlined", st, err)
			}
		}
		if lang == "ko" {
			ids, err := chromedp.Run(ctx, chromedp.QueryNodeIDs(chromedp.CSS("h1")))
			if err != nil || len(ids) == 0 {
				t.Fatalf("no h1: %v", err)
			}
			fonts, err := chromedp.Call(ctx, css.GetPlatformFontsForNode, css.GetPlatformFontsForNodeParams{NodeID: ids[0]})
			if err != nil {
				t.Fatal(err)
			}
			cjk := false
			for _, f := range fonts.Fonts {
				if strings.Contains(f.FamilyName, "CJK") && f.GlyphCount > 0 {
					cjk = true
				}
			}
			if !cjk {
				var got []string
				for _, f := range fonts.Fonts {
					got = append(got, fmt.Sprintf("%s (%g glyphs)", f.FamilyName, f.GlyphCount))
				}
				t.Errorf("the Korean heading is drawn without a CJK font: %v (install fonts-noto-cjk)", got)
			}
		}
		if width == 1280 {
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](axe)); err != nil {
				t.Fatal(err)
			}
			out, err := chromedp.Run(ctx, chromedp.Evaluate[string](axeRun, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			var vs []axeViolation
			if err := json.Unmarshal([]byte(out), &vs); err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				t.Errorf("axe: %s (%s): %s: %v", v.ID, v.Impact, v.Help, v.Nodes)
			}
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.NewReplacer("/", "_", "?", "_", "=", "_").Replace(strings.Trim(path, "/"))
		if name == "" {
			name = "home"
		}
		if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%s-%d-%s-%s.png", name, width, theme, lang)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	each := func(paths []string) {
		for _, p := range paths {
			for _, lang := range []string{"en", "ko"} {
				for _, theme := range []string{"light", "dark"} {
					for _, width := range []int64{1280, 390} {
						t.Run(fmt.Sprintf("%s/%s/%s/%d", p, lang, theme, width), func(t *testing.T) { check(t, p, lang, theme, width) })
					}
				}
			}
		}
	}
	each(signedOut)

	// Sign in with the link, by clicking as a person would.
	signInWithLink(t, ctx, bb.srv.URL, tok)
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{bb.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || !session.Secure || session.SameSite != network.CookieSameSiteLax || session.Path != "/" || session.Session {
		t.Fatalf("the browser's session cookie: %+v", session)
	}
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); strings.Contains(v, SessionCookie) {
		t.Errorf("script can read the session cookie")
	}
	each(signedIn)

	// The clipped-text check finds a cell cut off: it can fail.
	t.Run("clipped text is found", func(t *testing.T) {
		planted := `(() => { const c = document.createElement("div"); c.className = "card"; const s = document.createElement("p");
  s.textContent = "a long line of words that cannot fit in its narrow box"; s.style.width = "40px"; s.style.whiteSpace = "nowrap";
  s.style.overflow = "hidden"; c.appendChild(s); document.body.appendChild(c); return true; })()`
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](planted)); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](clippedText))
		if err != nil || len(got) != 1 || !strings.Contains(got[0], "a long line of words") {
			t.Errorf("the check found %q in a page with one clipped line (%v)", got, err)
		}
	})

	t.Run("cross-site form post", func(t *testing.T) {
		evil := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!DOCTYPE html><form method="post" action="%s/prefs"><input name="lang" value="ko"><input name="next" value="/"></form>
<script>document.forms[0].submit()</script>`, bb.srv.URL)
		}))
		defer evil.Close()
		evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "en"}}); err != nil {
			t.Fatal(err)
		}
		w.reset()
		if err := chromedp.Do(ctx, chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		st := w.status[bb.srv.URL+"/prefs"]
		w.mu.Unlock()
		if st != http.StatusForbidden {
			t.Errorf("the cross-site post to /prefs answered %d, want 403", st)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/")); err != nil {
			t.Fatal(err)
		}
		lang, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`))
		user, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".who")))
		if lang != "en" || !strings.Contains(user, "mem") {
			t.Errorf("the refused post changed something: lang %q, %q", lang, user)
		}
	})
	// The operator's screen, as the operator of every tenant.
	opTok, _, err := bb.store.CreateLoginLink(t.Context(), "ops", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signInWithLink(t, ctx, bb.srv.URL, opTok)
	each([]string{"/operator", "/operator/jobs", "/operator/nodes/gpu1", "/operator/nodes/gpu1/gpu1/confirm/drain"})
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("%d CSP violation reports: %v", len(r), r)
	}
}

// TestBrowserKeyboardNoScript: with JavaScript off, a person signs in
// with a one-time link and signs out using the keyboard alone: the first
// Tab reaches the skip link, every focused control shows an outline, and
// the forms work without script.
func TestBrowserKeyboardNoScript(t *testing.T) {
	ctx := browsertest.Tab(t)
	bb := newBrowserBed(t, newBed(t, nil))
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	tok, _, err := bb.store.CreateLoginLink(t.Context(), "alice", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(bb.srv.URL+"/signin/link?t="+tok)); err != nil {
		t.Fatal(err)
	}
	focused := func() (map[string]string, string) {
		t.Helper()
		attrs, err := chromedp.Run(ctx, chromedp.Attributes(chromedp.CSS(":focus")))
		if err != nil {
			t.Fatalf("nothing has focus: %v", err)
		}
		st, err := chromedp.Run(ctx, chromedp.ComputedStyle(chromedp.CSS(":focus")))
		if err != nil {
			t.Fatal(err)
		}
		outline := ""
		for _, p := range st {
			if p.Name == "outline-style" {
				outline = p.Value
			}
		}
		return attrs, outline
	}
	// tabTo presses Tab until sel has focus, checking each stop's outline.
	tabTo := func(sel string) {
		t.Helper()
		for range 25 {
			if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
				t.Fatal(err)
			}
			attrs, outline := focused()
			if outline == "none" || outline == "" {
				t.Errorf("focus on %v is not visible (outline-style %q)", attrs, outline)
			}
			ids, _ := chromedp.Run(ctx, chromedp.QueryNodeIDs(chromedp.CSS(sel+":focus"), chromedp.AtLeast(0)))
			if len(ids) > 0 {
				return
			}
		}
		t.Fatalf("Tab never reached %s", sel)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
		t.Fatal(err)
	}
	if attrs, _ := focused(); attrs["class"] != "skip" {
		t.Errorf("the first Tab reaches %v, want the skip link", attrs)
	}
	tabTo("form[action='/signin/link'] button")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(".who"))); err != nil {
		t.Fatal(err)
	}
	who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".who")))
	if !strings.Contains(who, "alice") {
		t.Fatalf("signed in as %q", who)
	}
	tabTo("form[action='/signout'] button")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	// The page before has the same forms: wait for the sign-out's own
	// answer, the sign-in page, before asking for another.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if loc, _ := chromedp.Run(ctx, chromedp.Location()); strings.Contains(loc, "/signin?out=1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("signing out by keyboard never reached the sign-in page")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if !strings.Contains(loc, "/signin") {
		t.Errorf("after signing out by keyboard, / is %s", loc)
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("CSP violation reports: %v", r)
	}
}

// signInWithLink signs the tab in with a one-time link as a person would
// (the link's page, then its button) and returns once the page the
// sign-in lands on has loaded whole: a navigation asked for while that
// one still settles is aborted (net::ERR_ABORTED). The button is pressed
// through the DOM, not at its place on the screen, which a notice
// arriving may move.
func signInWithLink(t *testing.T, ctx context.Context, base, tok string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/signin/link?t="+tok),
		chromedp.WaitVisible(chromedp.CSS("form[action='/signin/link'] button"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector("form[action='/signin/link'] button").click(), true)`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.pathname !== "/signin/link" && document.readyState === "complete" && !!document.querySelector(".who")`))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
			t.Fatalf("not signed in after 20 s: at %s (%v)", where, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clickAndLoad presses the button sel through the DOM and returns once the
// page it brings has loaded whole: the document that was there is marked,
// and the wait ends on an unmarked one that is complete.
func clickAndLoad(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	js := `(window.__strataBefore = true, document.querySelector(` + jsString(sel) + `).click(), true)`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__strataBefore === undefined && document.readyState === "complete"`))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
			t.Fatalf("no new page loaded 20 s after pressing %s: at %s (%v)", sel, where, err)
		}
	}
}
