//go:build integration

package nodebed

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// gpuProbe prints what a job sees of the node's GPUs, then waits until
// the test lets it end (the file $1.release) so that jobs overlap.
const gpuProbe = `echo "CVD=$CUDA_VISIBLE_DEVICES"
echo "JOBGPUS=$SLURM_JOB_GPUS"
for d in /dev/fakegpu*; do
  if err=$(head -c0 "$d" 2>&1); then echo "OPEN $d ok"; else echo "OPEN $d ${err##*: }"; fi
done
echo PROBED
i=0; while [ ! -e "$0.release" ] && [ $i -lt 180 ]; do sleep 1; i=$((i+1)); done
`

var openRE = regexp.MustCompile(`(?m)^OPEN /dev/fakegpu(\d+) (.*)$`)

// TestGPUIsolation: two tenants' jobs on the node at once, one GPU each.
// Each sees CUDA_VISIBLE_DEVICES for its GPU alone, and the device cgroup
// lets it open only that GPU's device: the others fail with EPERM. (No
// driver answers the fake GPUs, so an allowed open ends in ENXIO, which
// only a device the cgroup let through can reach.)
func TestGPUIsolation(t *testing.T) {
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		c := b.Client(t)
		type run struct {
			user, out string
			id        int64
			gpu       int
		}
		var runs []*run
		for _, user := range []string{"alice", "bob"} {
			r := &run{user: user, out: b.JobDir + "/" + testbed.Unique("gpu-"+user) + ".out"}
			r.id = b.Sbatch(t, user, "-o", r.out, "-c1", "--mem=32M", "--gres=gpu:"+b.GPUType+":1",
				"--wrap", fmt.Sprintf("sh -c %s %s", shQuote(gpuProbe), r.out))
			j := testbed.WaitJob(t, c, r.id, 90*time.Second, "running", func(j slurmrest.Job) bool { return j.Running() })
			if len(j.GPUs) != 1 {
				t.Fatalf("job %d of %s holds GPUs %v, want one", r.id, user, j.GPUs)
			}
			r.gpu = j.GPUs[0].Index
			runs = append(runs, r)
			// The second job starts while the first holds its GPU:
			// Slurm gives it the next one (index 1).
			b.NodeWaitFile(t, r.out, "PROBED", 90*time.Second)
		}
		t.Cleanup(func() {
			for _, r := range runs {
				b.NodeExec(t, nil, "touch", r.out+".release")
			}
		})
		if runs[0].gpu == runs[1].gpu {
			t.Fatalf("both jobs hold GPU %d", runs[0].gpu)
		}
		if runs[1].gpu != 1 {
			t.Errorf("bob's job holds GPU %d, want 1 (alice's holds %d)", runs[1].gpu, runs[0].gpu)
		}
		enxio, eperm := syscall.ENXIO.Error(), syscall.EPERM.Error()
		for _, r := range runs {
			out := b.NodeWaitFile(t, r.out, "PROBED", time.Second)
			// With ConstrainDevices the job's one GPU is CUDA's device 0;
			// SLURM_JOB_GPUS names it on the node.
			if !strings.Contains(out, "CVD=0\n") || !strings.Contains(out, "JOBGPUS="+strconv.Itoa(r.gpu)+"\n") {
				t.Errorf("%s's job (GPU %d) sees:\n%s\nwant CUDA_VISIBLE_DEVICES=0 and SLURM_JOB_GPUS=%d", r.user, r.gpu, out, r.gpu)
			}
			opens := openRE.FindAllStringSubmatch(out, -1)
			if len(opens) != b.GPUsPerNode {
				t.Fatalf("%s's job probed %d devices, want %d:\n%s", r.user, len(opens), b.GPUsPerNode, out)
			}
			for _, m := range opens {
				i, _ := strconv.Atoi(m[1])
				want := eperm
				if i == r.gpu {
					want = enxio
				}
				if !strings.EqualFold(m[2], want) {
					t.Errorf("%s's job (GPU %d) opening /dev/fakegpu%d: %q, want %q", r.user, r.gpu, i, m[2], want)
				}
			}
		}
	})
}

// TestCoresConfined: a job given one core runs on that core alone: its
// cgroup's cpuset and its affinity hold one CPU, and moving itself to
// another fails.
func TestCoresConfined(t *testing.T) {
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		out := b.JobDir + "/" + testbed.Unique("cores") + ".out"
		script := `cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "CPUSET=$(cat "$cg/cpuset.cpus.effective")"
echo "ALLOWED=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
echo "NPROC=$(nproc)"
for c in $(seq 0 $(($(nproc --all) - 1))); do
  if taskset -c "$c" true 2>/dev/null; then echo "MOVE $c ok"; else echo "MOVE $c refused"; fi
done
echo DONE`
		id := b.Sbatch(t, "alice", "-o", out, "-c1", "--mem=32M", "--wrap", "sh -c "+shQuote(script))
		testbed.WaitJob(t, b.Client(t), id, 90*time.Second, "ended", func(j slurmrest.Job) bool { return j.State.Has("COMPLETED") })
		got := b.NodeWaitFile(t, out, "DONE", 10*time.Second)
		kv := map[string]string{}
		moves := map[string]string{}
		for _, line := range strings.Split(got, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				kv[k] = v
			}
			if f := strings.Fields(line); len(f) == 3 && f[0] == "MOVE" {
				moves[f[1]] = f[2]
			}
		}
		cpu := kv["CPUSET"]
		if _, err := strconv.Atoi(cpu); err != nil || kv["ALLOWED"] != cpu || kv["NPROC"] != "1" {
			t.Fatalf("a 1-core job's cpuset %q, affinity %q, nproc %q; want one CPU in all three:\n%s", cpu, kv["ALLOWED"], kv["NPROC"], got)
		}
		if len(moves) < 2 {
			t.Fatalf("the node has %d CPUs: the test needs two (testbed.sh --node-vm gives the VM 2):\n%s", len(moves), got)
		}
		for c, res := range moves {
			want := "refused"
			if c == cpu {
				want = "ok"
			}
			if res != want {
				t.Errorf("the job moving itself to CPU %s: %s, want %s (its CPU is %s)", c, res, want, cpu)
			}
		}
	})
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
