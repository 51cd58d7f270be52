//go:build integration

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// gpuLostScript runs until the test says its GPU is lost on the node it
// runs on (a file named for the node in the job folder), then fails as
// a CUDA program does when its GPU falls off the bus: the next CUDA call
// errors and the program exits non-zero. On another node it runs on.
const gpuLostScript = `#!/bin/sh
while [ ! -e "%s/$SLURMD_NODENAME" ]; do sleep 1; done
echo "RuntimeError: CUDA error: unspecified launch failure" >&2
exit 1
`

// A requeueable job runs on gpu3 (gpu1 and gpu2 are full); an Xid 79 on
// its GPU reaches the controller through the agent's fault file, and the
// job's program fails of it. gpu3 is drained, the run classed gpu_fault
// and requeued excluding gpu3, and it runs on another node; gpu3's
// health command passes once the job has left, and gpu3 is resumed.
func TestGPUFaultRetriedElsewhereOnBed(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		b.DumpLogsOnFailure(t)
		ctx := testbed.Context(t)
		c := b.Client(t)
		if len(b.Nodes) < 4 {
			t.Skipf("bed %s has %d nodes: the test fills two, fails one and moves to a fourth", b.Name, len(b.Nodes))
		}
		for _, n := range b.Nodes {
			if st := nodeNamed(t, c, n); slices.Contains(st.State, "DRAIN") {
				t.Fatalf("%s is drained before the test (%q): resume it first", n, st.Reason)
			}
		}
		t.Cleanup(func() {
			for _, n := range b.Nodes {
				if st := nodeNamed(t, c, n); slices.Contains(st.State, "DRAIN") && strings.HasPrefix(st.Reason, "strata: ") {
					_ = c.UpdateNode(context.Background(), n, slurmrest.NodeResume, "")
				}
			}
		})

		urls, faultFile := faultAgents(t, b)
		dir := t.TempDir()
		check := filepath.Join(dir, "check")
		if err := os.WriteFile(check, []byte("#!/bin/sh\necho \"diag of $1: pass\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		rules, err := reclaimrules.Parse([]byte(recoveryBedRules))
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: urls, Secret: agentSecret},
			Health: &controller.Health{FatalXids: controller.DefaultFatalXids, MaxDrainedShare: 0.25, MaxFaultAge: time.Hour,
				Check: []string{check, "{node}"}, CheckInterval: time.Minute, CheckTimeout: 30 * time.Second},
			Recovery: controller.Recovery{LogRoot: b.Root},
			Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err != nil {
			t.Fatal(err)
		}
		// cycleUntil runs a cycle every 2 s until done says so.
		cycleUntil := func(what string, timeout time.Duration, done func() bool) {
			t.Helper()
			end := time.Now().Add(timeout)
			for {
				if _, err := ctl.Cycle(ctx); err != nil {
					t.Logf("cycle: %v", err)
				}
				ctl.WaitHealthChecks()
				if done() {
					return
				}
				if time.Now().After(end) {
					t.Fatalf("not %s within %s", what, timeout)
				}
				time.Sleep(2 * time.Second)
			}
		}

		// gpu1 and gpu2 full: the job goes to gpu3.
		for _, n := range b.Nodes[:2] {
			submitScript(t, c, b, testbed.Unique("fill-"+n), "#!/bin/sh\nsleep 600\n", n, b.GPUsPerNode)
		}
		name := testbed.Unique("gpulost")
		lost := b.JobDir + "/" + name + "-lost"
		if err := os.MkdirAll(filepath.Join(b.Root, lost), 0o755); err != nil {
			t.Fatal(err)
		}
		id := submitScript(t, c, b, name, fmt.Sprintf(gpuLostScript, lost), "", 1)
		j := testbed.WaitJob(t, c, id, time.Minute, "running", slurmrest.Job.Running)
		if len(j.GPUs) != 1 {
			t.Fatalf("job %d runs on %v with GPUs %+v: want one GPU", id, j.Nodes, j.GPUs)
		}
		node, gpu := j.GPUs[0].Node, j.GPUs[0].Index
		if node != b.Nodes[2] {
			t.Logf("job %d runs on %s, not %s: the fault goes to its GPU there", id, node, b.Nodes[2])
		}
		cycleUntil("seen running", 10*time.Second, func() bool { return true })

		// The GPU falls off the bus: the driver logs Xid 79 and the
		// program's next CUDA call fails.
		f, err := os.OpenFile(faultFile(node), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "%d,xid,79\n", gpu)
		f.Close()
		injected := time.Now()
		if err := os.WriteFile(filepath.Join(b.Root, lost, node), nil, 0o644); err != nil {
			t.Fatal(err)
		}

		// The node as first seen drained: with no job left on it, its
		// health command runs (and passes) in the cycle that drains it,
		// and the next cycle may resume it.
		var drainedAt time.Time
		var drained slurmrest.Node
		var fs []store.Failure
		cycleUntil("classified", 2*time.Minute, func() bool {
			if n := nodeNamed(t, c, node); drainedAt.IsZero() && slices.Contains(n.State, "DRAIN") {
				drainedAt, drained = time.Now(), n
			}
			if fs, err = st.JobFailures(ctx, id); err != nil {
				t.Fatal(err)
			}
			return len(fs) > 0
		})
		classifiedAt := time.Now()
		if want := fmt.Sprintf("strata: Xid 79 on GPU %d (GPU fell off the bus)", gpu); drainedAt.IsZero() || drained.Reason != want {
			t.Errorf("%s after the Xid: drained %v, reason %q, want drained with %q", node, !drainedAt.IsZero(), drained.Reason, want)
		}
		if fs[0].Class != string(failure.GPUFault) || fs[0].Action != "retry" {
			t.Fatalf("failure %s %s %q (evidence %s), want gpu_fault retried", fs[0].Class, fs[0].Action, fs[0].Reason, fs[0].Evidence)
		}
		var ev failure.Evidence
		if err := json.Unmarshal(fs[0].Evidence, &ev); err != nil || ev.Node != node || ev.GPU == nil || *ev.GPU != gpu || ev.Xid != 79 {
			t.Errorf("evidence %s (%v), want %s GPU %d Xid 79", fs[0].Evidence, err, node, gpu)
		}

		var again slurmrest.Job
		cycleUntil("running again", 3*time.Minute, func() bool {
			again, err = c.Job(ctx, id)
			return err == nil && again.Running() && again.RestartCount == 1
		})
		runningAt := time.Now()
		t.Logf("Xid 79 on %s GPU %d to job %d running again on %v: %s (drained after %s, classed and requeued after %s)",
			node, gpu, id, again.Nodes, runningAt.Sub(injected).Round(100*time.Millisecond),
			drainedAt.Sub(injected).Round(100*time.Millisecond), classifiedAt.Sub(injected).Round(100*time.Millisecond))
		if slices.Contains(again.Nodes, node) || !strings.Contains(again.ExcludedNodes, node) {
			t.Errorf("job runs on %v, excluded %q: want %s excluded", again.Nodes, again.ExcludedNodes, node)
		}
		if want := fmt.Sprintf("strata: retry 1/2 after gpu_fault on %s (Xid 79)", node); !strings.Contains(again.AdminComment, want) {
			t.Errorf("admin comment %q, want %q", again.AdminComment, want)
		}

		// The job has left the node: its health command passes, and it is
		// resumed.
		cycleUntil(node+" resumed", 2*time.Minute, func() bool {
			return !slices.Contains(nodeNamed(t, c, node).State, "DRAIN")
		})
		if n := nodeNamed(t, c, node); n.Reason != "" {
			t.Errorf("%s resumed with reason %q", node, n.Reason)
		}
		cycleUntil("the failure over", 10*time.Second, func() bool { return true })
		if fs, _ := st.JobFailures(ctx, id); len(fs) != 1 || fs[0].RunningAgain == nil {
			t.Errorf("failures %+v: want the one, over once the job runs again", fs)
		}
	})
}

// faultAgents runs a replayed agent for every node of the bed, busy (no
// job is idle), each with a fault file, sampled every 2 s.
func faultAgents(t *testing.T, b *testbed.Bed) (url func(string) string, faultFile func(string) string) {
	t.Helper()
	ctx := testbed.Context(t)
	dir := t.TempDir()
	urls, files := map[string]string{}, map[string]string{}
	var agents []*agent.Agent
	for _, node := range b.Nodes {
		var csv strings.Builder
		csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib\n")
		for off := 0; off <= 10; off += 10 {
			for g := 0; g < b.GPUsPerNode; g++ {
				fmt.Fprintf(&csv, "%d,%d,90,45,2048\n", off, g)
			}
		}
		rec, err := source.ParseRecording(node, strings.NewReader(csv.String()))
		if err != nil {
			t.Fatal(err)
		}
		files[node] = filepath.Join(dir, node+"-faults.csv")
		a, err := agent.New(agent.Config{Node: node, Source: source.NewReplay(rec, time.Time{}, true),
			Faults: &source.FaultFile{Path: files[node]}, Interval: 2 * time.Second, Window: 5 * time.Minute,
			Procs: agent.ProcFS{Root: t.TempDir()}, Secret: agentSecret})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		srv := httptest.NewServer(a.Handler())
		t.Cleanup(srv.Close)
		urls[node] = srv.URL
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sample := func() {
		for _, a := range agents {
			if err := a.SampleOnce(ctx); err != nil {
				t.Errorf("agent sample: %v", err)
			}
		}
	}
	sample()
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	return func(n string) string { return urls[n] }, func(n string) string { return files[n] }
}
