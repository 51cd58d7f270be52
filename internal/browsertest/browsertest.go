// Package browsertest runs Debian's headless Chromium (chromium-headless-shell,
// or chromium) for tests through chromedp: one browser per test binary,
// shared by the suite, and a fresh browser context (its own cookies and
// storage) per tab. Without a browser a test is skipped on a developer's
// machine and fails under CI=true (make deps and .ci/run install it).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Candidates are the browsers looked for, in order: Debian's packages.
var Candidates = []string{"chromium-headless-shell", "chromium", "chromium-browser"}

// Path is the browser found on PATH (or in /usr/lib/chromium), or "".
func Path() string {
	for _, c := range Candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if p := "/usr/lib/chromium/chromium-headless-shell"; fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

var (
	once    sync.Once
	browser context.Context
	initErr error
)

// Tab returns a chromedp context for a new tab in a fresh browser context
// of the shared browser; it is closed when t ends. It skips t without a
// browser, and fails it under CI=true.
func Tab(t testing.TB) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no browser: install Debian's chromium-headless-shell (make deps); looked for %s", strings.Join(Candidates, ", "))
		}
		t.Skipf("no browser on PATH (%s): apt-get install chromium-headless-shell fonts-noto-cjk, or make deps", strings.Join(Candidates, ", "))
	}
	once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			// Tests run as root in containers: no user namespace sandbox.
			chromedp.NoSandbox,
			// The test servers' certificates are made up by httptest.
			chromedp.IgnoreCertErrors,
			chromedp.Flag("lang", "en-US"),
			chromedp.Flag("font-render-hinting", "none"),
		)
		// Never cancelled: the browser lives as long as the test binary
		// (chromedp ends it with the process, Pdeathsig on Linux).
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		browser, _ = chromedp.NewContext(alloc)
		initErr = chromedp.Do(browser) // starts the browser
	})
	if initErr != nil {
		t.Fatalf("start %s: %v", path, initErr)
	}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// ArtifactDir is where a test keeps what it leaves for people to look at
// (screenshots): $STRATA_TEST_ARTIFACTS/<name>, else a folder under the
// system's temporary folder that outlives the test.
func ArtifactDir(t testing.TB, name string) string {
	t.Helper()
	base := os.Getenv("STRATA_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "strata-test-artifacts")
	}
	dir := filepath.Join(base, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
