// Package bridgetest runs the real strata-bridge daemon for the
// integration tests of the parts that meet it through its API (the
// portal's service and pages): over a Slurm test bed and the Kubernetes
// test bed, as its unit runs it, serving one tenant's project from a
// models folder of its own.
package bridgetest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/testbed"
)

// Options are what differs between the tests that start a bridge.
type Options struct {
	// Binary is the strata-bridge to run (see Build).
	Binary string
	// Namespace serves tenant Tenant, whose project Project is the bed's
	// account.
	Namespace, Tenant, Project string
	// Prefix names the models folder (a unique name is added).
	Prefix string
	// RolloutTimeout is the bridge's kubernetes.rollout_timeout ("1m").
	RolloutTimeout string
}

// Bridge is a running strata-bridge.
type Bridge struct {
	// URL is its API's address; TokenFile holds the API's token, as the
	// portal's bridge_token_file names it.
	URL, TokenFile string
	// Shared is the models folder (the bed's path): anyone may write it,
	// and the bridge serves only models beneath it.
	Shared string
}

// repoRoot is the module's folder, found from this file's.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build builds strata-bridge into dir (or takes STRATA_BRIDGE_BIN).
func Build(dir string) (string, error) {
	if b := os.Getenv("STRATA_BRIDGE_BIN"); b != "" {
		return b, nil
	}
	bin := filepath.Join(dir, "strata-bridge")
	cmd := exec.Command("go", "build", "-o", bin, "./bridge/cmd/strata-bridge")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: out}
	}
	return bin, nil
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build strata-bridge: " + e.err.Error() + "\n" + string(e.out)
}
func (e *buildError) Unwrap() error { return e.err }

// lockedBuffer collects the daemon's log while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Start runs strata-bridge over bed b's slurmrestd and the Kubernetes
// bed until the test ends, and returns once its /healthz says it is
// healthy (45 s at most). Its log is written to the test's when the test
// fails.
func Start(t *testing.T, b *testbed.Bed, o Options) *Bridge {
	t.Helper()
	kubeconfig := os.Getenv(kubetest.KubeconfigVar)
	if kb, err := kubetest.Load(os.Getenv(kubetest.EnvVar)); err == nil {
		kubeconfig = kb.Kubeconfig
	}
	shared := path.Join(b.JobDir, testbed.Unique(o.Prefix))
	if err := os.MkdirAll(b.HostPath(shared), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(b.HostPath(shared), 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(b.HostPath(shared)) })
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	serving, err := json.Marshal(servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind,
		Tenants: []servingquota.Tenant{{Name: o.Tenant, Namespace: o.Namespace, GPUs: 4, Replicas: 4,
			Projects: []servingquota.Project{{Name: o.Project, Account: b.Account}}}}})
	if err != nil {
		t.Fatal(err)
	}
	jwt, err := os.ReadFile(b.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	runtimes := filepath.Join(repoRoot(), "etc", "strata", "bridge", "runtimes")
	files := map[string]string{
		"bridge.jwt":       string(jwt),
		"bridge-api.token": testbed.Unique("bridge-token-") + "\n",
		"serving.json":     string(serving),
		"bridge.yaml": strings.NewReplacer("URL", b.URL, "USER", b.AdminUser, "DIR", dir, "KUBECONFIG", kubeconfig,
			"SHARED", shared, "JOBDIR", b.JobDir, "HOSTJOBS", b.HostPath(b.JobDir), "ROOT", b.Root, "RUNTIMES", runtimes,
			"LISTEN", addr, "ROLLOUT", o.RolloutTimeout).Replace(`apiVersion: strata/v1
kind: BridgeConfig
slurm: {url: URL, user: USER, token_file: DIR/bridge.jwt, poll_interval: 5s}
kubernetes: {kubeconfig: KUBECONFIG, rollout_timeout: ROLLOUT}
policy: {serving_file: DIR/serving.json}
models:
  allowed_roots: [SHARED]
  host_root: ROOT
  mount: {kind: hostPath, root: JOBDIR, path: HOSTJOBS}
runtimes: {dir: RUNTIMES}
defaults: {runtime: vllm}
store: {path: DIR/bridge.db}
listen: LISTEN
api: {token_file: DIR/bridge-api.token}
`),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs lockedBuffer
	ctx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, o.Binary, "-c", filepath.Join(dir, "bridge.yaml"), "run")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("strata-bridge log:\n%s", logs.String())
		}
	})
	for end := time.Now().Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(end) {
			t.Fatalf("strata-bridge did not turn healthy within 45 s")
		}
	}
	return &Bridge{URL: "http://" + addr, TokenFile: filepath.Join(dir, "bridge-api.token"), Shared: shared}
}
