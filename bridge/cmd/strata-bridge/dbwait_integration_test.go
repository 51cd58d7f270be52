//go:build integration

package main

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/daemon/notifytest"
	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestBridgeWaitsForTheDatabase: `strata-bridge run` started while its
// PostgreSQL database does not answer (here: its address refuses
// connections) does not exit into a restart loop. It serves /healthz (503
// naming the database) and /metrics (strata_bridge_database_connected 0),
// answers the API with 503, keeps the watchdog fed and says why in its
// log; once the address answers (a proxy to the bed's server) it opens
// the store, takes the lease and acts. A database that answers and
// refuses (one that does not exist) still ends the start.
func TestBridgeWaitsForTheDatabase(t *testing.T) {
	kc := kubeconfig(t)
	pg := pgtest.New(t)
	beds := strings.Fields(os.Getenv(testbed.EnvVar))
	if len(beds) == 0 {
		t.Skipf("%s is not set: no Slurm test bed", testbed.EnvVar)
	}
	b, err := testbed.Load(beds[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx := testbed.Context(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata-bridge")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runtimes, _ := filepath.Abs("../../../etc/strata/bridge/runtimes")
	jwt, err := os.ReadFile(b.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := os.ReadFile(pg.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	const apiToken = "integration-api-token"
	for name, data := range map[string]string{
		"bridge.jwt":       string(jwt),
		"bridge-api.token": apiToken + "\n",
		"db.password":      string(pw),
		"serving.json": `{"apiVersion": "strata/v1", "kind": "ServingQuotas", "tenants": [
			{"name": "acme", "namespace": "strata-dbwait", "gpus": 4, "replicas": 4, "projects": [{"name": "llm", "account": "acme-llm"}]}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The database's address refuses connections until the proxy opens it.
	dbURL, dbAddr := pgtest.Unanswered(t, pg)
	addr := freeAddr(t)
	file := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(file, []byte(runConfig(b, dir, kc, runtimes, addr, dbURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	sock, msgs := notifytest.Socket(t)
	d := &daemonProc{name: "waiting", addr: addr, log: &syncBuffer{}}
	d.cmd = exec.Command(bin, "-c", file, "run")
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=600000")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
		if t.Failed() {
			t.Logf("the bridge's log:\n%s", d.log.String())
		}
	})
	// Polled, not read once: the first answers may come before the first
	// try to reach the database has failed.
	var code int
	var body string
	within(t, 30*time.Second, "/healthz names the database it waits for", func() bool {
		code, body = d.get(ctx, "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for the database") && strings.Contains(body, dbAddr)
	})
	if code, body := d.get(ctx, "/metrics"); !strings.Contains(body, "\nstrata_bridge_database_connected 0\n") {
		t.Errorf("/metrics while waiting: %d, no strata_bridge_database_connected 0", code)
	}
	if code, body := d.get(ctx, "/v1/deployments"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waits for its database") {
		t.Errorf("/v1/deployments while waiting for the database: %d %s; want 503", code, body)
	}
	// Past the first retries (2 s, 4 s) it still runs and pings.
	notifytest.Await(t, msgs, "READY=1", 10*time.Second)
	notifytest.Await(t, msgs, "WATCHDOG=1", 5*time.Second)
	time.Sleep(7 * time.Second)
	notifytest.Await(t, msgs, "WATCHDOG=1", 5*time.Second)
	if n := strings.Count(d.log.String(), "the database does not answer"); n < 2 {
		t.Errorf("%d tries logged; want 2 or more:\n%s", n, d.log.String())
	}

	// The database's address opens: a proxy to the bed's server.
	pgtest.Proxy(t, pg, dbAddr)
	// The retries back off (2, 4, 8, 16, 32 s): the next may be 32 s away,
	// and on a loaded machine later.
	opened := time.Now()
	within(t, 75*time.Second, "the bridge opens the store once the database answers", func() bool {
		_, body := d.get(ctx, "/metrics")
		return strings.Contains(body, "\nstrata_bridge_database_connected 1\n")
	})
	t.Logf("the store opened %s after the database answered", time.Since(opened).Round(time.Second))
	within(t, 30*time.Second, "the bridge takes the lease and acts", func() bool { return d.role(ctx) == "active" })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/deployments", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/v1/deployments with the store open: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	notifytest.Await(t, msgs, "WATCHDOG=1", 5*time.Second)

	// A database that answers and refuses: not waited for.
	u, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/strata_no_such_database"
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(runConfig(b, dir, kc, runtimes, freeAddr(t), u.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", bad, "run")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the bridge waited for a database that does not exist:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "strata_no_such_database") {
		t.Errorf("the bridge on a database that does not exist: %v\n%s", err, out)
	}
}

// within polls ok every 200 ms until it holds, or fails the test with what
// after d.
func within(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
