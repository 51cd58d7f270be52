package web

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// noticeSpy records what the page hands the Notification API, and hands
// it on: injected through DevTools before the page's own scripts.
const noticeSpy = `window.__told = [];
(() => {
  const N = window.Notification;
  if (!N) return;
  function Spy(title, opts) { window.__told.push(title + ": " + ((opts && opts.body) || "")); try { return new N(title, opts); } catch (e) { return {}; } }
  Spy.requestPermission = (cb) => N.requestPermission(cb);
  Object.defineProperty(Spy, "permission", {get: () => N.permission});
  window.Notification = Spy;
})();`

// TestBrowserNotices: in Chromium, under the pages' CSP, the open My jobs
// page of mem tells her in its live region, and through a browser
// notification (permission granted through DevTools, as the user's
// click on "allow" would; headless Chromium says "denied" to
// Notification.permission whatever the override, and "granted" to the
// Permissions API, which app.js reads first), that her pending job started once the
// replayed slurmrestd says it runs; axe finds nothing wrong with the
// notice shown; the notices page says the browser will notify.
func TestBrowserNotices(t *testing.T) {
	ctx := browsertest.Tab(t)
	axe := axeSource(t)
	b, beds := coreBed(t)
	bb := newBrowserBed(t, b)
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: bb.srv.URL, BrowserContextID: chromedp.FromContext(ctx).BrowserContextID}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: noticeSpy}); err != nil {
		t.Fatal(err)
	}
	tok, _, err := bb.store.CreateLoginLink(t.Context(), "mem", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
	signInWithLink(t, ctx, bb.srv.URL, tok)
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs-live"))); err != nil {
		t.Fatal(err)
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitFor := func(what, js string, within time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if v := eval(js); v != "" {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s, still no %s", within, what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The page's first poll, from no time (a new tab).
	waitFor("first poll", `sessionStorage.getItem("strata.notices.since") || ""`, 10*time.Second)
	if got := eval(`document.getElementById("notices-live").textContent`); strings.Contains(got, "910102") {
		t.Fatalf("the pending job is told as started before it started: %q", got)
	}
	// Slurm starts the job; the pollers see it.
	jobs := slices.Clone(pagesGPU1)
	started := time.Unix(1795983872, 0).Add(5 * time.Second)
	jobs[1].State, jobs[1].Reason, jobs[1].StartTime = "RUNNING", "", started.Unix()
	beds["gpu1"].SetJobs(jobs...)
	b.poll(t)
	// The tab shown again asks at once (else within 30 s).
	eval(`document.dispatchEvent(new Event("visibilitychange")), ""`)
	text := waitFor("notice of job 910102", `(() => { const n = document.querySelector("#notices-live .notice[data-key='job-start:gpu1/910102']"); return n ? n.textContent : ""; })()`,
		10*time.Second)
	if !strings.Contains(text, "Job gpu1 910102 (llm-eval) has started.") {
		t.Errorf("the notice says %q", text)
	}
	if live := eval(`document.getElementById("notices-live").getAttribute("aria-live")`); live != "polite" {
		t.Errorf("the notices region's aria-live is %q", live)
	}
	// Only the jobs' notices are counted here: mem's seeded JupyterLab
	// session (job 910101) may be told as started and ending too, as its
	// sessions answer allows (TestNoticesOf checks those).
	if href := eval(`document.querySelector("#notices-live .notice[data-key^='job-start:'] a").getAttribute("href")`); href != "/jobs/gpu1/910102" {
		t.Errorf("the notice links to %q", href)
	}
	var told []string
	if err := json.Unmarshal([]byte(eval(`JSON.stringify(window.__told)`)), &told); err != nil {
		t.Fatal(err)
	}
	told = jobsTold(told)
	if len(told) != 1 || !strings.Contains(told[0], "910102") {
		t.Errorf("browser notifications: %q, want the one of job 910102", told)
	}
	if n := eval(`String(document.querySelectorAll("#notices-live button.notices-allow").length)`); n != "0" {
		t.Errorf("%s allow buttons with the permission granted", n)
	}
	// Asked again, it is told no second time.
	eval(`document.dispatchEvent(new Event("visibilitychange")), ""`)
	time.Sleep(2 * time.Second)
	if n := eval(`String(document.querySelectorAll("#notices-live .notice[data-key^='job-start:']").length)`); n != "1" {
		t.Errorf("%s notices after asking again, want 1", n)
	}
	// Four more start at once: told in the page each, and as one
	// browser notification.
	for i := range 4 {
		jobs = append(jobs, clustertestJob(910110+int64(i), started.Unix()))
	}
	beds["gpu1"].SetJobs(jobs...)
	b.poll(t)
	eval(`document.dispatchEvent(new Event("visibilitychange")), ""`)
	waitFor("four more notices", `document.querySelectorAll("#notices-live .notice[data-key^='job-start:']").length === 5 ? "yes" : ""`, 10*time.Second)
	if err := json.Unmarshal([]byte(eval(`JSON.stringify(window.__told)`)), &told); err != nil {
		t.Fatal(err)
	}
	told = jobsTold(told)
	if len(told) != 2 || !strings.Contains(told[1], "4 new notices") {
		t.Errorf("browser notifications after four starts at once: %q, want one that counts them", told)
	}
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
		t.Errorf("axe, with a notice shown: %s (%s): %s: %v", v.ID, v.Impact, v.Help, v.Nodes)
	}
	// The notices page: the browser's answer, no button to ask again.
	if err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+"/notices"), chromedp.WaitVisible(chromedp.CSS(".notices-state"))); err != nil {
		t.Fatal(err)
	}
	if s := eval(`document.querySelector(".notices-state").textContent`); !strings.Contains(s, "shows this portal's notices") {
		t.Errorf("the notices page says %q with the permission granted", s)
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("%d CSP violation reports: %v", len(r), r)
	}
}

// clustertestJob is a running job of mem's on gpu1 that started at start.
func clustertestJob(id, start int64) clustertest.Job {
	return clustertest.Job{ID: id, User: "mem", Account: "acme-llm", QOS: "train", Name: fmt.Sprintf("llm-run-%d", id), StartTime: start}
}

// jobsTold keeps the browser notifications that are not of a session:
// one job's start, or the count of several notices at once.
func jobsTold(told []string) []string {
	var out []string
	for _, n := range told {
		if !strings.Contains(n, " session ") {
			out = append(out, n)
		}
	}
	return out
}
