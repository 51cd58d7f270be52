package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/strata-hpc/strata/internal/browsertest"
)

// visit is who looks at the pages: a one-time sign-in link, the name
// their screenshots carry, and the pages they open.
type visit struct {
	who   string
	link  string
	paths []string
}

// visits is the repeated -visit flag: "NAME LINK PATH,PATH,...".
type visits []visit

func (v *visits) String() string { return fmt.Sprint(len(*v)) }

func (v *visits) Set(s string) error {
	f := strings.Fields(s)
	if len(f) != 3 {
		return fmt.Errorf("-visit %q: give NAME LINK PATHS (PATHS comma-separated, such as /,/jobs)", s)
	}
	u, err := url.Parse(f[1])
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("-visit %q: %q is not a sign-in link (strata-portal-api login-link prints one)", s, f[1])
	}
	var paths []string
	for _, p := range strings.Split(f[2], ",") {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("-visit %q: page %q is not a path", s, p)
		}
		paths = append(paths, p)
	}
	*v = append(*v, visit{who: f[0], link: f[1], paths: paths})
	return nil
}

// pageLangs are the languages each page is opened in.
var pageLangs = []string{"en", "ko"}

// checkPages opens, in headless Chromium, each visit's sign-in link,
// signs in as a person would (the link's button), and opens each of
// its pages in English and Korean: each must answer 200 with a heading,
// in the language asked, without horizontal overflow at 1,280 px. A
// screenshot of each is left in shots. Every page that fails is named in
// the error.
func checkPages(ctx context.Context, vs []visit, shots string, out io.Writer) error {
	path := browsertest.Path()
	if path == "" {
		return fmt.Errorf("no browser on PATH (%s): apt-get install chromium-headless-shell fonts-noto-cjk, or make deps",
			strings.Join(browsertest.Candidates, ", "))
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("lang", "en-US"), chromedp.WindowSize(1280, 900))
	alloc, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		return fmt.Errorf("start %s: %w", path, err)
	}
	var failed []string
	for _, v := range vs {
		if err := visitPages(browser, v, shots, out); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

func visitPages(browser context.Context, v visit, shots string, out io.Writer) error {
	// A browser context of its own: its own cookies, as another person.
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()
	tab, cancelT := context.WithTimeout(tab, 2*time.Minute)
	defer cancelT()
	var mu sync.Mutex
	status := map[string]int64{}
	if err := chromedp.Listen(tab, func(ev any) {
		if ev, ok := ev.(*network.EventResponseReceived); ok && ev.Type == network.ResourceTypeDocument {
			mu.Lock()
			status[ev.Response.URL] = ev.Response.Status
			mu.Unlock()
		}
	}); err != nil {
		return err
	}
	if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
		return err
	}
	if err := chromedp.Do(tab, chromedp.Navigate(v.link), chromedp.Click(chromedp.CSS("form[action='/signin/link'] button")),
		chromedp.WaitVisible(chromedp.CSS(".who"))); err != nil {
		return fmt.Errorf("%s: the sign-in link did not sign in: %w", v.who, err)
	}
	base, _ := url.Parse(v.link)
	var failed []string
	for _, p := range v.paths {
		for _, lang := range pageLangs {
			u := base.Scheme + "://" + base.Host + p
			if msg := openPage(tab, u, lang, &mu, status); msg != "" {
				failed = append(failed, fmt.Sprintf("%s %s (%s): %s", v.who, p, lang, msg))
				continue
			}
			png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
			if err != nil {
				return err
			}
			name := strings.Trim(strings.NewReplacer("/", "_", "?", "_", "&", "_", "=", "-").Replace(p), "_")
			if name == "" {
				name = "home"
			}
			file := filepath.Join(shots, fmt.Sprintf("%s-%s-%s.png", v.who, name, lang))
			if err := os.WriteFile(file, png, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(out, "   %-6s %-28s %s  ok  %s\n", v.who, p, lang, file)
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// openPage opens u in lang and says what is wrong with it; "" when
// nothing is.
func openPage(tab context.Context, u, lang string, mu *sync.Mutex, status map[string]int64) string {
	if _, err := chromedp.Call(tab, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": lang}}); err != nil {
		return err.Error()
	}
	if err := chromedp.Do(tab, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
		return "no heading drawn: " + err.Error()
	}
	mu.Lock()
	st := status[u]
	mu.Unlock()
	if st != 200 {
		return fmt.Sprintf("answered %d", st)
	}
	got, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.lang`))
	if err != nil || got != lang {
		return fmt.Sprintf("drawn in %q", got)
	}
	overflow, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
	if err != nil || overflow {
		return "wider than the window"
	}
	return ""
}
