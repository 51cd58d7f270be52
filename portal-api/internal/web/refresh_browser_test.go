package web

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
	assets "github.com/strata-hpc/strata/portal-api/web"
)

// TestBrowserRefresh: app.js, through the vendored htmx and under the
// pages' CSP, swaps a data-refresh element in place while the tab is
// visible, asks nothing while it is hidden, and refreshes at once when
// it is shown again.
func TestBrowserRefresh(t *testing.T) {
	ctx := browsertest.Tab(t)
	var fetches atomic.Int64
	var reports atomic.Int64
	static, _ := fs.Sub(assets.Static, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><html lang="en"><head><title>refresh</title>
<script src="/static/htmx.min.js" defer></script><script src="/static/app.js" defer></script></head>
<body><main><div id="live" data-refresh="/fragment" data-every="5"><p>first</p></div><input id="other"></main></body></html>`)
	})
	mux.HandleFunc("GET /fragment", func(w http.ResponseWriter, r *http.Request) {
		n := fetches.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<p>fresh %d</p>`, n)
	})
	mux.HandleFunc("POST /csp-report", func(w http.ResponseWriter, r *http.Request) { reports.Add(1) })
	srv := httptest.NewTLSServer(Secure(mux, "/csp-report"))
	defer srv.Close()

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitText := func(want string, within time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(within)
		var got string
		for time.Now().Before(deadline) {
			got, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#live")))
			if strings.Contains(got, want) {
				return got
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("#live holds %q after %s, want %q", got, within, want)
		return got
	}
	waitText("fresh", 8*time.Second)

	// Hidden: as the browser says when the tab is in the background.
	setVisibility := func(state string) {
		t.Helper()
		js := fmt.Sprintf(`Object.defineProperty(document, "visibilityState", {configurable: true, get: () => %q});
document.dispatchEvent(new Event("visibilitychange")); true`, state)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
	}
	setVisibility("hidden")
	before := fetches.Load()
	time.Sleep(6 * time.Second)
	if n := fetches.Load() - before; n != 0 {
		t.Errorf("%d refreshes while the tab was hidden", n)
	}
	setVisibility("visible")
	waitText(fmt.Sprintf("fresh %d", before+1), 3*time.Second)
	if n := reports.Load(); n != 0 {
		t.Errorf("%d CSP violation reports", n)
	}
}
