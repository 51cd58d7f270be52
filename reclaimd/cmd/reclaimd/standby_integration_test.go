//go:build integration

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/daemon/notifytest"
	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// daemonProc is one reclaimd run process of the test.
type daemonProc struct {
	cmd  *exec.Cmd
	addr string
	msgs <-chan string // what it told systemd
	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
}

func (p *daemonProc) log() string { p.mu.Lock(); defer p.mu.Unlock(); return p.logs.String() }

func startDaemon(t *testing.T, cfgPath string) *daemonProc {
	t.Helper()
	sock, msgs := notifytest.Socket(t)
	p := &daemonProc{cmd: exec.Command(os.Args[0], "--config", cfgPath, "run"), msgs: msgs, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "RECLAIMD_TEST_AS_MAIN=1", "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=600000")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listen := make(chan string, 1)
	go func() {
		defer close(p.done)
		re := regexp.MustCompile(`msg="daemon ready" listen=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listen <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("reclaimd's log:\n%s", p.log())
		}
	})
	select {
	case p.addr = <-listen:
	case <-time.After(20 * time.Second):
		t.Fatalf("reclaimd did not log its address:\n%s", p.log())
	}
	return p
}

func (p *daemonProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric is the line of one metric in /metrics ("" when absent).
func (p *daemonProc) metric(t *testing.T, name string) string {
	t.Helper()
	_, body := p.get(t, "/metrics")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

func eventually(t *testing.T, within time.Duration, ok func() bool, what string) {
	t.Helper()
	end := time.Now().Add(within)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStandbyDaemons: two reclaimd run processes on one PostgreSQL
// database (the bed's), slurmrestd down: the first takes the lease and
// waits for slurmrestd (/healthz 503 naming it, lease_held 1); the second
// stands by (/healthz 200, role standby, lease_held 0) and keeps the
// watchdog fed; SIGTERM of the first hands the lease over at once, and
// the second takes it with the next generation.
func TestStandbyDaemons(t *testing.T) {
	pg := pgtest.New(t)
	cfgPath := standbyConfig(t, pg, pg.URL)
	a := startDaemon(t, cfgPath)
	eventually(t, 10*time.Second, func() bool { return a.metric(t, "strata_reclaim_lease_held") == "strata_reclaim_lease_held 1" },
		"the first controller holds the lease")
	b := startDaemon(t, cfgPath)
	time.Sleep(2 * time.Second) // b tries twice
	if code, body := a.get(t, "/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for slurmrestd") {
		t.Errorf("the acting controller's /healthz while slurmrestd is down: %d %q", code, body)
	}
	code, body := b.get(t, "/healthz")
	if code != http.StatusOK || !strings.Contains(body, `"role":"standby"`) || !strings.Contains(body, `"held":false`) {
		t.Errorf("the standby's /healthz: %d %q; want 200, role standby", code, body)
	}
	if m := b.metric(t, "strata_reclaim_lease_held"); m != "strata_reclaim_lease_held 0" {
		t.Errorf("the standby's %q", m)
	}
	if m := a.metric(t, "strata_reclaim_lease_generation"); m != "strata_reclaim_lease_generation 1" {
		t.Errorf("the acting controller's %q", m)
	}
	// Standing by is not being stuck: the watchdog is fed (every 600 ms
	// asked; the standby tries every second).
	notifytest.Await(t, b.msgs, "WATCHDOG=1", 5*time.Second)
	time.Sleep(1500 * time.Millisecond)
	notifytest.Await(t, b.msgs, "WATCHDOG=1", 5*time.Second)

	stopped := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("the first controller after SIGTERM: %v", err)
	}
	eventually(t, 3*time.Second, func() bool { return b.metric(t, "strata_reclaim_lease_held") == "strata_reclaim_lease_held 1" },
		"the standby takes the lease a clean stop released")
	if d := time.Since(stopped); d > 2*time.Second {
		t.Errorf("the standby took the lease %v after the stop; want within a try (1s), not the TTL (3s)", d)
	}
	if m := b.metric(t, "strata_reclaim_lease_generation"); m != "strata_reclaim_lease_generation 2" {
		t.Errorf("after the take-over: %q", m)
	}
	eventually(t, 3*time.Second, func() bool {
		code, body := b.get(t, "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for slurmrestd")
	}, "the new acting controller waits for slurmrestd")
}

// standbyConfig writes a controller's configuration on the bed's database
// pg, reached at url (pg.URL, or a proxy to it), slurmrestd down; it
// returns its path.
func standbyConfig(t *testing.T, pg pgtest.DB, url string) string {
	t.Helper()
	dir := t.TempDir()
	pw, err := os.ReadFile(pg.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "reclaimd.yaml")
	files := map[string]string{
		filepath.Join(dir, "slurm.jwt"): "token\n", filepath.Join(dir, "agent.token"): "agent secret\n",
		filepath.Join(dir, "api.token"): apiTokenText + "\n", filepath.Join(dir, "tenants.json"): tenantsJSON,
		filepath.Join(dir, "db.password"): string(pw),
		cfgPath: `apiVersion: strata/v1
kind: ReclaimdConfig
listen: 127.0.0.1:0
database: ` + url + `
database_password_file: ` + filepath.Join(dir, "db.password") + `
standby:
  takeover_within: 4s
interval: 10s
rules_file: ` + rules + `
tenants_file: ` + filepath.Join(dir, "tenants.json") + `
slurm:
  url: http://127.0.0.1:1
  token_file: ` + filepath.Join(dir, "slurm.jwt") + `
agents:
  token_file: ` + filepath.Join(dir, "agent.token") + `
api:
  token_file: ` + filepath.Join(dir, "api.token") + "\n",
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cfgPath
}

// apiTokenText is the controllers' api.token_file.
const apiTokenText = "standby-api-token-0123456789"

// do is one request with the API's token.
func (p *daemonProc) do(t *testing.T, method, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+p.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiTokenText)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// TestStandbyServesTheReads: two controllers on one PostgreSQL database
// with records in it (a warning and a requeue carried out, a failure
// retried): the standby answers the portal's reads (decisions, worth,
// failures, a job's attempts and reclaim) as the one holding the lease
// does, and refuses anything else with 503 and Retry-After. After the
// take-over the new standby (the old acting one, restarted) answers them
// too.
func TestStandbyServesTheReads(t *testing.T) {
	pg := pgtest.New(t)
	ctx := t.Context()
	st, err := store.OpenDatabase(ctx, store.Database{Setting: pg.URL, PasswordFile: pg.PasswordFile, Rule: secretRule})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	ev, _ := json.Marshal(decide.Evidence{WindowStart: at.Add(-time.Hour), WindowEnd: at, JobStart: at.Add(-2 * time.Hour),
		JobEnd: at.Add(10 * time.Hour), IdleGPUs: 2, TotalGPUs: 2})
	gpus := []store.GPU{{Node: "gpu1", Index: 0}, {Node: "gpu1", Index: 1}}
	for i, kind := range []string{"warn", "requeue"} {
		rec := store.Record{JobID: 4242, Account: "acme-llm", User: "mem", Kind: kind, Rule: "train-idle", Reason: "idle for 1h",
			Evidence: ev, GPUs: gpus, DecidedAt: at.Add(time.Duration(i) * time.Minute)}
		id, err := st.Intent(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, id, store.StatusDone, "", rec.DecidedAt.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if kind == "requeue" {
			if err := st.AddReclaim(ctx, store.Reclaim{RecordID: id, JobID: 4242, Account: "acme-llm", Rule: rec.Rule, Kind: kind,
				At: rec.DecidedAt.Add(time.Second), GPUs: gpus, LimitEnd: at.Add(10 * time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := st.AddFailure(ctx, store.Failure{JobID: 4243, Start: at.Add(-time.Hour), Account: "acme-llm", User: "mem", Class: "nccl",
		Evidence: json.RawMessage(`{"state":"FAILED"}`), Decision: json.RawMessage(`{"action":"retry"}`), Action: "retry",
		Reason: "nccl: retry", FailedAt: at, ClassifiedAt: at}); err != nil {
		t.Fatal(err)
	}

	cfgPath := standbyConfig(t, pg, pg.URL)
	a := startDaemon(t, cfgPath)
	eventually(t, 10*time.Second, func() bool { return a.metric(t, "strata_reclaim_lease_held") == "strata_reclaim_lease_held 1" },
		"the first controller holds the lease")
	b := startDaemon(t, cfgPath)
	eventually(t, 5*time.Second, func() bool {
		code, body := b.get(t, "/healthz")
		return code == http.StatusOK && strings.Contains(body, `"role":"standby"`)
	}, "the second controller stands by")
	since := at.Add(-24 * time.Hour).Format(time.RFC3339)
	reads := []string{"/v1/decisions?since=" + since, "/v1/worth?since=" + since, "/v1/failures?since=" + since,
		"/v1/jobs/4243/attempts", "/v1/jobs/4242/reclaim", "/v1/jobs/4244/reclaim"}
	same := func(acting, standby *daemonProc) {
		t.Helper()
		for _, path := range reads {
			code, _, body := acting.do(t, http.MethodGet, path)
			scode, _, sbody := standby.do(t, http.MethodGet, path)
			want := http.StatusOK
			if strings.Contains(path, "4244") {
				want = http.StatusNotFound
			}
			if code != want || scode != code || sbody != body {
				t.Errorf("GET %s: the acting controller %d %s; the standby %d %s", path, code, body, scode, sbody)
			}
		}
		if _, _, body := standby.do(t, http.MethodGet, "/v1/worth?since="+since); !strings.Contains(body, `"job_id": 4242`) {
			t.Errorf("the standby's worth has no reclaim of job 4242: %s", body)
		}
		code, h, body := standby.do(t, http.MethodPost, "/v1/decisions")
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("POST to the standby: %d (Retry-After %q) %s; want 503 with Retry-After", code, h.Get("Retry-After"), body)
		}
		if code, _, _ := standby.do(t, http.MethodGet, "/v1/decisions"); code != http.StatusOK {
			t.Errorf("the standby's reads: %d", code)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+standby.addr+"/v1/decisions", nil)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the standby's reads without the token: %v %v; want 401", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	same(a, b)

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-a.done
	_ = a.cmd.Wait()
	eventually(t, 5*time.Second, func() bool { return b.metric(t, "strata_reclaim_lease_held") == "strata_reclaim_lease_held 1" },
		"the standby takes over")
	c := startDaemon(t, cfgPath)
	eventually(t, 5*time.Second, func() bool {
		code, body := c.get(t, "/healthz")
		return code == http.StatusOK && strings.Contains(body, `"role":"standby"`)
	}, "the restarted controller stands by")
	same(b, c)
}

// TestControllerWaitsForTheDatabase: a controller started while its
// PostgreSQL does not answer (nothing listens at the database's address)
// does not exit into a restart loop: it says READY=1, serves /healthz (503,
// naming the database), strata_reclaim_database_connected 0, keeps the
// watchdog fed and tries again; once the address answers (a proxy to the
// bed's server opens there) it opens the store, takes the lease and goes
// on to wait for slurmrestd. A database that answers and refuses (one that
// does not exist) still ends the start, with the reason.
func TestControllerWaitsForTheDatabase(t *testing.T) {
	pg := pgtest.New(t)
	// The database's address refuses connections until the proxy opens it.
	dbURL, addr := pgtest.Unanswered(t, pg)
	a := startDaemon(t, standbyConfig(t, pg, dbURL))
	// Polled, not read once: the first answers may come before the first
	// try to reach the database has failed.
	eventually(t, 30*time.Second, func() bool {
		code, body := a.get(t, "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for the database") && strings.Contains(body, addr)
	}, "/healthz while the database does not answer: 503 naming the database")
	if m := a.metric(t, "strata_reclaim_database_connected"); m != "strata_reclaim_database_connected 0" {
		t.Errorf("while waiting: %q", m)
	}
	if code, _, _ := a.do(t, http.MethodGet, "/v1/decisions"); code != http.StatusServiceUnavailable {
		t.Errorf("/v1/decisions while waiting for the database: %d; want 503", code)
	}
	notifytest.Await(t, a.msgs, "WATCHDOG=1", 5*time.Second)
	if !strings.Contains(a.log(), "the database does not answer") {
		t.Errorf("the log does not say why reclaimd waits:\n%s", a.log())
	}

	// The database's address opens: a proxy to the bed's server.
	pgtest.Proxy(t, pg, addr)
	// The retries back off (2, 4, 8, 16, 32 s): the next may be 32 s away,
	// and on a loaded machine later.
	eventually(t, 75*time.Second, func() bool {
		return a.metric(t, "strata_reclaim_database_connected") == "strata_reclaim_database_connected 1"
	},
		"the controller opens the store once the database answers")
	eventually(t, 20*time.Second, func() bool { return a.metric(t, "strata_reclaim_lease_held") == "strata_reclaim_lease_held 1" },
		"the controller takes the lease")
	if code, body := a.get(t, "/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for slurmrestd") {
		t.Errorf("/healthz with the database open and slurmrestd down: %d %q", code, body)
	}
	if code, _, body := a.do(t, http.MethodGet, "/v1/decisions"); code != http.StatusOK {
		t.Errorf("/v1/decisions with the database open: %d %s", code, body)
	}

	// A database that answers and refuses: not waited for.
	u, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/strata_no_such_database"
	cmd := exec.Command(os.Args[0], "--config", standbyConfig(t, pg, u.String()), "run")
	cmd.Env = append(os.Environ(), "RECLAIMD_TEST_AS_MAIN=1")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("reclaimd waited for a database that does not exist:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "strata_no_such_database") {
		t.Errorf("reclaimd on a database that does not exist: %v\n%s", err, out)
	}
}
