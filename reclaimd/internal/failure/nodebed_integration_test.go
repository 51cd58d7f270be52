//go:build integration

package failure

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestOOMOnNodeBed: on the node bed (a node under its own kernel, memory
// confined by cgroup v2) a job that allocates past its --mem is killed by
// the kernel's OOM killer, Slurm records OUT_OF_MEMORY, and recovery
// classes Slurm's record as oom, blames no node, and does not retry it.
func TestOOMOnNodeBed(t *testing.T) {
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		c := b.Client(t)
		ctx := testbed.Context(t)
		b.NodeSh(t, "dmesg -C") // the kernel log then holds this job's OOM kill alone
		// tail keeps a whole line in memory, and /dev/zero has no newline:
		// 256 MiB in a 64 MiB job.
		id := b.Sbatch(t, "alice", "-c1", "--mem=64M", "--wrap", "head -c 256M /dev/zero | tail >/dev/null; echo survived")
		j := testbed.WaitJob(t, c, id, 2*time.Minute, "ended", func(j slurmrest.Job) bool {
			return !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING") && !j.State.Has("CONFIGURING")
		})
		if !j.State.Has("OUT_OF_MEMORY") {
			t.Fatalf("job %d ended %v (exit %d, signal %d), want OUT_OF_MEMORY", id, j.State, j.ExitCode, j.ExitSignal)
		}
		// The kernel's own record: a memory cgroup OOM kill of the job's
		// process (alice's), and slurmstepd's reading of its cgroup.
		if log := b.NodeSh(t, "dmesg"); !strings.Contains(log, "constraint=CONSTRAINT_MEMCG") ||
			!strings.Contains(log, "Memory cgroup out of memory: Killed process") || !strings.Contains(log, "uid=26002") {
			t.Errorf("the node's kernel log has no memory cgroup OOM kill of alice's process:\n%s", tail(log, 20))
		}
		if log := b.NodeSh(t, "cat /var/log/slurm/slurmd-*.log"); !strings.Contains(log, "oom_kill event in StepId="+strconv.FormatInt(id, 10)+".batch") {
			t.Errorf("slurmd's log has no OOM kill event for job %d:\n%s", id, tail(log, 20))
		}

		nodes, err := c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var down []string
		for _, n := range nodes {
			if slices.ContainsFunc(n.State, func(st string) bool { return st == "DOWN" || st == "FAIL" || st == "FAILING" }) {
				down = append(down, n.Name)
			}
		}
		res, ok := Classify(Input{Run: Run{JobID: j.ID, State: j.State, StateReason: j.StateReason, ExitCode: j.ExitCode,
			ExitSignal: j.ExitSignal, Nodes: j.Nodes, Start: j.StartTime, End: j.EndTime}, DownNodes: down,
			ApplicationXids: DefaultApplicationXids}, nil)
		if !ok || res.Class != OOM {
			t.Fatalf("Slurm's record %v classed %q (ok %v), want %q", j.State, res.Class, ok, OOM)
		}
		if res.Evidence.Node != "" || len(res.Evidence.DownNodes) > 0 {
			t.Errorf("the OOM blames node %q (down %v): it is the job's fault, not the node's", res.Evidence.Node, res.Evidence.DownNodes)
		}
		rule, _ := reclaimrules.Rules{Recovery: []reclaimrules.Recovery{{Name: "nodebed"}}}.RecoveryFor(reclaimrules.JobInfo{})
		if d := Decide(res, Job{Rule: rule, HasRule: true, Account: j.Account}); d.Action == Retry || len(d.Exclude) > 0 {
			t.Errorf("recovery decided %+v for an OOM: want no retry and no node excluded", d)
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
