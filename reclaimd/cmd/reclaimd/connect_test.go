package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/daemon/notifytest"
)

// The controller, started by systemd while slurmrestd is down, does not
// exit into a restart loop: it says READY=1, serves /healthz (503, naming
// slurmrestd) and /metrics (strata_reclaim_slurmrestd_connected 0), keeps
// the watchdog fed while it tries again, and stops cleanly on SIGTERM.
func TestControllerWaitsForSlurmrestd(t *testing.T) {
	dir := t.TempDir()
	sock, msgs := notifytest.Socket(t)
	cfgPath := filepath.Join(dir, "reclaimd.yaml")
	token := filepath.Join(dir, "slurm.jwt")
	agentToken := filepath.Join(dir, "agent.token")
	apiToken := filepath.Join(dir, "api.token")
	tenants := filepath.Join(dir, "tenants.json")
	rules, err := filepath.Abs("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := `apiVersion: strata/v1
kind: ReclaimdConfig
listen: 127.0.0.1:0
state_file: ` + filepath.Join(dir, "reclaimd.db") + `
interval: 10s
rules_file: ` + rules + `
tenants_file: ` + tenants + `
slurm:
  url: http://127.0.0.1:1
  token_file: ` + token + `
agents:
  token_file: ` + agentToken + `
api:
  token_file: ` + apiToken + "\n"
	for path, data := range map[string]string{cfgPath: cfg, token: "token\n", agentToken: "agent secret\n", apiToken: "api token\n", tenants: tenantsJSON} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "--config", cfgPath, "run")
	cmd.Env = append(os.Environ(), "RECLAIMD_TEST_AS_MAIN=1", "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=400000")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	listen := make(chan string, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		re := regexp.MustCompile(`msg="daemon ready" listen=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listen <- m[1]
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	await := func(want string) {
		t.Helper()
		if !t.Failed() {
			notifytest.Await(t, msgs, want, 10*time.Second)
		}
	}
	defer func() {
		if t.Failed() {
			_ = cmd.Process.Kill()
			<-logsDone
			t.Logf("reclaimd's log:\n%s", logs.String())
		}
	}()

	await("READY=1")
	var addr string
	select {
	case addr = <-listen:
	case <-time.After(5 * time.Second):
		t.Fatalf("the controller did not log its address:\n%s", logs.String())
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// READY=1 comes before the loop wires the store it opened: for that
	// moment /healthz says the store is not open yet. It is 503 all along,
	// and names slurmrestd once the loop waits for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := get("/healthz")
		if code != http.StatusServiceUnavailable {
			t.Fatalf("GET /healthz while slurmrestd is down: %d %q, want 503", code, body)
		}
		if strings.Contains(body, "waiting for slurmrestd at http://127.0.0.1:1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /healthz while slurmrestd is down: %q, want it to name slurmrestd within 10 s", body)
		}
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "\nstrata_reclaim_slurmrestd_connected 0\n") ||
		!strings.Contains(body, `part="reclaimd"`) {
		t.Errorf("GET /metrics while slurmrestd is down: %d, no strata_reclaim_slurmrestd_connected 0 or strata_build_info:\n%s", code, body)
	}
	// Past several watchdog periods and a retry, it still runs and pings.
	await("WATCHDOG=1")
	time.Sleep(2500 * time.Millisecond)
	await("WATCHDOG=1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("STOPPING=1")
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Errorf("controller after SIGTERM: %v\n%s", err, logs.String())
	}
	if n := strings.Count(logs.String(), "slurmrestd does not answer"); n < 2 {
		t.Errorf("%d tries logged, want 2 or more:\n%s", n, logs.String())
	}
}
