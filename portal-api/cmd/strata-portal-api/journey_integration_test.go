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
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/internal/bridgetest"
	"github.com/strata-hpc/strata/internal/browsertest"
	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/session/sessiontest"
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
// flow; sessions are on their own host (localhost, the pages on
// 127.0.0.1), and a bed named in bridges has that strata-bridge. It
// returns the file and the portal's address.
func journeyConfig(t *testing.T, beds []*testbed.Bed, alice, bob, operator string, bridges map[string]journeyBridge) (string, string) {
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
	// The product's session templates, as packaged.
	for _, name := range []string{"terminal.yaml", "jupyterlab.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../../etc/strata/templates", name))
		if err != nil {
			t.Fatal(err)
		}
		write("templates/"+name, string(data))
	}
	// Sessions on a host of their own: localhost, where the pages are on
	// 127.0.0.1. Both are loopback, and a browser keeps cookies per host,
	// so neither origin's cookie reaches the other.
	_, port, _ := net.SplitHostPort(addr)
	issuer := journeyProvider(t, "http://"+addr+"/signin/callback", alice, bob, operator)
	secret := write("pages-secret", "pages-secret")
	cfg := `apiVersion: strata/v1
kind: PortalConfig
listen: ` + addr + `
database: ` + filepath.Join(dir, "portal.db") + `
templates_dir: ` + filepath.Join(dir, "templates") + `
sessions:
  origin: http://localhost:` + port + `
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
    "switches": 0, "max_gpus_per_job": 0, "line": 20, "max_time_line": 22, "max_gpus_line": 20, "whole_nodes_line": 20},
    "interactive": {"partition": %q, "default_time": 120, "max_time": 720, "requeue": false, "whole_nodes": false,
    "switches": 0, "max_gpus_per_job": 2, "line": 30, "max_time_line": 32, "max_gpus_line": 33, "whole_nodes_line": 30}},
  "partitions": {%q: "batch"},
  "accounts": {%q: {"tenant": "lab", "project": "main", "line": 50, "classes": ["batch", "interactive"], "classes_line": 51,
    "gpus": {"limit": 4, "owner": "account %s", "line": 52}, "gpus_by_type": {}, "members": [%q], "viewers": {}}},
  "users": {%q: %q}}`, b.Cluster, b.Partition, b.Partition, b.Partition, b.Account, b.Account, alice, alice, b.Account))
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
		if b.Sessions {
			cfg += `    session_root: ` + sessionRoot(t, b, alice, bob) + "\n"
		}
		if br, ok := bridges[b.Name]; ok {
			cfg += `    bridge_url: ` + br.URL + "\n" + `    bridge_token_file: ` + br.TokenFile + "\n"
		}
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
// releases' beds as two clusters to a real browser. alice signs in
// through a real OpenID provider's code flow, sees her pending jobs with
// their reasons (as the API gives them) and places, picks her project on
// each cluster and is told in English and in Korean that 6 GPUs would be refused (the policy's line
// and the 4 GPUs it allows), submits the fine-tuning template and sees it
// running with its 2 GPUs. On a bed with the session servers she starts
// a terminal and JupyterLab from the sessions page and opens each in a
// new tab on the sessions' origin: the terminal shows her session's job
// id for echo $SLURM_JOB_ID, JupyterLab its file browser. With the Kubernetes
// bed she serves a finished job's model from its page (checked first),
// and the Deployment rolls out in her tenant's namespace. bob signs in
// and no page he opens holds alice's job ids, job names, session ids,
// deployment, name or page session. The operator's screen
// shows what GET /v1/overview returns, and a node is drained and resumed
// from it, as scontrol on the bed shows.
func TestJourneyOnTheBeds(t *testing.T) {
	beds := testbed.All(t)
	for _, b := range beds {
		b.LockExclusive(t)
		b.DumpLogsOnFailure(t)
	}
	alice, bob, operator := beds[0].Users[0], beds[0].Users[1], beds[0].AdminUser
	// The Kubernetes bed, where one is given: a strata-bridge for the
	// first cluster, serving tenant lab in a namespace of the test's.
	var kube *journeyKube
	if os.Getenv(kubetest.EnvVar) != "" || os.Getenv(kubetest.KubeconfigVar) != "" {
		kube = newJourneyKube(t, beds[0])
	} else if os.Getenv("CI") == "true" {
		t.Errorf("no Kubernetes test bed (%s): serving a model is not tried", kubetest.EnvVar)
	} else {
		t.Logf("no Kubernetes test bed (%s): serving a model is not tried", kubetest.EnvVar)
	}
	bridges := map[string]journeyBridge{}
	if kube != nil {
		bridges[kube.bed.Name] = kube.bridge
	}
	cfg, addr := journeyConfig(t, beds, alice, bob, operator, bridges)
	// The beds' node names resolve inside their roots only: the portal
	// reaches a session's server at the bed's node address, as the
	// service's session tests do.
	for _, b := range beds {
		if b.Sessions {
			sessionTransport = &http.Transport{DialContext: sessiontest.NodeDialer(b)}
			t.Cleanup(func() { sessionTransport = nil })
			break
		}
	}
	base := serveJourney(t, cfg, addr)
	_, port, _ := net.SplitHostPort(addr)
	sessionsOrigin := "http://localhost:" + port
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

	// Sessions, on a bed with the session servers: alice starts a
	// terminal and JupyterLab from the sessions page and opens each in a
	// new tab, on the session origin.
	var sessionIDs []string
	if sb := sessionsBed(beds); sb == nil {
		t.Errorf("no bed has the session servers (testbed.sh up --sessions): the sessions are not tried")
	} else {
		type sessionView struct {
			ID        string  `json:"id"`
			JobID     *int64  `json:"job_id"`
			Template  string  `json:"template"`
			Cluster   string  `json:"cluster"`
			State     string  `json:"state"`
			Ready     bool    `json:"ready"`
			URL       string  `json:"url"`
			EndReason *string `json:"end_reason"`
		}
		// start starts a session of tmpl from its form, as alice, and
		// returns it as the API shows it.
		start := func(tmpl string) sessionView {
			t.Helper()
			var before struct{ Sessions []sessionView }
			apiGet(aliceToken, "/v1/sessions", &before)
			do(aliceTab, "the sessions page", chromedp.Navigate(base+"/sessions"), chromedp.WaitVisible(chromedp.CSS(`a[href="/sessions/`+tmpl+`/start"]`)))
			clickAndLoad(t, aliceTab, `a[href="/sessions/`+tmpl+`/start"]`)
			do(aliceTab, "the "+tmpl+" form", chromedp.WaitVisible(chromedp.CSS("#p-hours")), chromedp.SetValue(chromedp.CSS("#project"), sb.Name+"/"+sb.Account),
				chromedp.SetValue(chromedp.CSS("#p-gpus"), "1"), chromedp.SetValue(chromedp.CSS("#p-hours"), "1"))
			clickAndLoad(t, aliceTab, `button[value="start"]`)
			if loc := eval(aliceTab, `location.pathname + location.search`); loc != "/sessions?done=start" {
				t.Fatalf("starting a %s led to %s: %q", tmpl, loc, eval(aliceTab, `document.querySelector("main").innerText.slice(0, 400)`))
			}
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
				var now struct{ Sessions []sessionView }
				apiGet(aliceToken, "/v1/sessions", &now)
				for _, v := range now.Sessions {
					if v.Template != tmpl || v.Cluster != sb.Name || v.JobID == nil || slices.ContainsFunc(before.Sessions, func(o sessionView) bool { return o.ID == v.ID }) {
						continue
					}
					keep(sb, *v.JobID)
					sessionIDs = append(sessionIDs, v.ID)
					return v
				}
			}
			t.Fatalf("the %s alice started is not in GET /v1/sessions", tmpl)
			return sessionView{}
		}
		// open waits until the session is ready, presses its card's Open
		// (a link to a new tab) and returns that tab once it shows the
		// session's server through the proxy on the session origin.
		open := func(v sessionView) context.Context {
			t.Helper()
			for end := time.Now().Add(4 * time.Minute); !v.Ready; time.Sleep(time.Second) {
				apiGet(aliceToken, "/v1/sessions/"+v.ID, &v)
				if v.EndReason != nil {
					t.Fatalf("session %s (%s) ended: %s", v.ID, v.Template, *v.EndReason)
				}
				if time.Now().After(end) {
					t.Fatalf("session %s (%s) not ready after 4 minutes: %+v", v.ID, v.Template, v)
				}
			}
			if want := sessionsOrigin + "/v1/sessions/" + v.ID + "/proxy/"; v.URL != want {
				t.Errorf("session %s: url %q, want %q", v.ID, v.URL, want)
			}
			link := `a[href="/sessions/` + v.ID + `/open"]`
			for end := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
				do(aliceTab, "the sessions page", chromedp.Navigate(base+"/sessions"), chromedp.WaitVisible(chromedp.CSS("main")))
				if eval(aliceTab, `document.querySelector('`+link+`') ? "yes" : ""`) != "" {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("the sessions page offers no Open for %s (%s)", v.ID, v.Template)
				}
			}
			if target := eval(aliceTab, `document.querySelector('`+link+`').target`); target != "_blank" {
				t.Errorf("Open of %s opens in %q, not a new tab", v.ID, target)
			}
			tab := newTab(t, aliceTab, func() { do(aliceTab, "Open "+v.Template, chromedp.Click(chromedp.CSS(link))) })
			want := sessionsOrigin + "/v1/sessions/" + v.ID + "/proxy/"
			for end := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				loc, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.readyState === "complete" ? location.href : ""`))
				if err == nil && strings.HasPrefix(loc, want) {
					t.Logf("%s opens at %s", v.Template, loc)
					break
				}
				if time.Now().After(end) {
					t.Fatalf("the new tab of %s is at %q (%v), want %s…", v.Template, loc, err, want)
				}
			}
			return tab
		}

		// The terminal: ttyd's page, its xterm.js terminal (window.term),
		// typed into as a person types.
		term := start("terminal")
		termTab := open(term)
		screen := `(() => { const b = window.term.buffer.active, out = [];
  for (let i = 0; i < b.length; i++) { const l = b.getLine(i); if (l) out.push(l.translateToString(true)); } return out.join("\n"); })()`
		for end := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
			// The shell's prompt: ttyd has connected its WebSocket.
			s, err := chromedp.Run(termTab, chromedp.Evaluate[string](`window.term ? `+screen+` : ""`))
			if err == nil && strings.TrimSpace(s) != "" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the terminal shows nothing after a minute (%v): %s", err, tabState(t, termTab, "terminal"))
			}
		}
		// The command goes in as text input (as an input method gives
		// it) and Enter as a key, each once: chromedp's key events
		// (keyDown, then char) reach ttyd's terminal twice each.
		do(termTab, "focus the terminal", chromedp.Evaluate[chromedp.Void](`window.term.focus()`))
		if _, err := chromedp.Call(termTab, input.InsertText, input.InsertTextParams{Text: "echo $SLURM_JOB_ID"}); err != nil {
			t.Fatal(err)
		}
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := chromedp.Call(termTab, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Key: "Enter", Code: "Enter",
				WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}); err != nil {
				t.Fatal(err)
			}
		}
		echoed := regexp.MustCompile(`(?m)^\s*` + strconv.FormatInt(*term.JobID, 10) + `\s*$`)
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			s := eval(termTab, screen)
			if echoed.MatchString(s) {
				t.Logf("the terminal of job %d:\n%s", *term.JobID, strings.TrimSpace(s))
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the terminal does not show job %d's id after echo $SLURM_JOB_ID:\n%s\n%s", *term.JobID, s, tabState(t, termTab, "terminal"))
			}
		}

		// JupyterLab: its own pages, through the proxy, render the lab's
		// shell, and its file browser lists the job's folder (the
		// server's contents API, through the proxy with the session's
		// cookie). What the main area shows is alice's saved workspace.
		lab := start("jupyterlab")
		labTab := open(lab)
		for end := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
			s, err := chromedp.Run(labTab, chromedp.Evaluate[string](`document.querySelector(".jp-LabShell") && document.title.endsWith("JupyterLab") &&
  document.querySelector(".jp-DirListing-item") ? location.pathname : ""`))
			if err == nil && strings.HasPrefix(s, "/v1/sessions/"+lab.ID+"/proxy/lab") {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("JupyterLab's shell and file browser are not shown after 3 minutes (at %q, %v): %s", s, err, tabState(t, labTab, "jupyterlab"))
			}
		}

		// Neither origin's cookie reaches the other.
		for _, c := range []struct{ url, foreign string }{{sessionsOrigin + "/", web.SessionCookie}, {base + "/", "strata_session"}} {
			got, err := chromedp.Call(aliceTab, network.GetCookies, network.GetCookiesParams{URLs: []string{c.url}})
			if err != nil {
				t.Fatal(err)
			}
			for _, ck := range got.Cookies {
				if ck.Name == c.foreign {
					t.Errorf("alice's browser sends %s the cookie %s", c.url, ck.Name)
				}
			}
		}
	}

	// A finished job's model, served on the Kubernetes bed from the job's
	// page: a check first (the bridge's dry run, which makes nothing),
	// then the deploy, and the Deployment rolls out on kwok's GPU nodes
	// in her tenant's namespace.
	var served []string
	if kube != nil {
		b := kube.bed
		name := testbed.Unique("journey-model-")
		workdir := path.Join(kube.shared, name)
		if err := os.MkdirAll(b.HostPath(workdir), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(b.HostPath(workdir), 0o777); err != nil {
			t.Fatal(err)
		}
		res, err := b.Client(t).Submit(testbed.Context(t), alice, slurmrest.JobSpec{Name: name, Script: "#!/bin/bash\nset -e\nprintf 'weights\\n' > model.bin\n",
			Account: b.Account, Partition: b.Partition, WorkDir: workdir, StdOut: workdir + "/job.out", TimeLimit: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		job := res.JobID
		keep(b, job)
		names = append(names, name)
		served = append(served, name)
		testbed.WaitJob(t, b.Client(t), job, 2*time.Minute, "completed", func(j slurmrest.Job) bool { return j.State.Has("COMPLETED") })
		jobPage := fmt.Sprintf("%s/jobs/%s/%d", base, b.Name, job)
		link := fmt.Sprintf(`a[href="/jobs/%s/%d/serve"]`, b.Name, job)
		for end := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			do(aliceTab, "the finished job's page", chromedp.Navigate(jobPage), chromedp.WaitVisible(chromedp.CSS("main")))
			if eval(aliceTab, `document.querySelector('`+link+`') ? "yes" : ""`) != "" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the page of job %d does not offer to serve its model: %q", job, eval(aliceTab, `document.querySelector("main").innerText`))
			}
		}
		clickAndLoad(t, aliceTab, link)
		do(aliceTab, "name the deployment", chromedp.WaitVisible(chromedp.CSS("#serve-name")), chromedp.SetValue(chromedp.CSS("#serve-name"), name))
		clickAndLoad(t, aliceTab, `button[value="check"]`)
		plan := eval(aliceTab, `(document.querySelector("#serve-plan") || document.querySelector("main")).innerText`)
		for _, want := range []string{kube.namespace, "Deployment/" + name, fmt.Sprintf("job-%d", job)} {
			if !strings.Contains(plan, want) {
				t.Errorf("the check of serving job %d does not show %q: %q", job, want, plan)
			}
		}
		deployments := appsv1client.NewForConfigOrDie(kube.rc).Deployments(kube.namespace)
		if _, err := deployments.Get(testbed.Context(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after the check, Deployment %s/%s: %v; want none", kube.namespace, name, err)
		}
		clickAndLoad(t, aliceTab, `button[value="deploy"]`)
		want := fmt.Sprintf("%s/deployments/%s/%s?done=deploy", base, b.Name, name)
		if loc := eval(aliceTab, `location.href`); loc != want {
			t.Fatalf("the deploy led to %s, want %s: %q", loc, want, eval(aliceTab, `document.querySelector("main").innerText`))
		}
		page := eval(aliceTab, `document.querySelector("main").innerText`)
		for _, w := range []string{name, kube.namespace, "ready", fmt.Sprintf("job-%d", job)} {
			if !strings.Contains(page, w) {
				t.Errorf("the deployment's page does not show %q: %q", w, page)
			}
		}
		d, err := deployments.Get(testbed.Context(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("no Deployment %s/%s after the deploy from the page: %v", kube.namespace, name, err)
		}
		if d.Status.ReadyReplicas < 1 {
			t.Errorf("Deployment %s/%s: %d replicas ready", kube.namespace, name, d.Status.ReadyReplicas)
		}
		t.Logf("job %d's model served as Deployment %s/%s, %d replicas ready", job, kube.namespace, name, d.Status.ReadyReplicas)
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
	for _, n := range append(names, sessionIDs...) {
		foreign = append(foreign, regexp.MustCompile(regexp.QuoteMeta(n)))
	}
	pages := []string{"/", "/jobs", "/jobs/finished", "/submit", "/submit/finetune", "/sessions", "/deployments", "/operator"}
	if kube != nil {
		for _, n := range served {
			pages = append(pages, "/deployments/"+kube.bed.Name+"/"+n)
		}
	}
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

// sessionsBed is the first bed with the session servers, nil if none.
func sessionsBed(beds []*testbed.Bed) *testbed.Bed {
	for _, b := range beds {
		if b.Sessions {
			return b
		}
	}
	return nil
}

// clickAndLoad presses the element sel through the DOM and returns once
// the page it brings has loaded whole: the document that was there is
// marked, and the wait ends on an unmarked one that is complete (at most
// 90 s: a deploy waits for its rollout).
func clickAndLoad(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	q, _ := json.Marshal(sel)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.__strataBefore = true, document.querySelector(`+string(q)+`).click(), true)`)); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__strataBefore === undefined && document.readyState === "complete"`))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
			t.Fatalf("no new page loaded 90 s after pressing %s: at %s (%v)", sel, where, err)
		}
	}
}

// newTab runs act in tab and returns the page it opened in a new tab of
// the same browser context (the same cookies), closed when t ends.
func newTab(t *testing.T, tab context.Context, act func()) context.Context {
	t.Helper()
	c := chromedp.FromContext(tab)
	known := map[target.ID]bool{}
	list, err := chromedp.Targets(tab)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range list {
		known[i.TargetID] = true
	}
	act()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		list, err := chromedp.Targets(tab)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range list {
			if i.Type == "page" && !known[i.TargetID] && i.BrowserContextID == c.BrowserContextID {
				ctx, cancel := chromedp.NewContext(tab, chromedp.WithTargetID(i.TargetID))
				t.Cleanup(cancel)
				if err := chromedp.Do(ctx); err != nil {
					t.Fatalf("attach to the new tab: %v", err)
				}
				return ctx
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no new tab opened within 30 s")
		}
	}
}

// tabState says what a tab shows, for a failure's message: its address,
// title, text, the resources it loaded with their status, and a
// screenshot kept among the test's artefacts.
func tabState(t *testing.T, tab context.Context, name string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Evaluate[string](`JSON.stringify({href: location.href, title: document.title,
  term: typeof window.term, text: document.body ? document.body.innerText.slice(0, 500) : "",
  resources: performance.getEntriesByType("resource").map(e => e.name + " " + e.responseStatus)})`))
	if err != nil {
		s = err.Error()
	}
	if png, err := chromedp.Run(tab, chromedp.CaptureScreenshot()); err == nil {
		f := filepath.Join(browsertest.ArtifactDir(t, "journey"), name+".png")
		if os.WriteFile(f, png, 0o644) == nil {
			s += " (screenshot " + f + ")"
		}
	}
	return s
}

// journeyBridge is a cluster's strata-bridge as the portal's configuration
// names it.
type journeyBridge struct{ URL, TokenFile string }

// journeyKube is the Kubernetes bed with a strata-bridge (the real daemon,
// as its unit runs it) over bed's Slurm: tenant lab (the bed's account
// as project main) serves in namespace, models from shared.
type journeyKube struct {
	bed       *testbed.Bed
	rc        *rest.Config
	namespace string
	shared    string
	bridge    journeyBridge
}

// newJourneyKube starts strata-bridge for b on the Kubernetes bed until the
// test ends, once it answers; built into the test's temporary folder (or
// STRATA_BRIDGE_BIN).
func newJourneyKube(t *testing.T, b *testbed.Bed) *journeyKube {
	t.Helper()
	rc := kubetest.Config(t)
	bin, err := bridgetest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := &journeyKube{bed: b, rc: rc, namespace: kubetest.Namespace(t, rc, "journey")}
	br := bridgetest.Start(t, b, bridgetest.Options{Binary: bin, Namespace: k.namespace, Tenant: "lab", Project: "main",
		Prefix: "journey-serve-", RolloutTimeout: "45s"})
	k.shared = br.Shared
	k.bridge = journeyBridge{URL: br.URL, TokenFile: br.TokenFile}
	return k
}
