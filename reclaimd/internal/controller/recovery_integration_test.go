//go:build integration

package controller_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// recoveryBedRules retry every class by its defaults (node_fail twice
// excluding the node, nccl once excluding its nodes, user_error never).
const recoveryBedRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [],
  "recovery": [{"name": "all", "match": {}}]}`

// recoveryCtl is a controller over a test bed, reading stderr beneath
// the bed's root, its notices kept.
type recoveryCtl struct {
	ctl *controller.Controller
	st  *store.Store
	c   *slurmrest.Client

	mu      sync.Mutex
	notices []controller.Notice
}

func newRecoveryCtl(t *testing.T, b *testbed.Bed) *recoveryCtl {
	t.Helper()
	ctx := testbed.Context(t)
	rules, err := reclaimrules.Parse([]byte(recoveryBedRules))
	if err != nil {
		t.Fatal(err)
	}
	r := &recoveryCtl{c: b.Client(t)}
	if r.st, err = store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.st.Close() })
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var n controller.Notice
		_ = json.NewDecoder(req.Body).Decode(&n)
		r.mu.Lock()
		r.notices = append(r.notices, n)
		r.mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	urls := replayAgents(t, b, nil)
	r.ctl, err = controller.New(controller.Config{Slurm: r.c, Store: r.st, Rules: func() reclaimrules.Rules { return rules },
		Collector: &collect.Agents{URL: urls, Secret: agentSecret}, Notifier: notify.Webhook{URL: hook.URL},
		Recovery: controller.Recovery{LogRoot: b.Root},
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cycleUntil runs cycles every 3 s until the job has n failures.
func (r *recoveryCtl) cycleUntil(t *testing.T, id int64, n int, timeout time.Duration) []store.Failure {
	t.Helper()
	ctx := testbed.Context(t)
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if _, err := r.ctl.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		fs, err := r.st.JobFailures(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) >= n {
			return fs
		}
		time.Sleep(3 * time.Second)
	}
	j, _ := r.c.Job(ctx, id)
	t.Fatalf("job %d: %d failures wanted in %s; job %v %q restarts %d", id, n, timeout, j.State, j.StateReason, j.RestartCount)
	return nil
}

func (r *recoveryCtl) noticesOf(id int64) []controller.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []controller.Notice
	for _, n := range r.notices {
		if n.JobID == id {
			out = append(out, n)
		}
	}
	return out
}

// submitScript submits script as alice, requeueable, stderr to its own
// file in the job folder, on node when given, with gpus GPUs.
func submitScript(t *testing.T, c *slurmrest.Client, b *testbed.Bed, name, script, node string, gpus int) int64 {
	t.Helper()
	spec := slurmrest.JobSpec{Name: name, Script: script, Account: b.Account, Partition: b.Partition,
		TRESPerNode: fmt.Sprintf("gres/gpu:%d", gpus), NodeList: node, TimeLimit: 10 * time.Minute, WorkDir: b.JobDir,
		StdOut: b.JobDir + "/" + name + ".out", StdErr: b.JobDir + "/" + name + "-%j.err", Requeue: ptr(true)}
	res, err := c.Submit(testbed.Context(t), "alice", spec)
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Cancel(testbed.Context(t), res.JobID) })
	return res.JobID
}

func TestRecoveryUserErrorOnBed(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		r := newRecoveryCtl(t, b)
		id := submitScript(t, r.c, b, testbed.Unique("exit1"), "#!/bin/sh\necho 'ValueError: bad input' >&2\nexit 1\n", "", 1)
		fs := r.cycleUntil(t, id, 1, 2*time.Minute)
		if fs[0].Class != "user_error" || fs[0].Action != "leave" {
			t.Fatalf("failure %+v, want user_error left", fs[0])
		}
		j, err := r.c.Job(testbed.Context(t), id)
		if err != nil || j.RestartCount != 0 || !j.State.Has("FAILED") {
			t.Errorf("job %+v %v: retried", j, err)
		}
		ns := r.noticesOf(id)
		if len(ns) != 1 || ns[0].Action != controller.NoticeNotRetried || strings.Join(ns[0].StderrTail, "\n") != "ValueError: bad input" {
			t.Errorf("notices %+v, want one not-retried with the stderr tail", ns)
		}
	})
}

const ncclScript = `#!/bin/sh
echo "step 100 loss 2.31"
echo "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600351 milliseconds before timing out." >&2
exit 1
`

// An NCCL watchdog timeout: retried once excluding its node; failing the
// same way again (elsewhere), its retries are used up and it is held.
func TestRecoveryNCCLRetriedThenHeldOnBed(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		r := newRecoveryCtl(t, b)
		id := submitScript(t, r.c, b, testbed.Unique("nccl"), ncclScript, "", 1)
		fs := r.cycleUntil(t, id, 1, 2*time.Minute)
		var ev struct {
			Nodes []string `json:"nodes"`
		}
		if err := json.Unmarshal(fs[0].Evidence, &ev); err != nil || len(ev.Nodes) != 1 {
			t.Fatalf("evidence %s: %v", fs[0].Evidence, err)
		}
		node := ev.Nodes[0]
		if fs[0].Class != "nccl" || fs[0].Action != "retry" {
			t.Fatalf("failure %+v, want nccl retried", fs[0])
		}
		j := testbed.WaitJob(t, r.c, id, 30*time.Second, "requeued", func(j slurmrest.Job) bool { return j.RestartCount == 1 })
		if !strings.Contains(j.ExcludedNodes, node) || !strings.Contains(j.AdminComment, "strata: retry 1/1 after nccl on "+node) {
			t.Errorf("retried job: excluded %q, admin comment %q", j.ExcludedNodes, j.AdminComment)
		}
		// The retry fails the same way on another node: held.
		fs = r.cycleUntil(t, id, 2, 3*time.Minute)
		if fs[1].Class != "nccl" || fs[1].Action != "hold" {
			t.Fatalf("second failure %+v, want nccl held", fs[1])
		}
		j, err := r.c.Job(ctx, id)
		if err != nil || !j.State.Has("PENDING") || !strings.Contains(j.AdminComment, "strata: retries exhausted") {
			t.Errorf("job %v %q %q: want held with a strata: reason (%v)", j.State, j.StateReason, j.AdminComment, err)
		}
		var actions []string
		for _, n := range r.noticesOf(id) {
			actions = append(actions, n.Action)
		}
		if strings.Join(actions, ",") != "retry,retry-hold" {
			t.Errorf("notices %v, want retry, retry-hold", actions)
		}
	})
}

func TestRecoveryOwnerCancelledOnBed(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		r := newRecoveryCtl(t, b)
		id := submitScript(t, r.c, b, testbed.Unique("cancel"), "#!/bin/sh\nsleep 600\n", "", 1)
		testbed.WaitJob(t, r.c, id, time.Minute, "running", slurmrest.Job.Running)
		if _, err := r.ctl.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		scancelAs(t, b, "alice", id)
		fs := r.cycleUntil(t, id, 1, time.Minute)
		if fs[0].Class != "cancelled" || fs[0].Action != "leave" {
			t.Fatalf("failure %+v, want cancelled left", fs[0])
		}
		j, err := r.c.Job(ctx, id)
		if err != nil || j.RestartCount != 0 || !j.State.Has("CANCELLED") {
			t.Errorf("job %v restarts %d (%v): an owner's cancel was undone", j.State, j.RestartCount, err)
		}
	})
}

func scancelAs(t *testing.T, b *testbed.Bed, user string, id int64) {
	t.Helper()
	signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := signer.Token(testbed.Context(t), user)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testbed.Context(t), filepath.Join(b.Bin, "scancel"), strconv.FormatInt(id, 10))
	cmd.Env = []string{"SLURM_JWT=" + tok}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scancel %d as %s: %v: %s", id, user, err, out)
	}
}

// A requeueable 2-GPU job whose node's slurmd dies: Slurm requeues it
// when the node goes down; reclaimd classes it node_fail and excludes the
// node, and it runs elsewhere.
func TestRecoveryNodeFailOnBed(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		r := newRecoveryCtl(t, b)
		id := submitScript(t, r.c, b, testbed.Unique("nodefail"), "#!/bin/sh\nsleep 600\n", "", 2)
		running := testbed.WaitJob(t, r.c, id, time.Minute, "running", slurmrest.Job.Running)
		node := running.Nodes[0]
		if _, err := r.ctl.Cycle(ctx); err != nil { // the run is seen on its node
			t.Logf("cycle: %v", err)
		}
		killSlurmd(t, b, node)
		// SlurmdTimeout is 60 s on the beds.
		fs := r.cycleUntil(t, id, 1, 4*time.Minute)
		if fs[0].Class != "node_fail" || fs[0].Action != "retry" {
			t.Fatalf("failure %+v, want node_fail retried", fs[0])
		}
		j := testbed.WaitJob(t, r.c, id, 2*time.Minute, "running elsewhere", func(j slurmrest.Job) bool { return j.Running() })
		if slicesContains(j.Nodes, node) || !strings.Contains(j.ExcludedNodes, node) {
			t.Errorf("job runs on %v, excluded %q: want %s excluded", j.Nodes, j.ExcludedNodes, node)
		}
		if !strings.Contains(j.AdminComment, "strata: retry 1/2 after node_fail on "+node) {
			t.Errorf("admin comment %q", j.AdminComment)
		}
		r.cycleUntil(t, id, 1, 10*time.Second)
		if fs, _ := r.st.JobFailures(ctx, id); fs[0].RunningAgain == nil {
			t.Error("the failure is not marked over once the job runs again")
		}
	})
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// killSlurmd kills node's slurmd; when the test ends it is started again
// as the bed starts it, and the test waits for the node to come back.
func killSlurmd(t *testing.T, b *testbed.Bed, node string) {
	t.Helper()
	inst := filepath.Dir(b.Root)
	pidFile := filepath.Join(inst, "pids", "slurmd-"+node+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pid)); err != nil || root != b.Root {
		t.Fatalf("pid %d is not the bed's slurmd (root %q, %v)", pid, root, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logf, err := os.Create(filepath.Join(inst, "logs", "slurmd-"+node+".out"))
		if err != nil {
			t.Error(err)
			return
		}
		defer logf.Close()
		cmd := exec.Command("env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root", "chroot", b.Root,
			"/usr/sbin/slurmd", "-D", "-N", node)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Errorf("start slurmd %s again: %v", node, err)
			return
		}
		_ = os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
		_ = cmd.Process.Release()
		c := b.Client(t)
		end := time.Now().Add(2 * time.Minute)
		for time.Now().Before(end) {
			nodes, _ := c.Nodes(testbed.Context(t))
			for _, n := range nodes {
				if n.Name == node && !slicesContains(n.State, "DOWN") && !slicesContains(n.State, "NOT_RESPONDING") {
					return
				}
			}
			time.Sleep(2 * time.Second)
		}
		t.Errorf("node %s did not come back after its slurmd was started again", node)
	})
}
