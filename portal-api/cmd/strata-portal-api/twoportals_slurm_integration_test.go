//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/session/sessiontest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// counting is a loopback proxy in front of a bed's slurmrestd that counts
// the requests it passes, by kind ("jobs", "nodes", ... or "other").
type counting struct {
	*httptest.Server
	mu sync.Mutex
	n  map[string]int
}

func newCounting(t *testing.T, target string) *counting {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		if r.Method == http.MethodGet {
			// /slurm/v0.0.45/jobs, /slurmdb/v0.0.45/associations, ...
			parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
			kind = parts[len(parts)-1]
		}
		c.mu.Lock()
		c.n[kind]++
		c.n["all"]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

// counts is a copy of what the proxy counted so far.
func (c *counting) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// bedConfig is the configuration of portals sharing one PostgreSQL
// database and serving a test bed's cluster (as c1) through the proxy:
// alice a member of the bed's account, bob of another tenant, a job
// policy and a template that submits a sleeping batch job.
func bedConfig(t *testing.T, b *testbed.Bed, db pgtest.DB, slurmrestd string) string {
	t.Helper()
	dir := t.TempDir()
	alice, bob := b.Users[0], b.Users[1]
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tenants := write("tenants.json", fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": %q, "admins": [],
	  "tenants": [
	    {"name": "lab", "account": "lab", "admins": [], "projects": [
	      {"name": "main", "account": %q, "classes": [], "members": [{"user": %q, "role": "member", "default": true}]}]},
	    {"name": "other", "account": "other", "admins": [], "projects": [
	      {"name": "x", "account": "other-x", "classes": [], "members": [{"user": %q, "role": "member"}]}]}]}`,
		b.Cluster, b.Account, alice, bob), 0o644)
	policy := write("jobpolicy.json", fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "JobPolicy", "source": "policy.yaml",
	  "cluster": %q, "default_class": "batch", "classes_line": 10,
	  "classes": {"batch": {"partition": %q, "default_time": 10, "max_time": 120, "requeue": true, "whole_nodes": false,
	    "switches": 0, "max_gpus_per_job": 0, "line": 20, "max_time_line": 22, "max_gpus_line": 20, "whole_nodes_line": 20},
	    "interactive": {"partition": %q, "default_time": 120, "max_time": 720, "requeue": false, "whole_nodes": false,
	    "switches": 0, "max_gpus_per_job": 2, "line": 30, "max_time_line": 32, "max_gpus_line": 33, "whole_nodes_line": 30}},
	  "partitions": {%q: "batch"},
	  "accounts": {%q: {"tenant": "lab", "project": "main", "line": 50, "classes": ["batch", "interactive"], "classes_line": 51,
	    "gpus": {"limit": 4, "owner": "account %s", "line": 52}, "gpus_by_type": {}, "members": [%q], "viewers": {}}},
	  "users": {%q: %q}}`, b.Cluster, b.Partition, b.Partition, b.Partition, b.Account, b.Account, alice, alice, b.Account), 0o644)
	if err := os.Mkdir(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("templates/sleeper.yaml", `apiVersion: strata/v1
kind: JobTemplate
name: sleeper
description: A batch job that sleeps.
type: batch
class: batch
parameters:
  - name: gpus
    type: integer
    min: 1
    max: 2
    default: 1
    sets: gpus_per_node
options:
  nodes: 1
  time: 10m
script: |
  #!/bin/bash
  exec sleep 300
`, 0o644)
	terminal, err := os.ReadFile("../../../etc/strata/templates/terminal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write("templates/terminal.yaml", string(terminal), 0o644)
	return write("portal-api.yaml", `apiVersion: strata/v1
kind: PortalConfig
database: `+db.URL+`
database_password_file: `+db.PasswordFile+`
templates_dir: `+filepath.Join(dir, "templates")+`
sessions:
  origin: https://sessions.portal.test
clusters:
  - name: c1
    slurm_cluster: `+b.Cluster+`
    slurmrestd_url: `+slurmrestd+`
    jwt_key_file: `+b.JWTKey+`
    poll_user: `+b.AdminUser+`
    tenants_file: `+tenants+`
    job_policy_file: `+policy+`
    work_dir: `+b.JobDir+`
    session_root: `+sessionRoot(t, b, alice, bob)+`
    poll_interval: 2s
`, 0o644)
}

// sessionRoot is a folder for the sessions of users beneath the bed's
// job folder, at its host path, which the bed's root also holds (a link
// from its own host path to /), as a site mounts its shared file system
// at one path everywhere.
func sessionRoot(t *testing.T, b *testbed.Bed, users ...string) string {
	t.Helper()
	self := b.HostPath(b.Root)
	if err := os.MkdirAll(filepath.Dir(self), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", self); err != nil {
		if to, lerr := os.Readlink(self); lerr != nil || to != "/" {
			t.Fatalf("the root's link to itself: %v", err)
		}
	}
	root := b.HostPath(filepath.Join(b.JobDir, "portal-sessions"))
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		uid, err := sessiontest.UserID(b, u)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, u)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(uid), int(uid)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "{user}")
}

// TestTwoPortalsSlurm: two portals (real serve) on one PostgreSQL
// database in front of a test bed's real slurmrestd, used alternately as
// a round-robin balancer would. A token and a page session made through
// one work on the other; a job submitted through one is seen through the
// other, and hold, release and cancel go through either; the audit log
// has every action once; slurmrestd gets as many requests with two
// portals as with one (a counting proxy in front of it); and a record
// left open by a portal that died is settled by a live one from Slurm's
// state.
func TestTwoPortalsSlurm(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		if len(b.Users) < 2 {
			t.Fatalf("the test bed has users %v: two are needed", b.Users)
		}
		alice := b.Users[0]
		db := pgtest.New(t)
		rest := newCounting(t, b.URL)
		cfg := bedConfig(t, b, db, rest.URL)
		if out, stderr, err := runCLI(t, "--config", cfg, "check-config"); err != nil {
			t.Fatalf("check-config: %v\n%s%s", err, out, stderr)
		}
		out, stderr, err := runCLI(t, "--config", cfg, "token", "create", "--user", alice, "--expires", "1h")
		if err != nil {
			t.Fatalf("token create: %v\n%s", err, stderr)
		}
		tok := strings.TrimSpace(out)
		c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		do := func(base, method, path, cookie string, body io.Reader, ctype string) (answer, string) {
			t.Helper()
			req, err := http.NewRequest(method, base+path, body)
			if err != nil {
				t.Fatal(err)
			}
			if cookie != "" {
				req.AddCookie(&http.Cookie{Name: web.SessionCookie, Value: cookie})
			} else {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return answer{StatusCode: resp.StatusCode, Status: resp.Status, cookies: resp.Cookies()}, string(data)
		}
		// waitJob waits until a portal shows job id (its snapshot).
		waitJob := func(base string, id int64, what string, cond func(string) bool) string {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				resp, body := do(base, "GET", fmt.Sprintf("/v1/jobs/c1/%d", id), "", nil, "")
				if resp.StatusCode == http.StatusOK && cond(body) {
					return body
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: job %d not %s: %s %s", base, id, what, resp.Status, body)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}

		// One portal, then two: slurmrestd's requests in equal windows.
		const window = 12 * time.Second
		pa := servePortal(t, cfg)
		for i := 0; ; i++ {
			if resp, body := do(pa, "GET", "/v1/clusters", "", nil, ""); resp.StatusCode == http.StatusOK && strings.Contains(body, `"stale":false`) {
				break
			}
			if i > 150 {
				t.Fatal("the first portal never read the cluster")
			}
			time.Sleep(200 * time.Millisecond)
		}
		n0 := rest.counts()
		time.Sleep(window)
		n1 := rest.counts()
		pb := servePortal(t, cfg)
		for i := 0; ; i++ {
			if resp, body := do(pb, "GET", "/v1/clusters", "", nil, ""); resp.StatusCode == http.StatusOK && strings.Contains(body, `"stale":false`) {
				break
			}
			if i > 150 {
				t.Fatal("the second portal shows no snapshot")
			}
			time.Sleep(200 * time.Millisecond)
		}
		n2 := rest.counts()
		time.Sleep(window)
		n3 := rest.counts()
		one, two := n1["all"]-n0["all"], n3["all"]-n2["all"]
		jobsOne, jobsTwo := n1["jobs"]-n0["jobs"], n3["jobs"]-n2["jobs"]
		t.Logf("slurmrestd's requests in %s: one portal %d (%d job listings), two portals %d (%d job listings); by kind, one: %v",
			window, one, jobsOne, two, jobsTwo, diff(n0, n1))
		if jobsOne < 4 {
			t.Fatalf("one portal listed the jobs %d times in %s at a 2s interval: the measure is broken", jobsOne, window)
		}
		// One poll more or less at either end of a window.
		perPoll := (one + jobsOne - 1) / jobsOne
		if jobsTwo > jobsOne+1 || two > one+perPoll+3 {
			t.Errorf("two portals made %d requests (%d job listings) in %s, one portal %d (%d): both poll", two, jobsTwo, window, one, jobsOne)
		}

		// The token works on both; a page session made through one is
		// reached through the other.
		for i, p := range []string{pa, pb} {
			if resp, body := do(p, "GET", "/v1/me", "", nil, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"`+alice+`"`) {
				t.Errorf("portal %d: /v1/me with the token: %s %s", i, resp.Status, body)
			}
		}
		out, stderr, err = runCLI(t, "--config", cfg, "login-link", "--user", alice)
		if err != nil {
			t.Fatalf("login-link: %v\n%s", err, stderr)
		}
		link, err := url.Parse(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("login-link printed %q", out)
		}
		resp, _ := do(pb, "POST", "/signin/link", "", strings.NewReader(url.Values{"token": {link.Query().Get("t")}}.Encode()), "application/x-www-form-urlencoded")
		var cookie string
		for _, ck := range resp.cookies {
			if ck.Name == web.SessionCookie {
				cookie = ck.Value
			}
		}
		if resp.StatusCode != http.StatusSeeOther || cookie == "" {
			t.Fatalf("sign-in through portal 1: %s", resp.Status)
		}
		if resp, body := do(pa, "GET", "/", cookie, nil, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, alice) {
			t.Errorf("portal 0 with the page cookie made through portal 1: %s", resp.Status)
		}

		// A job submitted through portal 1 (which does not poll) is seen
		// through portal 0; actions go through either.
		resp, body := do(pb, "POST", "/v1/submissions", "", strings.NewReader(`{"cluster": "c1", "template": "sleeper", "params": {"gpus": "1"}}`), "application/json")
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("submission through portal 1: %s %s", resp.Status, body)
		}
		var sub struct {
			JobID int64 `json:"job_id"`
		}
		if err := json.Unmarshal([]byte(body), &sub); err != nil || sub.JobID == 0 {
			t.Fatalf("submission: %s", body)
		}
		t.Cleanup(func() { _ = b.Client(t).Cancel(testbed.Context(t), sub.JobID) })
		waitJob(pa, sub.JobID, "shown", func(string) bool { return true })
		held := b.Sbatch(t, alice, "--begin", "now+1hour", "--wrap", "sleep 1")
		t.Cleanup(func() { _ = b.Client(t).Cancel(testbed.Context(t), held) })
		waitJob(pb, held, "shown", func(string) bool { return true })
		client := b.Client(t)
		actions := []struct {
			portal string
			id     int64
			action string
			check  func(slurmrest.Job) bool
		}{
			{pa, held, "hold", func(j slurmrest.Job) bool { return j.Held }},
			{pb, held, "release", func(j slurmrest.Job) bool { return !j.Held }},
			{pa, held, "cancel", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") }},
			{pb, sub.JobID, "cancel", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") }},
		}
		for _, a := range actions {
			path := fmt.Sprintf("/v1/jobs/c1/%d/%s", a.id, a.action)
			if resp, body := do(a.portal, "POST", path, "", nil, ""); resp.StatusCode != http.StatusOK {
				t.Errorf("%s: POST %s: %s %s", a.portal, path, resp.Status, body)
			}
			testbed.WaitJob(t, client, a.id, 30*time.Second, a.action+" done in Slurm", a.check)
		}
		waitJob(pb, held, "cancelled", func(body string) bool { return strings.Contains(body, "CANCELLED") })

		// A session (a terminal) started through portal 0 is seen
		// through portal 1, and ended there: the job is cancelled in
		// Slurm. Only on a bed with the session servers.
		var sessionJob int64
		if b.Sessions {
			resp, body := do(pa, "POST", "/v1/sessions", "", strings.NewReader(`{"cluster": "c1", "template": "terminal", "params": {"gpus": "1", "hours": "1"}}`), "application/json")
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("a session through portal 0: %s %s", resp.Status, body)
			}
			var sess struct {
				ID    string `json:"id"`
				JobID int64  `json:"job_id"`
			}
			if err := json.Unmarshal([]byte(body), &sess); err != nil || sess.ID == "" || sess.JobID == 0 {
				t.Fatalf("the session: %s", body)
			}
			sessionJob = sess.JobID
			t.Cleanup(func() { _ = b.Client(t).Cancel(testbed.Context(t), sess.JobID) })
			for deadline := time.Now().Add(30 * time.Second); ; {
				resp, body := do(pb, "GET", "/v1/sessions/"+sess.ID, "", nil, "")
				if resp.StatusCode == http.StatusOK && strings.Contains(body, fmt.Sprintf(`"job_id":%d`, sess.JobID)) && strings.Contains(body, `"ready":true`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the session through portal 1: %s %s", resp.Status, body)
				}
				time.Sleep(300 * time.Millisecond)
			}
			if resp, body := do(pb, "DELETE", "/v1/sessions/"+sess.ID, "", nil, ""); resp.StatusCode >= 300 {
				t.Errorf("ending the session through portal 1: %s %s", resp.Status, body)
			}
			testbed.WaitJob(t, client, sess.JobID, 30*time.Second, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
		}

		// A portal that died with an action under way: its beat is two
		// minutes old. A live portal settles its record from Slurm.
		dead, err := store.OpenDatabase(t.Context(), store.Database{Setting: db.URL, PasswordFile: db.PasswordFile})
		if err != nil {
			t.Fatal(err)
		}
		defer dead.Close()
		dead.SetClock(func() time.Time { return time.Now().Add(-2 * time.Minute) })
		if err := dead.Register(t.Context(), "crashed-host/1/dead"); err != nil {
			t.Fatal(err)
		}
		open, err := dead.Intent(t.Context(), store.Audit{User: alice, Via: "token", Cluster: "c1", Action: "cancel", Target: fmt.Sprint(held)})
		if err != nil {
			t.Fatal(err)
		}
		var settled store.Audit
		for deadline := time.Now().Add(45 * time.Second); settled.Result == ""; {
			if time.Now().After(deadline) {
				t.Fatalf("the dead portal's record %d is still open", open)
			}
			time.Sleep(time.Second)
			log, err := dead.AuditLog(t.Context(), 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range log {
				if a.ID == open {
					settled = a
				}
			}
		}
		if settled.Result != store.ResultOK || !strings.Contains(settled.Error, "portal instance crashed-host/1/dead stopped") {
			t.Errorf("the dead portal's record: %s %q", settled.Result, settled.Error)
		}

		// The audit log: every action once, each carried out.
		log, err := dead.AuditLog(t.Context(), 100)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		instances := map[string]bool{}
		for _, a := range log {
			if a.ID == open {
				continue
			}
			if a.Result != store.ResultOK {
				t.Errorf("audit record %d: %+v", a.ID, a)
			}
			seen[a.Action+" "+a.Target]++
			instances[a.Instance] = true
		}
		want := map[string]int{"submit sleeper": 1}
		if sessionJob != 0 {
			want["submit terminal"]++
			want[fmt.Sprintf("cancel %d", sessionJob)]++
		}
		for _, a := range actions {
			want[fmt.Sprintf("%s %d", a.action, a.id)]++
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("the audit log: %v; want %v", seen, want)
		}
		if len(instances) != 2 {
			t.Errorf("the actions were recorded by instances %v; want the two portals", instances)
		}
	})
}

// diff is what each count grew by from a to b.
func diff(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
