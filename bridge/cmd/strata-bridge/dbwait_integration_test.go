//go:build integration

package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	wb := newWaitBed(t, "strata-dbwait")
	b, dir, kc, runtimes, pg := wb.bed, wb.dir, wb.kc, wb.runtimes, wb.pg
	ctx := testbed.Context(t)

	// The database's address refuses connections until the proxy opens it.
	dbURL, dbAddr := pgtest.Unanswered(t, pg)
	addr := freeAddr(t)
	file := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(file, []byte(runConfig(b, dir, kc, runtimes, addr, dbURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	d, msgs := wb.start(t, file, addr)
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
	keepsWaiting(t, d, msgs, "the database does not answer")

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
	req.Header.Set("Authorization", "Bearer "+waitAPIToken)
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
	cmd := exec.Command(wb.bin, "-c", bad, "run")
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

// TestBridgeWaitsForSlurmrestd: `strata-bridge run` started while
// slurmrestd does not answer (here: slurm.url is a loopback port that
// refuses connections) does not exit into a restart loop. It serves
// /healthz (503 naming slurmrestd's URL and the error) and /metrics
// (strata_bridge_slurmrestd_connected 0), answers the API with 503 and
// Retry-After, keeps the watchdog fed and says why in its log; once the
// port answers (a reverse proxy to the bed's slurmrestd) it picks a
// parser, takes the lease, polls and turns healthy.
func TestBridgeWaitsForSlurmrestd(t *testing.T) {
	wb := newWaitBed(t, "strata-slurmwait")
	ctx := testbed.Context(t)
	target, err := url.Parse(wb.bed.URL)
	if err != nil {
		t.Fatal(err)
	}
	// slurmrestd's address: nothing listens on it until the proxy does.
	restAddr := freeAddr(t)
	bed := *wb.bed
	bed.URL = "http://" + restAddr
	addr := freeAddr(t)
	file := filepath.Join(wb.dir, "bridge.yaml")
	if err := os.WriteFile(file, []byte(runConfig(&bed, wb.dir, wb.kc, wb.runtimes, addr, wb.pg.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	d, msgs := wb.start(t, file, addr)
	// Polled, not read once: the first answers may come before the first
	// try to reach slurmrestd has failed.
	within(t, 30*time.Second, "/healthz names slurmrestd and why it waits", func() bool {
		code, body := d.get(ctx, "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for slurmrestd at "+bed.URL) &&
			strings.Contains(body, "connection refused")
	})
	if code, body := d.get(ctx, "/metrics"); !strings.Contains(body, "\nstrata_bridge_slurmrestd_connected 0\n") {
		t.Errorf("/metrics while waiting: %d, no strata_bridge_slurmrestd_connected 0:\n%s", code, body)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/deployments", nil)
	req.Header.Set("Authorization", "Bearer "+waitAPIToken)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("/v1/deployments while waiting for slurmrestd: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(body), "waits for slurmrestd") {
			t.Errorf("/v1/deployments while waiting for slurmrestd: %d, Retry-After %q, %s; want 503 with Retry-After",
				resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	keepsWaiting(t, d, msgs, "slurmrestd does not answer")

	// slurmrestd's address opens: a reverse proxy to the bed's slurmrestd.
	ln, err := net.Listen("tcp", restAddr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxy.Serve(ln) }()
	t.Cleanup(func() { _ = proxy.Close() })
	// The retries back off (2, 4, 8, 16, 32 s): the next may be 32 s away,
	// and on a loaded machine later.
	opened := time.Now()
	within(t, 75*time.Second, "the bridge reaches slurmrestd once it answers", func() bool {
		_, body := d.get(ctx, "/metrics")
		return strings.Contains(body, "\nstrata_bridge_slurmrestd_connected 1\n")
	})
	t.Logf("slurmrestd reached %s after it answered", time.Since(opened).Round(time.Second))
	within(t, 30*time.Second, "the bridge acts and /healthz turns healthy after its first poll", func() bool {
		code, body := d.get(ctx, "/healthz")
		return code == http.StatusOK && strings.Contains(body, `"ok": true`) && d.role(ctx) == "active"
	})
	if l := d.log.String(); !strings.Contains(l, "slurmrestd parser selected") || !strings.Contains(l, "strata-bridge starting") {
		t.Errorf("the bridge's log lacks the parser or its start:\n%s", l)
	}
	notifytest.Await(t, msgs, "WATCHDOG=1", 5*time.Second)
}

// waitAPIToken is the API token of the waiting tests' bridges.
const waitAPIToken = "integration-api-token"

// waitBed is what the waiting tests share: the first Slurm test bed, the
// Kubernetes and PostgreSQL beds, the built binary, and the files
// runConfig names, in dir (serving.json with one tenant in namespace).
type waitBed struct {
	bed                    *testbed.Bed
	pg                     pgtest.DB
	kc, dir, bin, runtimes string
}

func newWaitBed(t *testing.T, namespace string) *waitBed {
	t.Helper()
	wb := &waitBed{kc: kubeconfig(t), pg: pgtest.New(t)}
	beds := strings.Fields(os.Getenv(testbed.EnvVar))
	if len(beds) == 0 {
		t.Skipf("%s is not set: no Slurm test bed", testbed.EnvVar)
	}
	var err error
	if wb.bed, err = testbed.Load(beds[0]); err != nil {
		t.Fatal(err)
	}
	wb.dir = t.TempDir()
	wb.bin = filepath.Join(wb.dir, "strata-bridge")
	if out, err := exec.CommandContext(testbed.Context(t), "go", "build", "-o", wb.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	wb.runtimes, _ = filepath.Abs("../../../etc/strata/bridge/runtimes")
	jwt, err := os.ReadFile(wb.bed.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := os.ReadFile(wb.pg.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"bridge.jwt":       string(jwt),
		"bridge-api.token": waitAPIToken + "\n",
		"db.password":      string(pw),
		"serving.json": `{"apiVersion": "strata/v1", "kind": "ServingQuotas", "tenants": [
			{"name": "acme", "namespace": "` + namespace + `", "gpus": 4, "replicas": 4, "projects": [{"name": "llm", "account": "acme-llm"}]}]}`,
	} {
		if err := os.WriteFile(filepath.Join(wb.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(wb.dir, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	return wb
}

// start runs `strata-bridge run` on the configuration file as systemd
// would (NOTIFY_SOCKET, WATCHDOG_USEC), listening on addr, and kills it at
// the end of the test; msgs are its notifications.
func (wb *waitBed) start(t *testing.T, file, addr string) (d *daemonProc, msgs <-chan string) {
	t.Helper()
	sock, msgs := notifytest.Socket(t)
	d = &daemonProc{name: "waiting", addr: addr, log: &syncBuffer{}}
	d.cmd = exec.Command(wb.bin, "-c", file, "run")
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
	return d, msgs
}

// keepsWaiting: past the first retries (2 s, 4 s) the bridge still runs,
// says it is ready and pings the watchdog, and logged more than one try.
func keepsWaiting(t *testing.T, d *daemonProc, msgs <-chan string, logged string) {
	t.Helper()
	notifytest.Await(t, msgs, "READY=1", 10*time.Second)
	notifytest.Await(t, msgs, "WATCHDOG=1", 5*time.Second)
	time.Sleep(7 * time.Second)
	notifytest.Await(t, msgs, "WATCHDOG=1", 5*time.Second)
	if n := strings.Count(d.log.String(), logged); n < 2 {
		t.Errorf("%d tries logged; want 2 or more:\n%s", n, d.log.String())
	}
	if err := d.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the bridge exited while it waited: %v", err)
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
