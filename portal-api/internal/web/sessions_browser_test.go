package web

import (
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
)

// TestBrowserCountdown: the sessions page's countdown to reclaimd's
// warning is the server's words at first (by the core's clock, days
// before the browser's now) and the script's once the page runs: the
// 90 minutes the fake reclaimd gives from the browser's clock, in
// English and in Korean, with no CSP violation.
func TestBrowserCountdown(t *testing.T) {
	ctx := browsertest.Tab(t)
	sb, _ := submitBed(t, "../service/testdata/templates")
	bb := newBrowserBed(t, sb)
	tok, _, err := bb.store.CreateLoginLink(t.Context(), "mem", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signInWithLink(t, ctx, bb.srv.URL, tok)
	for lang, want := range map[string]*regexp.Regexp{
		"en": regexp.MustCompile(`^1 h (29|30) min$`),
		"ko": regexp.MustCompile(`^1시간 (29|30)분$`),
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/sessions"), chromedp.WaitVisible(chromedp.CSS("time[data-countdown]"))); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#pref-lang"), lang)); err != nil {
			t.Fatal(err)
		}
		// The page may already be in lang: wait for the one the form
		// brings, or the next navigation aborts it (net::ERR_ABORTED).
		clickAndLoad(t, ctx, ".prefs button")
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`html[lang="`+lang+`"]`)), chromedp.WaitVisible(chromedp.CSS("time[data-countdown]"))); err != nil {
			t.Fatal(err)
		}
		// The script counts once the document has loaded, which on a
		// loaded machine comes seconds after the element is visible.
		var got string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			got, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("time[data-countdown]").textContent`))
			if err == nil && want.MatchString(got) {
				break
			}
		}
		if !want.MatchString(got) {
			t.Errorf("%s: the countdown reads %q, want %s (%v)", lang, got, want, err)
		}
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("CSP violation reports: %v", r)
	}
}

// TestBrowserSessionForm: in Chromium, a session template's form checks
// its values as the core does (gpus above the template's 2 overflows the
// field's range, 2 passes), and started with 2 GPUs it reaches
// slurmrestd as mem and comes back to the sessions page.
func TestBrowserSessionForm(t *testing.T) {
	ctx := browsertest.Tab(t)
	sb, beds := submitBed(t, "../service/testdata/templates")
	bb := newBrowserBed(t, sb)
	tok, _, err := bb.store.CreateLoginLink(t.Context(), "mem", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signInWithLink(t, ctx, bb.srv.URL, tok)
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/sessions/gpunotebook/start"), chromedp.WaitVisible(chromedp.CSS("#p-gpus"))); err != nil {
		t.Fatal(err)
	}
	for value, overflow := range map[string]bool{"3": true, "2": false, "1": false} {
		js := `(() => { const f = document.getElementById("p-gpus"); f.value = ` + jsString(value) + `; return f.validity.rangeOverflow; })()`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil || got != overflow {
			t.Errorf("gpus %s: the browser's rangeOverflow is %v, want %v (%v)", value, got, overflow, err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#p-gpus"), "2")); err != nil {
		t.Fatal(err)
	}
	// Pressed through the DOM, and waited for whole: the notices' live
	// region may hold a .notice of its own before the page changes.
	clickAndLoad(t, ctx, `button[value="start"]`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".notice"))); err != nil {
		t.Fatal(err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
	subs := beds["gpu1"].Submits()
	if loc != "/sessions?done=start" || len(subs) != 1 || subs[0].User != "mem" || !regexp.MustCompile(`gpu:2\b`).Match(subs[0].Body) {
		t.Errorf("after the start at %q, slurmrestd saw %d submissions", loc, len(subs))
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("CSP violation reports: %v", r)
	}
}
