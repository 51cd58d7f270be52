//go:build integration

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// kubeconfig is the Kubernetes test bed's kubeconfig file.
func kubeconfig(t *testing.T) string {
	t.Helper()
	kubetest.Config(t) // skips (or fails under CI) without a bed; holds it shared
	if f := os.Getenv(kubetest.EnvVar); f != "" {
		b, err := kubetest.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		return b.Kubeconfig
	}
	return os.Getenv(kubetest.KubeconfigVar)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var oneApp sync.Mutex

// syncBuffer collects the daemon's log while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// `strata-bridge run` as the unit starts it, against each Slurm test bed's
// slurmrestd and the Kubernetes test bed: /healthz turns healthy after the
// first poll, /metrics has the poll's time and the build, the API answers
// (a job slurmctld does not know is refused by the job check), and SIGTERM
// (the context) stops it cleanly.
func TestDaemon(t *testing.T) {
	kc := kubeconfig(t)
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		// One daemon at a time: urfave/cli v2 writes package-level flag
		// state while it parses, so two apps in one process race (one
		// process runs one app in production).
		oneApp.Lock()
		defer oneApp.Unlock()
		dir := t.TempDir()
		addr := freeAddr(t)
		runtimes, _ := filepath.Abs("../../../etc/strata/bridge/runtimes")
		// The bed's token, in a file only this user reads: the bridge
		// refuses a secret every user can read.
		jwt, err := os.ReadFile(b.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg := strings.NewReplacer("URL", b.URL, "USER", b.AdminUser, "TOKEN", dir+"/bridge.jwt", "KUBECONFIG", kc, "DIR", dir,
			"RUNTIMES", runtimes, "LISTEN", addr).Replace(`apiVersion: strata/v1
kind: BridgeConfig
slurm: {url: URL, user: USER, token_file: TOKEN, poll_interval: 5s}
kubernetes: {kubeconfig: KUBECONFIG, rollout_timeout: 30s}
policy: {serving_file: DIR/serving.json}
models:
  allowed_roots: [DIR/shared]
  mount: {kind: hostPath, path: /shared, root: DIR/shared}
runtimes: {dir: RUNTIMES}
store: {path: DIR/bridge.db}
listen: LISTEN
api: {token_file: DIR/bridge-api.token}
`)
		const apiToken = "integration-api-token"
		files := map[string]string{
			"bridge.jwt":       string(jwt),
			"bridge-api.token": apiToken + "\n",
			"bridge.yaml":      cfg,
			"serving.json":     `{"apiVersion": "strata/v1", "kind": "ServingQuotas", "tenants": []}`,
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, "shared"), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(testbed.Context(t))
		defer stop()
		var out, logs syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"strata-bridge", "-c", filepath.Join(dir, "bridge.yaml"), "run"}, &out, &logs)
		}()
		defer func() {
			if t.Failed() {
				t.Logf("daemon log:\n%s", logs.String())
			}
		}()

		anon := func(method, path, body string) (int, string) {
			req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(data)
		}
		get := func(method, path, body string) (int, string) {
			req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+apiToken)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(data)
		}
		end := time.Now().Add(30 * time.Second)
		code, body := 0, ""
		for time.Now().Before(end) {
			if code, body = get("GET", "/healthz", ""); code == http.StatusOK {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if code != http.StatusOK || !strings.Contains(body, `"ok": true`) {
			t.Fatalf("/healthz = %d %s, want healthy after the first poll", code, body)
		}
		code, body = get("GET", "/metrics", "")
		if code != http.StatusOK || !strings.Contains(body, `strata_build_info{goversion=`) ||
			strings.Contains(body, "strata_bridge_last_poll_timestamp_seconds 0\n") || !strings.Contains(body, "strata_bridge_poll_errors_total 0") {
			t.Errorf("/metrics = %d, want the build, a poll time and no poll errors:\n%s", code, body)
		}
		code, body = get("GET", "/v1/deployments", "")
		if code != http.StatusOK || !strings.Contains(body, `"deployments": []`) {
			t.Errorf("GET /v1/deployments = %d %s", code, body)
		}
		if code, body = anon("GET", "/v1/deployments", ""); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET /v1/deployments = %d %s, want 401", code, body)
		}
		if code, body = anon("POST", "/v1/deploy", `{"job": 999999999}`); code != http.StatusUnauthorized {
			t.Errorf("anonymous POST /v1/deploy = %d %s, want 401", code, body)
		}
		code, body = get("POST", "/v1/deploy", `{"job": 999999999}`)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"check": "job"`) ||
			!strings.Contains(body, "slurmctld does not know job 999999999") {
			t.Errorf("POST /v1/deploy of an unknown job = %d %s, want a job refusal", code, body)
		}
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run returned %v after the stop", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("run did not stop 20 s after the stop")
		}
		if l := logs.String(); !strings.Contains(l, "strata-bridge starting") || !strings.Contains(l, "stopped") {
			t.Errorf("daemon log lacks its start or stop:\n%s", l)
		}
	})
}
