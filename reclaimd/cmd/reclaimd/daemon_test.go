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

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/daemon/notifytest"
)

// TestMain lets the tests run this test binary as reclaimd itself: a real
// process, with real signals and systemd's environment.
func TestMain(m *testing.M) {
	if os.Getenv("RECLAIMD_TEST_AS_MAIN") == "1" {
		cliexit.Main("reclaimd", run)
	}
	os.Exit(m.Run())
}

// The agent, started as systemd starts a Type=notify unit (NOTIFY_SOCKET,
// WATCHDOG_USEC), says READY=1 once it serves, pings the watchdog while it
// samples, brackets a SIGHUP with RELOADING=1 and READY=1, and on SIGTERM
// says STOPPING=1 and exits 0. Its /metrics has strata_build_info and the
// Go and process collectors.
func TestAgentUnderSystemdNotify(t *testing.T) {
	dir := t.TempDir()
	sock, msgs := notifytest.Socket(t)
	replay, err := filepath.Abs("../../internal/source/testdata/two-gpus.csv")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "reclaimd.yaml")
	token := filepath.Join(dir, "agent.token")
	cfg := `apiVersion: strata/v1
kind: ReclaimdConfig
slurm:
  url: http://127.0.0.1:1
  token_file: /nonexistent
agent:
  listen: 127.0.0.1:0
  node: gpu01
  interval: 1s
  window: 1m
  token_file: ` + token + `
  replay: ` + replay + "\n"
	for path, data := range map[string]string{cfgPath: cfg, token: "agent secret\n"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(os.Args[0], "--config", cfgPath, "agent")
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
	await := func(want string) { t.Helper(); notifytest.Await(t, msgs, want, 10*time.Second) }

	await("READY=1")
	var addr string
	select {
	case addr = <-listen:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent did not log its address")
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s after READY=1: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !regexp.MustCompile(`strata_build_info\{goversion="go[^"]+",part="reclaimd-agent",revision="[^"]+",version="[^"]+"\} 1`).MatchString(body) ||
		!strings.Contains(body, "go_goroutines ") || !strings.Contains(body, "process_start_time_seconds ") {
		t.Errorf("GET /metrics: %d, no strata_build_info of reclaimd-agent or no Go and process collectors:\n%s", code, body)
	}
	await("WATCHDOG=1")

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await("RELOADING=1")
	await("READY=1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("STOPPING=1")
	<-logsDone
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), `msg="daemon stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
}

// --version prints the part, version, revision and Go version.
func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"reclaimd", "--version"}, &out, &errb); err != nil {
		t.Fatalf("--version: %v\n%s", err, errb.String())
	}
	if !regexp.MustCompile(`^reclaimd version \S+ \(revision \S+, go\S+\)\n$`).MatchString(out.String()) {
		t.Errorf("--version printed %q", out.String())
	}
}
