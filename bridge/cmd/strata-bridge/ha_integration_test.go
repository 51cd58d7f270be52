//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/internal/proctest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// daemonProc is one strata-bridge run process.
type daemonProc struct {
	name string
	addr string
	cmd  *exec.Cmd
	log  *syncBuffer
}

func (d *daemonProc) get(ctx context.Context, path string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// role is the bridge's role as /healthz says it ("" while it does not
// answer).
func (d *daemonProc) role(ctx context.Context) string {
	code, body := d.get(ctx, "/healthz")
	var h struct {
		Detail struct {
			Lease store.LeaseState `json:"lease"`
		} `json:"detail"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil {
		return ""
	}
	return h.Detail.Lease.Role
}

// deploy posts a deploy of job and sends the answer's code on the
// returned channel.
func (d *daemonProc) deploy(ctx context.Context, job int64, token string) <-chan string {
	out := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.addr+"/v1/deploy", strings.NewReader(fmt.Sprintf(`{"job": %d}`, job)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- err.Error()
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		out <- fmt.Sprintf("%d %s", resp.StatusCode, data)
	}()
	return out
}

// runConfig is the configuration of a `strata-bridge run` on PostgreSQL
// (database, its password in DIR/db.password) with a 3 s lease, against
// the Slurm bed b and the Kubernetes bed (kc), listening on addr, its
// files in dir.
func runConfig(b *testbed.Bed, dir, kc, runtimes, addr, database string) string {
	return strings.NewReplacer("URL", b.URL, "USER", b.AdminUser, "DIR", dir, "KUBECONFIG", kc, "RUNTIMES", runtimes,
		"LISTEN", addr, "DATABASE", database).Replace(`apiVersion: strata/v1
kind: BridgeConfig
slurm: {url: URL, user: USER, token_file: DIR/bridge.jwt, poll_interval: 5s}
kubernetes: {kubeconfig: KUBECONFIG, rollout_timeout: 60s}
policy: {serving_file: DIR/serving.json}
models:
  allowed_roots: [DIR/shared]
  mount: {kind: hostPath, path: /srv/shared, root: DIR/shared}
runtimes: {dir: RUNTIMES}
store: {path: DIR/unused.db, database: "DATABASE", database_password_file: DIR/db.password, lease_ttl: 3s}
listen: LISTEN
api: {token_file: DIR/bridge-api.token}
`)
}

// TestTwoBridgesFailOver: two `strata-bridge run` processes on one
// PostgreSQL database, against a Slurm test bed and the Kubernetes test
// bed. One is active, the other stands by (its /healthz says so). The
// active one is paused (SIGSTOP) in the middle of a deploy, once its
// Deployment is in the cluster: the standby takes the lease over within
// the configured time, finishes the deploy, and the paused one, woken
// (SIGCONT), makes no call and records nothing: its request is answered
// 503. Then the new active one is killed (SIGKILL) in the middle of a
// deploy, and the first finishes that one. Each deploy has one outcome
// and one event, and its Deployment is the one first created.
//
// The jobs are versions recorded beforehand for job ids slurmctld does
// not know (the path of a job it forgot: the stored spec is deployed).
func TestTwoBridgesFailOver(t *testing.T) {
	kc := kubeconfig(t)
	rc := kubetest.Config(t)
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
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ns := kubetest.Namespace(t, rc, "bridgeha")
	runtimes, _ := filepath.Abs("../../../etc/strata/bridge/runtimes")
	jwt, err := os.ReadFile(b.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	const apiToken = "integration-api-token"
	const ttl = 3 * time.Second
	files := map[string]string{
		"bridge.jwt":       string(jwt),
		"bridge-api.token": apiToken + "\n",
		"serving.json": fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "ServingQuotas", "tenants": [
			{"name": "acme", "namespace": %q, "gpus": 4, "replicas": 4, "projects": [{"name": "llm", "account": "acme-llm"}]}]}`, ns),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pw, err := os.ReadFile(pg.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "db.password"), pw, 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")

	// Two versions, recorded as a bridge of an earlier generation left
	// them (failed), for job ids slurmctld does not know.
	jobs := map[string]int64{"alpha": 990000101, "beta": 990000102}
	seed, err := store.OpenDatabase(ctx, store.Database{URL: pg.URL, PasswordFile: pg.PasswordFile})
	if err != nil {
		t.Fatal(err)
	}
	defer seed.Close()
	seedLease := seed.NewLease("seed", ttl)
	seed.SetLease(seedLease)
	if ok, err := seedLease.Acquire(ctx); !ok || err != nil {
		t.Fatalf("seed lease: %v %v", ok, err)
	}
	for name, job := range jobs {
		model := filepath.Join(shared, name, "model")
		if err := os.MkdirAll(model, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(model, "weights.bin"), []byte("weights of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		v := store.Version{JobID: job, Name: name, Namespace: ns, Tenant: "acme", Project: "llm", Account: "acme-llm", User: "alice",
			GPUs: 1, Tier: "dedicated", MaxReplicas: 1, ModelPath: model,
			Spec:      json.RawMessage(fmt.Sprintf(`{"name": %q, "model": %q, "runtime": "vllm", "gpus": 1}`, name, model)),
			CreatedAt: time.Now()}
		if err := seed.StartVersion(ctx, v, "deploy"); err != nil {
			t.Fatal(err)
		}
		if err := seed.FinishVersion(ctx, store.Finish{Name: name, JobID: job, Action: "deploy", Outcome: store.OutcomeFailed,
			Message: "recorded by the test", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := seedLease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	start := func(name string) *daemonProc {
		addr := freeAddr(t)
		cfg := runConfig(b, dir, kc, runtimes, addr, pg.URL)
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		d := &daemonProc{name: name, addr: addr, log: &syncBuffer{}}
		d.cmd = exec.Command(bin, "-c", file, "run")
		d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = d.cmd.Process.Signal(syscall.SIGCONT)
			_ = d.cmd.Process.Kill()
			_ = d.cmd.Wait()
			if t.Failed() {
				t.Logf("bridge %s's log:\n%s", name, d.log.String())
			}
		})
		return d
	}
	waitRole := func(d *daemonProc, role string, within time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		for d.role(ctx) != role {
			if time.Since(begin) > within {
				code, body := d.get(ctx, "/healthz")
				t.Fatalf("bridge %s is not %s after %s: /healthz %d %s", d.name, role, within, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(begin)
	}
	apps := appsv1client.NewForConfigOrDie(rc)
	// inTheMiddle waits until name's Deployment is in the cluster: the
	// deploy is under way, its rollout not recorded.
	inTheMiddle := func(name string) (uid string) {
		t.Helper()
		end := time.Now().Add(time.Minute)
		for time.Now().Before(end) {
			if d, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				return string(d.UID)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no Deployment %s within a minute", name)
		return ""
	}
	// applying checks that the deploy of name is under way: stopped too
	// late, the test would prove nothing.
	applying := func(name string) {
		t.Helper()
		if v, err := seed.Version(ctx, jobs[name]); err != nil || v.Outcome != store.OutcomeApplying {
			t.Fatalf("%s when its bridge stopped: %q, %v; want applying (stopped too late)", name, v.Outcome, err)
		}
	}
	// once checks that the deploy of name was finished once, ready, by
	// a bridge of generation gen, on the Deployment first created.
	once := func(name, uid string) {
		t.Helper()
		v, err := seed.Version(ctx, jobs[name])
		if err != nil || v.Outcome != store.OutcomeReady {
			t.Errorf("%s: version %q %q, %v; want ready", name, v.Outcome, v.Message, err)
		}
		ev, err := seed.Events(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		var ready int
		for _, e := range ev {
			if e.Action == "deploy" && e.Outcome == store.OutcomeReady {
				ready++
			}
		}
		if len(ev) != 2 || ready != 1 {
			t.Errorf("%s: history %+v; want the recorded one and one ready deploy", name, ev)
		}
		d, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || string(d.UID) != uid || d.Generation != 1 {
			t.Errorf("%s: Deployment %v, %v; want uid %s, applied once (generation 1)", name, d, err, uid)
		}
	}

	a := start("a")
	waitRole(a, store.RoleActive, time.Minute)
	s := start("b")
	waitRole(s, store.RoleStandby, time.Minute)
	if code, body := s.get(ctx, "/metrics"); code != http.StatusOK || !strings.Contains(body, "strata_bridge_lease_held 0") ||
		!strings.Contains(body, "strata_bridge_last_poll_timestamp_seconds 0\n") {
		t.Errorf("the standby's metrics: not held, no poll of slurmrestd: %d\n%s", code, body)
	}

	// a is paused in the middle of deploying alpha.
	answer := a.deploy(ctx, jobs["alpha"], apiToken)
	uid := inTheMiddle("alpha")
	proctest.Pause(t, a.cmd.Process, 10*time.Second)
	applying("alpha")
	took := waitRole(s, store.RoleActive, 30*time.Second)
	t.Logf("b took over and finished alpha %s after a was paused", took)
	once("alpha", uid)
	before, err := apps.Deployments(ns).Get(ctx, "alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-answer:
		if !strings.HasPrefix(got, "503 ") || !strings.Contains(got, "no longer holds the lease") {
			t.Errorf("the paused bridge's answer: %s; want 503, the lease lost", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the paused bridge did not answer within 30 s of waking")
	}
	waitRole(a, store.RoleStandby, 10*time.Second)
	time.Sleep(ttl)
	after, err := apps.Deployments(ns).Get(ctx, "alpha", metav1.GetOptions{})
	if err != nil || after.Generation != before.Generation {
		t.Errorf("alpha changed after the paused bridge woke: generation %d→%d", before.Generation, after.Generation)
	}
	once("alpha", uid)

	// b is killed in the middle of deploying beta.
	_ = s.deploy(ctx, jobs["beta"], apiToken)
	uid = inTheMiddle("beta")
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	applying("beta")
	took = waitRole(a, store.RoleActive, 30*time.Second)
	t.Logf("a took over and finished beta %s after b was killed", took)
	once("beta", uid)
	if code, body := a.get(ctx, "/metrics"); !strings.Contains(body, "strata_bridge_lease_held 1") ||
		!strings.Contains(body, `strata_bridge_resumed_total{outcome="ready"} 1`) {
		t.Errorf("a's metrics after the take-over: %d\n%s", code, body)
	}
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("a after SIGTERM: %v", err)
	}
	if l := a.log.String(); !strings.Contains(l, "lease released") {
		t.Errorf("a did not release its lease on SIGTERM:\n%s", l)
	}
}
