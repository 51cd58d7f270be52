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
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/signin/link?t="+tok), chromedp.Click(chromedp.CSS("form[action='/signin/link'] button")),
		chromedp.WaitVisible(chromedp.CSS(".who"))); err != nil {
		t.Fatal(err)
	}
	for lang, want := range map[string]*regexp.Regexp{
		"en": regexp.MustCompile(`^1 h (29|30) min$`),
		"ko": regexp.MustCompile(`^1시간 (29|30)분$`),
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/sessions"), chromedp.WaitVisible(chromedp.CSS("time[data-countdown]"))); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#pref-lang"), lang), chromedp.Click(chromedp.CSS(".prefs button")),
			chromedp.WaitVisible(chromedp.CSS(`html[lang="`+lang+`"]`)), chromedp.WaitVisible(chromedp.CSS("time[data-countdown]"))); err != nil {
			t.Fatal(err)
		}
		var got string
		for range 20 {
			got, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("time[data-countdown]").textContent`))
			if err == nil && want.MatchString(got) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !want.MatchString(got) {
			t.Errorf("%s: the countdown reads %q, want %s (%v)", lang, got, want, err)
		}
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("CSP violation reports: %v", r)
	}
}
