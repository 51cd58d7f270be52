//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"

	"github.com/strata-hpc/strata/internal/browsertest"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// journeyTemplate is a fine-tuning job that only holds its GPUs: the beds
// have no torchrun.
const journeyTemplate = `apiVersion: strata/v1
kind: JobTemplate
name: finetune
description: Fine-tune a model on the GPUs of one node.
type: batch
class: batch
parameters:
  - name: gpus
    description: GPUs of the node to use
    type: integer
    min: 1
    max: 8
    default: 1
    sets: gpus_per_node
  - name: epochs
    type: integer
    min: 1
    max: 100
    default: 3
options:
  nodes: 1
  cpus_per_task: 1
  time: 1h
script: |
  #!/bin/bash
  exec sleep 600
`

// journeyPassword is every user's password at the journey's provider.
const journeyPassword = "correct horse"

// journeyProvider starts a real OpenID provider (zitadel/oidc's pkg/op,
// with the in-memory storage of its example server, as the pages' own
// sign-in tests use) on loopback, with users and the pages as a
// confidential client that returns to redirect. It returns the issuer.
func journeyProvider(t *testing.T, redirect string, users ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	byID := map[string]*storage.User{}
	for _, u := range users {
		byID["u-"+u] = &storage.User{ID: "u-" + u, Username: u, Password: journeyPassword, FirstName: u, LastName: "Test",
			Email: u + "@example.org", EmailVerified: true}
	}
	f := filepath.Join(t.TempDir(), "users.json")
	b, _ := json.Marshal(byID)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	us, err := storage.StoreFromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	storage.RegisterClients(storage.WebClient("strata-pages", "pages-secret", redirect))
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, storage.NewStorage(us), slog.New(slog.DiscardHandler), false), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return issuer
}

// journeyConfig writes a portal configuration that serves every bed as a
// cluster of its own (named after the bed), with alice a member of the
// bed's account (project main of tenant lab, 4 GPUs by the policy's line
// 52), bob of another tenant, and the beds' Slurm admin (root) the
// clusters' operator. The pages sign in through journeyProvider's code
// flow. It returns the file and the portal's address.
func journeyConfig(t *testing.T, beds []*testbed.Bed, alice, bob, operator string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("templates/finetune.yaml", journeyTemplate)
	issuer := journeyProvider(t, "http://"+addr+"/signin/callback", alice, bob, operator)
	secret := write("pages-secret", "pages-secret")
	cfg := `apiVersion: strata/v1
kind: PortalConfig
listen: ` + addr + `
database: ` + filepath.Join(dir, "portal.db") + `
templates_dir: ` + filepath.Join(dir, "templates") + `
sessions:
  origin: https://sessions.portal.test
auth:
  oidc:
    issuer: ` + issuer + `
    audience: strata-pages
    user_claim: preferred_username
pages:
  public_url: http://` + addr + `
  oidc:
    client_id: strata-pages
    client_secret_file: ` + secret + `
clusters:
`
	for _, b := range beds {
		tenants := write(b.Name+"-tenants.json", fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": %q, "admins": [%q],
  "tenants": [
    {"name": "lab", "account": "lab", "admins": [], "projects": [
      {"name": "main", "account": %q, "classes": [], "members": [{"user": %q, "role": "member", "default": true}]}]},
    {"name": "other", "account": "other", "admins": [], "projects": [
      {"name": "x", "account": "other-x", "classes": [], "members": [{"user": %q, "role": "member"}]}]}]}`,
			b.Cluster, operator, b.Account, alice, bob))
		policy := write(b.Name+"-policy.json", fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "JobPolicy", "source": "policy.yaml",
  "cluster": %q, "default_class": "batch", "classes_line": 10,
  "classes": {"batch": {"partition": %q, "default_time": 10, "max_time": 120, "requeue": true, "whole_nodes": false,
    "switches": 0, "max_gpus_per_job": 0, "line": 20, "max_time_line": 22, "max_gpus_line": 20, "whole_nodes_line": 20}},
  "partitions": {%q: "batch"},
  "accounts": {%q: {"tenant": "lab", "project": "main", "line": 50, "classes": ["batch"], "classes_line": 51,
    "gpus": {"limit": 4, "owner": "account %s", "line": 52}, "gpus_by_type": {}, "members": [%q], "viewers": {}}},
  "users": {%q: %q}}`, b.Cluster, b.Partition, b.Partition, b.Account, b.Account, alice, alice, b.Account))
		cfg += `  - name: ` + b.Name + `
    slurm_cluster: ` + b.Cluster + `
    slurmrestd_url: ` + b.URL + `
    poll_user: ` + b.AdminUser + `
    jwt_key_file: ` + b.JWTKey + `
    tenants_file: ` + tenants + `
    job_policy_file: ` + policy + `
    work_dir: ` + b.JobDir + `
    scontrol: ` + b.Scontrol + `
    poll_interval: 2s
    stale_after: 30s
`
	}
	return write("portal-api.yaml", cfg), addr
}

// serveJourney runs serve with cfg until the test ends and returns its
// base URL once it answers.
func serveJourney(t *testing.T, cfg, addr string) string {
	t.Helper()
	parseMu.Lock() // until serve answers
	defer parseMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = run(ctx, []string{"strata-portal-api", "--config", cfg, "serve"}, io.Discard, io.Discard)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
			if serveErr != nil && ctx.Err() != nil {
				t.Errorf("serve: %v", serveErr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop")
		}
	})
	base := "http://" + addr
	for range 200 {
		select {
		case <-stopped:
			t.Fatalf("serve stopped: %v", serveErr)
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

// TestJourneyOnTheBeds: one portal, started by serve, serves both Slurm
// releases' beds as two clusters to a real browser. alice signs in with a
// one-time link, sees her pending jobs with their reasons (as the API
// gives them) and places, picks her project on each cluster and is told in
// English and in Korean that 6 GPUs would be refused (the policy's line
// and the 4 GPUs it allows), submits the fine-tuning template and sees it
// running with its 2 GPUs. bob signs in and no page he opens holds
// alice's job ids, job names, name or page session. The operator's screen
// shows what GET /v1/overview returns, and a node is drained and resumed
// from it, as scontrol on the bed shows.
func TestJourneyOnTheBeds(t *testing.T) {
	beds := testbed.All(t)
	for _, b := range beds {
		b.LockExclusive(t)
		b.DumpLogsOnFailure(t)
	}
	alice, bob, operator := beds[0].Users[0], beds[0].Users[1], beds[0].AdminUser
	cfg, addr := journeyConfig(t, beds, alice, bob, operator)
	base := serveJourney(t, cfg, addr)
	en, ko := i18n.For("en", ""), i18n.For("ko", "")

	// Every job alice has on a bed is cancelled when the test ends.
	var aliceJobs []struct {
		b  *testbed.Bed
		id int64
	}
	t.Cleanup(func() {
		for _, j := range aliceJobs {
			if err := j.b.Client(t).Cancel(context.Background(), j.id); err != nil {
				t.Logf("cancel %s job %d: %v", j.b.Name, j.id, err)
			}
		}
	})
	keep := func(b *testbed.Bed, id int64) {
		aliceJobs = append(aliceJobs, struct {
			b  *testbed.Bed
			id int64
		}{b, id})
	}

	token := func(user string) string {
		t.Helper()
		out, stderr, err := runCLI(t, "--config", cfg, "token", "create", "--user", user, "--expires", "1h")
		if err != nil {
			t.Fatalf("token create --user %s: %v\n%s", user, err, stderr)
		}
		tok := regexp.MustCompile(store.TokenPrefix + `[A-Za-z0-9_-]+`).FindString(out)
		if tok == "" {
			t.Fatalf("token create printed no token: %q", out)
		}
		return tok
	}
	apiGet := func(tok, path string, into any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	signIn := func(user string) context.Context {
		t.Helper()
		ctx := browsertest.Tab(t)
		out, stderr, err := runCLI(t, "--config", cfg, "login-link", "--user", user)
		if err != nil {
			t.Fatalf("login-link --user %s: %v\n%s", user, err, stderr)
		}
		u, err := url.Parse(strings.TrimSpace(out))
		if err != nil || u.Query().Get("t") == "" {
			t.Fatalf("login-link printed %q", out)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/signin/link?t="+url.QueryEscape(u.Query().Get("t"))),
			chromedp.Click(chromedp.CSS("form[action='/signin/link'] button")), chromedp.WaitVisible(chromedp.CSS(".who"))); err != nil {
			t.Fatalf("%s signs in: %v", user, err)
		}
		return ctx
	}
	// signInOIDC signs user in through the provider's code flow, as a
	// person would: the portal's button, the provider's login form, and
	// back.
	signInOIDC := func(user string) context.Context {
		t.Helper()
		ctx := browsertest.Tab(t)
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := chromedp.Do(tctx, chromedp.Navigate(base+"/signin"), chromedp.Click(chromedp.CSS(`a[href^="/signin/oidc"]`)),
			chromedp.WaitVisible(chromedp.CSS("#username")), chromedp.SetValue(chromedp.CSS("#username"), user),
			chromedp.SetValue(chromedp.CSS("#password"), journeyPassword), chromedp.Click(chromedp.CSS(`form[action="/login/username"] button`)),
			chromedp.WaitVisible(chromedp.CSS(".who"))); err != nil {
			where, _ := chromedp.Run(ctx, chromedp.Location())
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 300) : ""`))
			t.Fatalf("%s signs in through the provider: %v (at %s: %q)", user, err, where, text)
		}
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil || !strings.HasPrefix(loc, base+"/") {
			t.Fatalf("%s after the code flow is at %q (%v)", user, loc, err)
		}
		return ctx
	}
	do := func(ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := chromedp.Do(tctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(ctx context.Context, js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	html := func(ctx context.Context) string { return eval(ctx, `document.documentElement.outerHTML`) }
	// row is the text of the cells of a job's row in the jobs list,
	// reloaded until ok holds for it or a minute passes.
	type jobRow struct{ State, GPUs, Why string }
	row := func(ctx context.Context, cluster string, id int64, what string, ok func(jobRow) bool) jobRow {
		t.Helper()
		var r jobRow
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
			do(ctx, "the jobs list", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("main")))
			s := eval(ctx, fmt.Sprintf(`(() => { const a = document.querySelector('a[href="/jobs/%s/%d"]'); if (!a) return "";
  const tr = a.closest("tr"); return JSON.stringify({State: tr.querySelector("td.state").textContent.trim(),
  GPUs: tr.querySelectorAll("td.num")[0].textContent.trim(), Why: tr.lastElementChild.textContent.trim()}); })()`, cluster, id))
			if s != "" {
				r = jobRow{}
				if err := json.Unmarshal([]byte(s), &r); err != nil {
					t.Fatal(err)
				}
				if ok(r) {
					return r
				}
			}
		}
		t.Fatalf("%s job %d on the jobs page: not %s (last %+v)", cluster, id, what, r)
		return r
	}

	// alice signs in through the provider, in English (the browser's
	// language).
	aliceTab := signInOIDC(alice)
	if h := html(aliceTab); !strings.Contains(h, alice) {
		t.Fatalf("alice's first page after the code flow does not name her")
	}
	aliceToken := token(alice)

	// A pending job on each cluster: its reason in words, as the API
	// gives it, and its place in the queue.
	var names []string
	position := regexp.MustCompile(strings.Replace(regexp.QuoteMeta(en.T("jobs.position", 999)), "999", `\d+`, 1))
	for _, b := range beds {
		name := testbed.Unique("journey-wait")
		names = append(names, name)
		id := b.Sbatch(t, alice, "-J", name, "--begin=now+1hour", "--gres=gpu:1", "--wrap", "true")
		keep(b, id)
		r := row(aliceTab, b.Name, id, "pending with its place", func(r jobRow) bool { return r.State == "PENDING" && position.MatchString(r.Why) })
		type reason struct {
			Slurm   string  `json:"slurm"`
			Text    *string `json:"text"`
			Meaning *string `json:"meaning"`
		}
		// The list says the reason as GET /v1/jobs does (Slurm's code in
		// words); the job's page as GET /v1/jobs/{cluster}/{id} does (the
		// case explained, with the begin time).
		var list struct {
			Jobs []struct {
				ID     int64  `json:"id"`
				Reason reason `json:"reason"`
			} `json:"jobs"`
		}
		apiGet(aliceToken, "/v1/jobs?cluster="+b.Name, &list)
		listed := false
		for _, lj := range list.Jobs {
			if lj.ID == id {
				listed = true
				if lj.Reason.Meaning == nil || !strings.Contains(r.Why, *lj.Reason.Meaning) {
					t.Errorf("%s: the pending job's reason in the list %q; GET /v1/jobs: %+v", b.Name, r.Why, lj.Reason)
				}
			}
		}
		if !listed {
			t.Errorf("%s: GET /v1/jobs does not list job %d", b.Name, id)
		}
		var j struct {
			Reason reason `json:"reason"`
		}
		apiGet(aliceToken, fmt.Sprintf("/v1/jobs/%s/%d", b.Name, id), &j)
		if j.Reason.Text == nil || *j.Reason.Text == "" {
			t.Errorf("%s: GET /v1/jobs/%d gives no reason text: %+v", b.Name, id, j.Reason)
		} else {
			do(aliceTab, "the pending job's page", chromedp.Navigate(fmt.Sprintf("%s/jobs/%s/%d", base, b.Name, id)), chromedp.WaitVisible(chromedp.CSS("main")))
			if page := eval(aliceTab, `document.querySelector("main").textContent`); !strings.Contains(page, *j.Reason.Text) {
				t.Errorf("%s: the pending job's page does not say %q", b.Name, *j.Reason.Text)
			}
		}
		t.Logf("%s: pending job %d: %s", b.Name, id, r.Why)
	}

	// She picks her project on each cluster and asks for 6 GPUs: the check
	// tells her the policy would refuse them, and why, in English, then in
	// Korean.
	check := func(l i18n.L, b *testbed.Bed) {
		t.Helper()
		do(aliceTab, "the over-limit check on "+b.Name, chromedp.Navigate(base+"/submit/finetune"), chromedp.WaitVisible(chromedp.CSS("#p-gpus")),
			chromedp.SetValue(chromedp.CSS("#project"), b.Name+"/"+b.Account), chromedp.SetValue(chromedp.CSS("#p-gpus"), "6"),
			chromedp.Click(chromedp.CSS(`button[value="check"]`)), chromedp.WaitVisible(chromedp.CSS("#verdict")))
		verdict := eval(aliceTab, `document.querySelector(".verdict").textContent`)
		for _, want := range []string{l.T("submit.check.refused"), "policy.yaml:52",
			l.T("refusal.gpus", l.T("reason.kind.account")+" "+b.Account, "4", "6")} {
			if !strings.Contains(verdict, want) {
				t.Errorf("%s: the verdict %q does not say %q", b.Name, verdict, want)
			}
		}
	}
	check(en, beds[0])
	do(aliceTab, "Korean", chromedp.SetValue(chromedp.CSS("#pref-lang"), "ko"), chromedp.Click(chromedp.CSS(".prefs button")),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="ko"]`)))
	for _, b := range beds {
		check(ko, b)
	}

	// She submits it with 2 GPUs on each cluster and sees it running with
	// them, as Slurm runs it.
	var submitted []int64
	for _, b := range beds {
		do(aliceTab, "submit on "+b.Name, chromedp.Navigate(base+"/submit/finetune"), chromedp.WaitVisible(chromedp.CSS("#p-gpus")),
			chromedp.SetValue(chromedp.CSS("#project"), b.Name+"/"+b.Account), chromedp.SetValue(chromedp.CSS("#p-gpus"), "2"),
			chromedp.Click(chromedp.CSS(`button[value="submit"]`)), chromedp.WaitVisible(chromedp.CSS(".notice a")))
		href := eval(aliceTab, `document.querySelector(".notice a").getAttribute("href")`)
		id, err := strconv.ParseInt(strings.TrimPrefix(href, "/jobs/"+b.Name+"/"), 10, 64)
		if err != nil {
			t.Fatalf("%s: the submission links to %q", b.Name, href)
		}
		keep(b, id)
		submitted = append(submitted, id)
		j := testbed.WaitJob(t, b.Client(t), id, time.Minute, "running", slurmrest.Job.Running)
		if j.User != alice || j.Account != b.Account {
			t.Errorf("%s job %d in Slurm: user %s, account %s", b.Name, id, j.User, j.Account)
		}
		r := row(aliceTab, b.Name, id, "running with 2 GPUs", func(r jobRow) bool { return r.State == "RUNNING" && r.GPUs == "2" })
		t.Logf("%s: job %d %+v", b.Name, id, r)
	}

	// bob signs in: no page holds alice's job ids, job names, name or page
	// session.
	cookies, err := chromedp.Call(aliceTab, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	var aliceSession string
	for _, c := range cookies.Cookies {
		if c.Name == web.SessionCookie {
			aliceSession = c.Value
		}
	}
	if aliceSession == "" {
		t.Fatalf("alice's browser holds no %s cookie: %+v", web.SessionCookie, cookies.Cookies)
	}
	bobTab := signInOIDC(bob)
	foreign := []*regexp.Regexp{regexp.MustCompile(`\b` + regexp.QuoteMeta(alice) + `\b`), regexp.MustCompile(regexp.QuoteMeta(aliceSession))}
	for _, n := range names {
		foreign = append(foreign, regexp.MustCompile(regexp.QuoteMeta(n)))
	}
	pages := []string{"/", "/jobs", "/jobs/finished", "/submit", "/submit/finetune", "/sessions", "/deployments", "/operator"}
	for _, j := range aliceJobs {
		// The beds' job ids are small numbers: look for them as the pages
		// write a job (a link, "cluster id"), not as any number.
		id := strconv.FormatInt(j.id, 10)
		foreign = append(foreign, regexp.MustCompile(`(/jobs/`+j.b.Name+`/`+id+`|`+j.b.Name+`\s+`+id+`)([^0-9]|$)`))
		pages = append(pages, fmt.Sprintf("/jobs/%s/%d", j.b.Name, j.id))
	}
	for _, p := range pages {
		do(bobTab, "bob opens "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("main")))
		h := html(bobTab)
		if !strings.Contains(h, bob) && !strings.Contains(p, "/jobs/s") {
			t.Errorf("bob's %s does not name him: the check below proves nothing", p)
		}
		for _, re := range foreign {
			if loc := re.FindStringIndex(h); loc != nil {
				t.Errorf("bob's %s holds %q of alice's: …%s…", p, re.String(), h[max(0, loc[0]-80):min(len(h), loc[1]+80)])
			}
		}
	}

	// The operator's screen shows what GET /v1/overview returns: read the
	// API, the page and the API again until both reads agree (a poll may
	// fall between them).
	// The operator signs in with a one-time link (login-link).
	opTab := signIn(operator)
	opToken := token(operator)
	type counts map[string]string
	fromAPI := func() map[string]counts {
		var ov struct {
			Clusters []struct {
				Cluster       string `json:"cluster"`
				GpusTotal     *int   `json:"gpus_total"`
				GpusAllocated int    `json:"gpus_allocated"`
				Running       int    `json:"running"`
				Pending       int    `json:"pending"`
			} `json:"clusters"`
		}
		apiGet(opToken, "/v1/overview", &ov)
		out := map[string]counts{}
		for _, c := range ov.Clusters {
			out[c.Cluster] = counts{"gpus_allocated": strconv.Itoa(c.GpusAllocated), "running": strconv.Itoa(c.Running), "pending": strconv.Itoa(c.Pending)}
			if c.GpusTotal != nil {
				out[c.Cluster]["gpus_total"] = strconv.Itoa(*c.GpusTotal)
			}
		}
		return out
	}
	fromPage := func() map[string]counts {
		do(opTab, "the operator's screen", chromedp.Navigate(base+"/operator"), chromedp.WaitVisible(chromedp.CSS("main")))
		s := eval(opTab, `JSON.stringify(Object.fromEntries([...document.querySelectorAll("section[data-cluster]")].map(s =>
  [s.dataset.cluster, Object.fromEntries([...s.querySelectorAll(":scope > dl dd[data-n]")].map(d => [d.dataset.n, d.textContent.trim()]))])))`)
		out := map[string]counts{}
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	agreed := false
	for try := 0; try < 10 && !agreed; try++ {
		before, page, after := fromAPI(), fromPage(), fromAPI()
		if fmt.Sprint(before) != fmt.Sprint(after) {
			continue
		}
		agreed = true
		for _, b := range beds {
			want, got := before[b.Name], page[b.Name]
			if len(want) < 4 {
				t.Errorf("GET /v1/overview has %v for %s", want, b.Name)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("the operator's screen, %s %s: %q; GET /v1/overview: %q", b.Name, k, got[k], v)
				}
			}
		}
		t.Logf("the operator's screen and GET /v1/overview: %v", page)
	}
	if !agreed {
		t.Errorf("GET /v1/overview changed between every two reads")
	}

	// From it, the operator drains a node of each cluster and resumes it.
	for _, b := range beds {
		node := b.Nodes[len(b.Nodes)-1]
		reason := testbed.Unique("journey")
		scontrol := func() string {
			out, err := exec.Command(b.Scontrol, "show", "node", node).CombinedOutput()
			if err != nil {
				t.Fatalf("scontrol show node %s: %v: %s", node, err, out)
			}
			return string(out)
		}
		t.Cleanup(func() {
			if strings.Contains(scontrol(), reason) {
				tok, _ := os.ReadFile(b.TokenFile)
				cmd := exec.Command(b.Scontrol, "update", "nodename="+node, "state=resume")
				cmd.Env = []string{"SLURM_JWT=" + strings.TrimSpace(string(tok))}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("resume %s %s: %v: %s", b.Name, node, err, out)
				}
			}
		})
		nodes := base + "/operator/nodes/" + b.Name
		do(opTab, "the operator opens the nodes of "+b.Name, chromedp.Navigate(base+"/operator"), chromedp.Click(chromedp.CSS(`a[href="/operator/nodes/`+b.Name+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`a[href="/operator/nodes/`+b.Name+`/`+node+`/confirm/drain"]`)))
		if loc := eval(opTab, `location.href`); loc != nodes {
			t.Errorf("the link leads to %s, want %s", loc, nodes)
		}
		do(opTab, "drain "+node, chromedp.Click(chromedp.CSS(`a[href="/operator/nodes/`+b.Name+`/`+node+`/confirm/drain"]`)),
			chromedp.WaitVisible(chromedp.CSS("#reason")), chromedp.SetValue(chromedp.CSS("#reason"), reason), chromedp.Click(chromedp.CSS("button.danger")),
			chromedp.WaitVisible(chromedp.CSS("main")))
		for end := time.Now().Add(30 * time.Second); !strings.Contains(scontrol(), "strata: "+reason); time.Sleep(250 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s %s after the drain: %s", b.Name, node, scontrol())
			}
		}
		if s := scontrol(); !strings.Contains(s, "DRAIN") {
			t.Errorf("%s %s after the drain: %s", b.Name, node, s)
		}
		// The page reads the portal's snapshot: the next poll shows the
		// drain, and offers a resume.
		resume := `a[href="/operator/nodes/` + b.Name + `/` + node + `/confirm/resume"]`
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			do(opTab, "the nodes of "+b.Name, chromedp.Navigate(nodes), chromedp.WaitVisible(chromedp.CSS("main")))
			if eval(opTab, `document.querySelector('`+resume+`') ? "yes" : ""`) != "" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the nodes of %s offer no resume of %s after its drain", b.Name, node)
			}
		}
		do(opTab, "resume "+node, chromedp.Click(chromedp.CSS(resume)),
			chromedp.WaitVisible(chromedp.CSS("#reason")), chromedp.SetValue(chromedp.CSS("#reason"), "back "+reason), chromedp.Click(chromedp.CSS("button.danger")),
			chromedp.WaitVisible(chromedp.CSS("main")))
		for end := time.Now().Add(30 * time.Second); strings.Contains(scontrol(), "DRAIN"); time.Sleep(250 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s %s after the resume: %s", b.Name, node, scontrol())
			}
		}
	}

	// alice's submitted jobs still run: nothing above touched them.
	for i, b := range beds {
		if j, err := b.Client(t).Job(testbed.Context(t), submitted[i]); err != nil || !j.Running() {
			t.Errorf("%s job %d at the end: %+v, %v", b.Name, submitted[i], j.State, err)
		}
	}
}
