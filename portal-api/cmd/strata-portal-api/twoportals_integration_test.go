//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// answer is what a portal answered (its body is read and closed).
type answer struct {
	StatusCode int
	Status     string
	cookies    []*http.Cookie
}

// servePortal runs serve with cfg on a free loopback port until the test
// ends, and returns its base URL once it answers.
func servePortal(t *testing.T, cfg string) string {
	t.Helper()
	parseMu.Lock() // until serve answers
	defer parseMu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	own := strings.TrimSuffix(cfg, ".yaml") + "-" + strings.ReplaceAll(addr, ":", "-") + ".yaml"
	if err := os.WriteFile(own, append(b, []byte("listen: "+addr+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"strata-portal-api", "--config", own, "serve"}, io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve on %s: %v", addr, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve on %s did not stop", addr)
		}
	})
	base := "http://" + addr
	for range 200 {
		select {
		case err := <-done:
			t.Fatalf("serve on %s stopped: %v", addr, err)
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("serve on %s did not answer", addr)
	return ""
}

// sharedConfig is the configuration of portals that share one database
// on the PostgreSQL bed and serve one cluster (a fake slurmrestd), with
// extra appended to the cluster's settings.
func sharedConfig(t *testing.T, extra string) (string, pgtest.DB, *clustertest.Bed) {
	t.Helper()
	db := pgtest.New(t)
	bed := clustertest.New(t, "26.05",
		clustertest.Job{ID: 910101, User: "mem", Account: "acme-llm", Name: "llm-train"},
		clustertest.Job{ID: 910102, User: "mem", Account: "acme-llm", State: "PENDING", Reason: "Priority"})
	cfg := setup(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := regexp.MustCompile(`(?m)^database: .*$`).ReplaceAllString(string(b),
		"database: "+db.URL+"\ndatabase_password_file: "+db.PasswordFile)
	conf = strings.Replace(conf, "slurmrestd_url: http://127.0.0.1:6820", "slurmrestd_url: "+bed.URL+extra, 1)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := runCLI(t, "--config", cfg, "check-config"); err != nil {
		t.Fatalf("check-config: %v\n%s%s", err, out, stderr)
	}
	return cfg, db, bed
}

// TestTwoPortalsOneDatabase: two portals (real serve) on one PostgreSQL
// database, as two hosts behind one address would be, used alternately
// as a round-robin balancer would: a token made with one works on the
// other, a page session started through one is reached through the other
// and its sign-out holds on both, and every action is in the audit log
// once, whichever portal carried it out.
func TestTwoPortalsOneDatabase(t *testing.T) {
	cfg, db, bed := sharedConfig(t, "")
	portals := []string{servePortal(t, cfg), servePortal(t, cfg)}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(base, method, path, bearer, cookie string, form url.Values) (answer, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: web.SessionCookie, Value: cookie})
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return answer{StatusCode: resp.StatusCode, Status: resp.Status, cookies: resp.Cookies()}, string(data)
	}

	// A token made by the admin's CLI on one host works on both portals.
	out, stderr, err := runCLI(t, "--config", cfg, "token", "create", "--user", "mem", "--expires", "1h")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	tok := regexp.MustCompile(store.TokenPrefix + `[A-Za-z0-9_-]+`).FindString(out)
	if tok == "" {
		t.Fatalf("token create printed no token: %q", out)
	}
	for i, p := range portals {
		if resp, body := do(p, "GET", "/v1/me", tok, "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"mem"`) {
			t.Errorf("portal %d: /v1/me with the token: %s %s", i, resp.Status, body)
		}
	}

	// A page session: signed in through portal 0, reached through portal 1.
	out, stderr, err = runCLI(t, "--config", cfg, "login-link", "--user", "mem")
	if err != nil {
		t.Fatalf("login-link: %v\n%s", err, stderr)
	}
	u, err := url.Parse(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("login-link printed %q", out)
	}
	resp, _ := do(portals[0], "POST", "/signin/link", "", "", url.Values{"token": {u.Query().Get("t")}})
	var cookie string
	for _, ck := range resp.cookies {
		if ck.Name == web.SessionCookie {
			cookie = ck.Value
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in through portal 0: %s, cookie %q", resp.Status, cookie)
	}
	// The link is spent for both.
	if resp, _ := do(portals[1], "POST", "/signin/link", "", "", url.Values{"token": {u.Query().Get("t")}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the spent link through portal 1: %s, want 401", resp.Status)
	}
	for i, p := range portals {
		if resp, body := do(p, "GET", "/", "", cookie, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "mem") {
			t.Errorf("portal %d: / with the page cookie: %s", i, resp.Status)
		}
	}
	if resp, _ := do(portals[1], "GET", "/", "", "", nil); resp.StatusCode == http.StatusOK {
		t.Errorf("portal 1: / without a cookie: %s: the check above proves nothing", resp.Status)
	}

	// Each portal acts on the jobs of its own poll of slurmrestd: it
	// knows them once its first poll is in, which serve does not wait for.
	// (A job's own page asks slurmdbd for a job the poll has not brought
	// yet; the list is the poll's.)
	for i, p := range portals {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, body := do(p, "GET", "/v1/jobs", tok, "", nil)
			if resp.StatusCode == http.StatusOK && strings.Contains(body, "910101") && strings.Contains(body, "910102") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("portal %d: jobs 910101 and 910102 not listed 30 s after the start: %s %s", i, resp.Status, body)
			}
		}
	}

	// Actions, alternately through each portal: each is recorded once.
	actions := []struct {
		portal int
		path   string
	}{{0, "/v1/jobs/gpu1/910102/hold"}, {1, "/v1/jobs/gpu1/910102/release"}, {0, "/v1/jobs/gpu1/910101/cancel"}, {1, "/v1/jobs/gpu1/910102/cancel"}}
	for _, a := range actions {
		if resp, body := do(portals[a.portal], "POST", a.path, tok, "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("portal %d: POST %s: %s %s", a.portal, a.path, resp.Status, body)
		}
	}
	if got := len(bed.Controls()); got != len(actions) {
		t.Errorf("slurmrestd got %d controls, want %d: %+v", got, len(actions), bed.Controls())
	}
	st, err := store.OpenDatabase(t.Context(), store.Database{Setting: db.URL, PasswordFile: db.PasswordFile})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log, err := st.AuditLog(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range log {
		if a.Result != store.ResultOK {
			t.Errorf("audit record %d: %+v", a.ID, a)
		}
		seen[fmt.Sprintf("/v1/jobs/%s/%s/%s", a.Cluster, a.Target, a.Action)]++
	}
	for _, a := range actions {
		if seen[a.path] != 1 {
			t.Errorf("%s is in the audit log %d times, want once; the log: %+v", a.path, seen[a.path], log)
		}
	}
	if len(log) != len(actions) {
		t.Errorf("the audit log has %d records, want %d", len(log), len(actions))
	}

	// Sign-out through portal 1 ends the page session on portal 0 too.
	if resp, _ := do(portals[1], "POST", "/signout", "", cookie, url.Values{}); resp.StatusCode >= 400 {
		t.Errorf("sign-out through portal 1: %s", resp.Status)
	}
	if resp, _ := do(portals[0], "GET", "/", "", cookie, nil); resp.StatusCode == http.StatusOK {
		t.Errorf("portal 0 after sign-out through portal 1: %s, want the sign-in page", resp.Status)
	}
}

// TestTwoPortalsPollOnce: two portals on one database read slurmrestd as
// often as one: the portal that holds the cluster's poll lease polls, the
// other serves the snapshot it published.
func TestTwoPortalsPollOnce(t *testing.T) {
	cfg, _, bed := sharedConfig(t, "\n    poll_interval: 2s")
	out, stderr, err := runCLI(t, "--config", cfg, "token", "create", "--user", "mem", "--expires", "1h")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	tok := regexp.MustCompile(store.TokenPrefix + `[A-Za-z0-9_-]+`).FindString(out)
	jobs := func(base string) string {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	const window = 10 * time.Second
	one := servePortal(t, cfg)
	for i := 0; !strings.Contains(jobs(one), "910101"); i++ {
		if i > 100 {
			t.Fatal("the first portal shows no jobs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	n0 := bed.JobsRequests()
	time.Sleep(window)
	byOne := bed.JobsRequests() - n0
	two := servePortal(t, cfg)
	for i := 0; !strings.Contains(jobs(two), "910101"); i++ {
		if i > 100 {
			t.Fatal("the second portal shows no jobs: it reads no snapshot")
		}
		time.Sleep(100 * time.Millisecond)
	}
	n1 := bed.JobsRequests()
	time.Sleep(window)
	byTwo := bed.JobsRequests() - n1
	t.Logf("job listings in %s: one portal %d, two portals %d", window, byOne, byTwo)
	if byOne < 3 {
		t.Fatalf("one portal listed the jobs %d times in %s at a 2s interval: the measure is broken", byOne, window)
	}
	if byTwo > byOne+1 {
		t.Errorf("two portals listed the jobs %d times in %s, one portal %d: both poll", byTwo, window, byOne)
	}
}
