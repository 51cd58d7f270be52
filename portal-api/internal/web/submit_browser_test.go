package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// TestBrowserSubmit: in Chromium, the form's pattern is compiled as the
// portal reads it (a value the portal refuses fails the field's check, a
// good one passes), and the check button, pressed with a value over the
// project's limit, brings back the policy's refusal with its line and the
// values as typed, in Korean, without a CSP violation.
func TestBrowserSubmit(t *testing.T) {
	ctx := browsertest.Tab(t)
	sb, beds := submitBed(t, "../service/testdata/templates")
	bb := newBrowserBed(t, sb)
	tok, _, err := bb.store.CreateLoginLink(t.Context(), "mem", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signInWithLink(t, ctx, bb.srv.URL, tok)
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/submit/small")); err != nil {
		t.Fatal(err)
	}
	for value, mismatch := range map[string]bool{"A B": true, "!!!": true, "mine-1": false, "a-b-c": false} {
		js := `(() => { const f = document.getElementById("p-tag"); f.value = ` + jsString(value) + `; return f.validity.patternMismatch; })()`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil || got != mismatch {
			t.Errorf("tag %q: the browser's patternMismatch is %v, want %v (%v)", value, got, mismatch, err)
		}
	}
	// Korean from here: the choice kept in the page session.
	// Buttons are pressed through the DOM: a notice arriving at the top
	// of the page moves them from under a click at their place.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#pref-lang"), "ko")); err != nil {
		t.Fatal(err)
	}
	clickAndLoad(t, ctx, ".prefs button")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`html[lang="ko"]`)), chromedp.WaitVisible(chromedp.CSS("#p-gpus")), chromedp.SetValue(chromedp.CSS("#p-gpus"), "6"), chromedp.SetValue(chromedp.CSS("#p-tag"), "mine-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector('button[value="check"]').click(), true)`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#verdict"))); err != nil {
		t.Fatal(err)
	}
	verdict, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".verdict")))
	ko := i18n.For("ko", "")
	if !strings.Contains(verdict, ko.T("submit.check.refused")) || !strings.Contains(verdict, "policy.yaml:52") ||
		!strings.Contains(verdict, ko.T("refusal.gpus", ko.T("reason.kind.account")+" acme-llm", "4", "6")) {
		t.Errorf("the verdict in Korean: %q", verdict)
	}
	gpus, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("p-gpus").value`))
	if gpus != "6" {
		t.Errorf("the form after the check holds gpus %q, want 6", gpus)
	}
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
	if err != nil || overflow {
		t.Errorf("the verdict page overflows (%v)", err)
	}
	if n := len(beds["gpu1"].Submits()); n != 0 {
		t.Errorf("the check submitted %d jobs", n)
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("CSP violation reports: %v", r)
	}
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
