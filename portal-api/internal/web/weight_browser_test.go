package web

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// pageBudget is the most a page without a chart may weigh, gzipped, on a
// first visit: the page, its stylesheet and scripts, and what its script
// asks at once (the notices).
const pageBudget = 60 * 1024

// weightJobs is gpu1's 2,000 jobs: pagesGPU1, and 1,996 more, a quarter
// running and the rest pending on four reasons, mem's one in ten (a
// busy researcher: 200 of her own), the rest other tenants' and users'.
func weightJobs() []clustertest.Job {
	jobs := append([]clustertest.Job(nil), pagesGPU1...)
	for i := range 2000 - len(pagesGPU1) {
		j := clustertest.Job{ID: int64(940000 + i), User: "gmem", Account: "globex-rl", QOS: "batch", Name: fmt.Sprintf("sweep-%04d", i)}
		switch {
		case i%10 == 0:
			j.User, j.Account, j.Name = "mem", "acme-llm", fmt.Sprintf("llm-sweep-%04d", i)
		case i%3 == 0:
			j.User, j.Account = fmt.Sprintf("u%03d", i%97), "acme-llm"
		}
		if i%4 != 0 {
			j.State, j.Reason = "PENDING", []string{"Priority", "Resources", "QOSGrpGRES", "AssocGrpGRES"}[i%4]
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// loadRecord is one resource of a page load, as Chromium reports it.
type loadRecord struct {
	url              string
	loader           cdp.LoaderID
	document         bool
	done, failed     bool
	encoded          float64
	requestID        network.RequestID
	responseReceived bool
}

// pageWeight is a page's first visit: the resources, the bytes as sent
// and gzipped, and the time to first render.
type pageWeight struct {
	path                 string
	resources            int
	sent, gzipped        int64
	firstRender, loadEnd time.Duration
}

// ownLoads keeps only the requests of the measured document's own load
// (its loader): the page before, when it has the same address (the
// sign-in lands on /), may still have a request of its own recorded, which
// the navigation cancels without an event of its end.
func ownLoads(loads map[network.RequestID]*loadRecord) {
	var loader cdp.LoaderID
	for _, l := range loads {
		if l.document {
			loader = l.loader
		}
	}
	if loader == "" {
		return
	}
	for id, l := range loads {
		if l.loader != "" && l.loader != loader {
			delete(loads, id)
		}
	}
}

// overBudget names the pages over budget.
func overBudget(ws []pageWeight, budget int64) []string {
	var over []string
	for _, w := range ws {
		if w.gzipped > budget {
			over = append(over, fmt.Sprintf("%s: %.1f KB gzipped, over the budget of %.0f KB", w.path, float64(w.gzipped)/1024, float64(budget)/1024))
		}
	}
	return over
}

func TestOverBudget(t *testing.T) {
	ws := []pageWeight{{path: "/a", gzipped: 10}, {path: "/b", gzipped: 61 * 1024}, {path: "/c", gzipped: 60 * 1024}}
	if got := overBudget(ws, pageBudget); len(got) != 1 || !strings.HasPrefix(got[0], "/b: 61.0 KB") {
		t.Errorf("over budget: %q", got)
	}
}

// TestBrowserWeight loads each page once, as a first visit (the cache
// off, the tab's notices not yet asked), in headless Chromium over a
// snapshot of 2,000 jobs, and measures what it transfers (as the portal
// sends it, and gzipped) and its time to first render (first contentful
// paint). A page over pageBudget gzipped fails; the table is logged and
// written to $STRATA_TEST_ARTIFACTS/portal-pages/weight.md. It measures;
// it does not time: the render times depend on the machine's load.
func TestBrowserWeight(t *testing.T) {
	ctx := browsertest.Tab(t)
	b, _ := submitBedWith(t, "../service/testdata/templates", weightJobs(), pagesGPU2)
	bb := newBrowserBed(t, b)

	var mu sync.Mutex
	loads := map[network.RequestID]*loadRecord{}
	// current is the page measured: only its own requests count, not
	// those the page before starts as it goes.
	current := ""
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if current != "" && ev.DocumentURL == current {
				loads[ev.RequestID] = &loadRecord{url: ev.Request.URL, requestID: ev.RequestID, loader: ev.LoaderID,
					document: ev.Type == network.ResourceTypeDocument && ev.Request.URL == current}
			}
		case *network.EventResponseReceived:
			if l := loads[ev.RequestID]; l != nil {
				l.responseReceived = true
			}
		case *network.EventLoadingFinished:
			if l := loads[ev.RequestID]; l != nil {
				l.done, l.encoded = true, ev.EncodedDataLength
			}
		case *network.EventLoadingFailed:
			if l := loads[ev.RequestID]; l != nil {
				l.done, l.failed = true, true
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	// Each page as a new tab's first: its notices asked at once.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `sessionStorage.clear()`}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		t.Fatal(err)
	}
	signIn := func(user string) {
		t.Helper()
		tok, _, err := bb.store.CreateLoginLink(t.Context(), user, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// The button is pressed through the DOM, not at its place on the
		// screen: the notices of the user signed in before may arrive and
		// move it between finding it and the click.
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(bb.srv.URL+"/signin/link?t="+tok),
			chromedp.WaitVisible(chromedp.CSS("form[action='/signin/link'] button"))); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector("form[action='/signin/link'] button").click(), true)`)); err != nil {
			t.Fatal(err)
		}
		// Signed in once the page after the link's names the user (the
		// link's own page names whoever was signed in before).
		for deadline := time.Now().Add(20 * time.Second); ; {
			who, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname === "/signin/link" ? "" : (document.querySelector(".who") || {}).textContent || ""`))
			if strings.Contains(who, user) {
				return
			}
			if time.Now().After(deadline) {
				where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " :: " + document.body.innerText.slice(0, 300)`))
				t.Fatalf("not signed in as %s after 20 s (%q) at %s", user, who, where)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	measure := func(path string) pageWeight {
		t.Helper()
		mu.Lock()
		loads = map[network.RequestID]*loadRecord{}
		current = bb.srv.URL + path
		mu.Unlock()
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+path))
		if err != nil && strings.Contains(err.Error(), "ERR_ABORTED") {
			// A navigation still settling from the step before (the
			// sign-in's redirect) cancels the new one: load it again.
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			loads = map[network.RequestID]*loadRecord{}
			mu.Unlock()
			start = time.Now()
			err = chromedp.Do(ctx, chromedp.Navigate(bb.srv.URL+path))
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		loadEnd := time.Since(start)
		// Until the notices have been asked and every request has ended.
		for deadline := time.Now().Add(20 * time.Second); ; {
			mu.Lock()
			ownLoads(loads)
			var pending []string
			notices := false
			for _, l := range loads {
				if !l.done {
					pending = append(pending, l.url)
				}
				notices = notices || (l.done && strings.Contains(l.url, "/notices?fragment=1"))
			}
			mu.Unlock()
			if len(pending) == 0 && notices {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: requests still open after 20 s: %q (notices asked: %v)", path, pending, notices)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The paint entry is written with the frame after the paint.
		fcp := -1.0
		for deadline := time.Now().Add(5 * time.Second); fcp < 0 && time.Now().Before(deadline); {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => { const e = performance.getEntriesByName("first-contentful-paint")[0] || performance.getEntriesByName("first-paint")[0]; return e ? e.startTime : -1; })()`))
			if err != nil {
				t.Fatal(err)
			}
			if fcp = v; fcp < 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		w := pageWeight{path: path, loadEnd: loadEnd, firstRender: time.Duration(fcp * float64(time.Millisecond))}
		mu.Lock()
		records := make([]loadRecord, 0, len(loads))
		for _, l := range loads {
			records = append(records, *l)
		}
		mu.Unlock()
		for _, l := range records {
			if l.failed || strings.HasPrefix(l.url, "data:") {
				continue
			}
			body, err := chromedp.Call(ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: l.requestID})
			if err != nil {
				t.Fatalf("%s: the body of %s: %v", path, l.url, err)
			}
			raw := body.Body
			if body.Base64encoded {
				if raw, err = base64.StdEncoding.DecodeString(string(body.Body)); err != nil {
					t.Fatal(err)
				}
			}
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, _ = zw.Write(raw)
			_ = zw.Close()
			w.resources++
			w.sent += int64(l.encoded)
			w.gzipped += int64(gz.Len())
		}
		if fcp < 0 {
			t.Errorf("%s: no first paint recorded", path)
		}
		return w
	}

	var ws []pageWeight
	signIn("mem")
	for _, p := range []string{"/", "/jobs", "/jobs/finished?" + finishedWindow, "/jobs/gpu1/910102", "/submit", "/submit/small", "/sessions", "/deployments", "/notices"} {
		ws = append(ws, measure(p))
	}
	signIn("ops")
	for _, p := range []string{"/operator", "/operator/jobs?cluster=gpu1&state=PENDING", "/operator/nodes/gpu1"} {
		ws = append(ws, measure(p))
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| page | resources | sent | gzipped | first render | load |\n|---|---|---|---|---|---|\n")
	for _, w := range ws {
		fmt.Fprintf(&out, "| `%s` | %d | %.1f KB | %.1f KB | %d ms | %d ms |\n", w.path, w.resources, float64(w.sent)/1024, float64(w.gzipped)/1024,
			w.firstRender.Milliseconds(), w.loadEnd.Milliseconds())
	}
	t.Logf("first visits over a 2,000-job snapshot:\n%s", out.String())
	if err := os.WriteFile(filepath.Join(browsertest.ArtifactDir(t, "portal-pages"), "weight.md"), []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range overBudget(ws, pageBudget) {
		t.Error(o)
	}
	for _, w := range ws {
		if w.resources < 5 {
			t.Errorf("%s: only %d resources seen: the page, its stylesheet, two scripts and the notices at least", w.path, w.resources)
		}
		// Sent compressed: headers add a few hundred bytes a resource
		// to the gzipped bodies, never twice as much.
		if w.sent > w.gzipped*3/2 {
			t.Errorf("%s: %.1f KB sent for %.1f KB gzipped: sent uncompressed", w.path, float64(w.sent)/1024, float64(w.gzipped)/1024)
		}
	}
	if r := bb.cspReports(); len(r) > 0 {
		t.Errorf("%d CSP violation reports: %v", len(r), r)
	}
}
