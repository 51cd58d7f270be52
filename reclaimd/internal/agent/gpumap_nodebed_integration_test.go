//go:build integration

package agent_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// The rules of the GPU map test: a job idle for 1 min is warned, in a dry
// run (the job is never touched; the decision is what is checked).
const gpuMapRules = `{
  "apiVersion": "strata/v1", "kind": "ReclaimRules", "dry_run": true,
  "rules": [{
    "name": "map",
    "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
    "warn": "10m",
    "signal": {"name": "USR1", "wait": "1m"},
    "action": "requeue"
  }]
}`

// gpuMapJob probes which GPU device its cgroup lets it open (ENXIO: let
// through to a device no driver answers; EPERM: refused), says its pid,
// and waits for $1.release. It runs under a forged SLURM_JOB_ID: the
// agent must find its job from its cgroup, not from its environment.
const gpuMapJob = `echo "PID=$$"
for d in /dev/fakegpu*; do
  if err=$(head -c0 "$d" 2>&1); then echo "OPEN $d ok"; else echo "OPEN $d ${err##*: }"; fi
done
echo PROBED
i=0; while [ ! -e "$0.release" ] && [ $i -lt 300 ]; do sleep 1; i=$((i+1)); done
`

const forgedJobID = "4000000001"

var (
	openRE = regexp.MustCompile(`(?m)^OPEN /dev/fakegpu(\d+) (.*)$`)
	pidRE  = regexp.MustCompile(`(?m)^PID=(\d+)$`)
)

// reclaimdBinary builds reclaimd once for the test binary. The guests'
// C library (Debian 13 and testing) is newer than the build host's, so
// the host's cgo build runs in them.
var reclaimdBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "strata-reclaimd-nodebed-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "reclaimd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/strata-hpc/strata/reclaimd/cmd/reclaimd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build reclaimd: %w\n%s", err, out)
	}
	return bin, nil
})

// nodeTransport carries HTTP requests to a port on the node's loopback
// through the bed's exec agent (qemu forwards no other port): the
// request's bytes go to a socket in the guest, the answer's come back.
type nodeTransport struct {
	t    testing.TB
	b    *testbed.Bed
	port int
}

const relay = `import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(sys.stdin.buffer.read())
while True:
    c = s.recv(65536)
    if not c:
        break
    sys.stdout.buffer.write(c)
`

func (n nodeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Close = true
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		return nil, err
	}
	r := n.b.NodeExec(n.t, buf.Bytes(), "python3", "-c", relay, strconv.Itoa(n.port))
	if r.Code != 0 {
		return nil, fmt.Errorf("relay to the node's port %d: exit %d: %s", n.port, r.Code, r.Stderr)
	}
	return http.ReadResponse(bufio.NewReader(bytes.NewReader(r.Stdout)), req)
}

// restartSlurmd gives the node's slurmd the gres.conf and waits until the
// node is back, idle.
func restartSlurmd(t *testing.T, b *testbed.Bed, gres string) {
	t.Helper()
	b.NodeWriteFile(t, "/etc/slurm/gres.conf", []byte(gres), 0o644)
	b.NodeSh(t, `pid=$(pidof slurmd) && kill $pid && i=0 && while kill -0 $pid 2>/dev/null; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.2; done
setsid /usr/sbin/slurmd -D -N gpu1 >>/var/log/slurm/slurmd-gpu1.out 2>&1 </dev/null &
i=0; until scontrol -o show node gpu1 2>/dev/null | grep -q 'State=IDLE '; do i=$((i+1)); [ $i -lt 300 ] || exit 1; sleep 0.5; done`)
}

// TestGPUMapOnNodeBed: reclaimd's agent, the real binary on the node,
// maps a job's process to its job from the process's cgroup (on 26.05 a
// cgroup named by the job's SLUID, whose slurmstepd names the job), under
// an environment that claims another job. The GPU it holds is the device
// its cgroup lets it open. With gres.conf in the devices' order, the
// controller's cycle over Slurm's gres_detail and the agent's snapshot
// agrees and warns the idle job (dry run); with gres.conf's first two
// devices swapped, Slurm's GPU 0 is /dev/fakegpu1: the mismatch is
// reported and the job gets no action.
func TestGPUMapOnNodeBed(t *testing.T) {
	bin, err := reclaimdBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Compressed: the exec agent reads a request for at most 30 s, and
	// qemu's user network on a busy 2-core host is slow.
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		if b.GPUsPerNode < 2 {
			t.Fatalf("the node has %d GPUs: the test swaps two", b.GPUsPerNode)
		}
		node := b.Nodes[0]
		orig := b.NodeSh(t, "cat /etc/slurm/gres.conf")
		t.Cleanup(func() { restartSlurmd(t, b, orig) })
		b.NodeSh(t, "mkdir -p /etc/strata")
		if r := b.NodeExec(t, gz.Bytes(), "sh", "-c", "gunzip >/usr/local/sbin/reclaimd.tmp && chmod 755 /usr/local/sbin/reclaimd.tmp && mv /usr/local/sbin/reclaimd.tmp /usr/local/sbin/reclaimd"); r.Code != 0 {
			t.Fatalf("copy reclaimd to the node: exit %d: %s", r.Code, r.Stderr)
		}
		secret := []byte("node bed agent secret")
		b.NodeWriteFile(t, "/etc/strata/reclaimd-agent.token", secret, 0o600)

		var inOrder, swapped strings.Builder
		inOrder.WriteString("AutoDetect=off\n")
		swapped.WriteString("AutoDetect=off\n")
		for i := range b.GPUsPerNode {
			dev := i
			switch i {
			case 0:
				dev = 1
			case 1:
				dev = 0
			}
			fmt.Fprintf(&inOrder, "NodeName=%s Name=gpu Type=%s File=/dev/fakegpu%d\n", node, b.GPUType, i)
			fmt.Fprintf(&swapped, "NodeName=%s Name=gpu Type=%s File=/dev/fakegpu%d\n", node, b.GPUType, dev)
		}

		for _, tc := range []struct {
			name, gres string
			mismatch   bool
		}{{"in order", inOrder.String(), false}, {"swapped", swapped.String(), true}} {
			t.Run(tc.name, func(t *testing.T) {
				restartSlurmd(t, b, tc.gres)
				c := b.Client(t)
				out := b.JobDir + "/" + testbed.Unique("gpumap") + ".out"
				id := b.Sbatch(t, "alice", "-o", out, "-c1", "--mem=32M", "--gres=gpu:"+b.GPUType+":1", "--wrap",
					fmt.Sprintf("exec env SLURM_JOB_ID=%s sh -c %s %s", forgedJobID, shQuote(gpuMapJob), out))
				t.Cleanup(func() {
					b.NodeExec(t, nil, "touch", out+".release")
					_ = c.Cancel(testbed.Context(t), id)
				})
				j := testbed.WaitJob(t, c, id, 90*time.Second, "running", slurmrest.Job.Running)
				if len(j.GPUs) != 1 || j.GPUs[0].Node != node {
					t.Fatalf("job %d holds GPUs %v, want one of %s", id, j.GPUs, node)
				}
				slurmGPU := j.GPUs[0].Index
				// Slurm may count the job running before a slurmd just
				// restarted takes its launch (it reissues the credential).
				probe := b.NodeWaitFile(t, out, "PROBED", 3*time.Minute)
				pm := pidRE.FindStringSubmatch(probe)
				if pm == nil {
					t.Fatalf("job %d printed no pid:\n%s", id, probe)
				}
				dev := -1
				for _, m := range openRE.FindAllStringSubmatch(probe, -1) {
					if strings.EqualFold(m[2], syscall.ENXIO.Error()) {
						if dev >= 0 {
							t.Fatalf("job %d opens two GPU devices:\n%s", id, probe)
						}
						dev, _ = strconv.Atoi(m[1])
					}
				}
				if dev < 0 {
					t.Fatalf("job %d can open no GPU device:\n%s", id, probe)
				}
				want := slurmGPU
				if tc.mismatch {
					want = map[int]int{0: 1, 1: 0}[slurmGPU]
					if slurmGPU > 1 {
						want = slurmGPU
					}
				}
				if dev != want {
					t.Fatalf("job %d holds Slurm's GPU %d and its cgroup lets it open /dev/fakegpu%d; with gres.conf\n%swant /dev/fakegpu%d",
						id, slurmGPU, dev, tc.gres, want)
				}
				if tc.mismatch && dev == slurmGPU {
					t.Fatalf("job %d got Slurm's GPU %d, which the swap does not move: the test needs GPU 0 or 1", id, slurmGPU)
				}

				// The agent's source: the node's GPUs in device order
				// (NVML's), each idle, the job's process on the device its
				// cgroup lets it open, as NVML would list it there.
				var csv strings.Builder
				csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib,pids\n")
				for off := range 2 {
					for g := range b.GPUsPerNode {
						pids := ""
						if g == dev {
							pids = pm[1]
						}
						fmt.Fprintf(&csv, "%d,%d,0,0,512,%s\n", off, g, pids)
					}
				}
				b.NodeWriteFile(t, "/etc/strata/gpumap-replay.csv", []byte(csv.String()), 0o644)
				const port = 9810
				conf := b.ReclaimdAgentConfig(node, fmt.Sprintf("127.0.0.1:%d", port), "/etc/strata/reclaimd-agent.token",
					"/etc/strata/gpumap-replay.csv")
				b.NodeWriteFile(t, "/etc/strata/reclaimd.yaml", []byte(conf), 0o644)
				var agentPID string
				startAgent := func() {
					agentPID = strings.TrimSpace(b.NodeSh(t, `setsid /usr/local/sbin/reclaimd agent /etc/strata/reclaimd.yaml >>/var/log/reclaimd-agent.log 2>&1 </dev/null & echo $!`))
				}
				startAgent()
				// Under emulation the agent takes a while to listen: wait for
				// its port before the first cycle.
				for i := 0; i < 60 && b.NodeExec(t, nil, "python3", "-c",
					fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), timeout=2)", port)).Code != 0; i++ {
					time.Sleep(500 * time.Millisecond)
				}
				t.Cleanup(func() {
					b.NodeExec(t, nil, "kill", agentPID)
					if t.Failed() {
						t.Logf("the node's reclaimd agent log:\n%s", b.NodeExec(t, nil, "cat", "/var/log/reclaimd-agent.log").Stdout)
					}
				})

				rules, err := reclaimrules.Parse([]byte(gpuMapRules))
				if err != nil {
					t.Fatal(err)
				}
				ctx := testbed.Context(t)
				st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				var logBuf syncBuffer
				ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
					Collector: &collect.Agents{URL: func(string) string { return "http://" + node + ".node-bed" },
						Client: &http.Client{Transport: nodeTransport{t: t, b: b, port: port}, Timeout: time.Minute},
						Secret: func() ([]byte, error) { return secret, nil }},
					Log: slog.New(slog.NewTextHandler(io.MultiWriter(&logBuf, os.Stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))})
				if err != nil {
					t.Fatal(err)
				}

				// Cycle until the idle window (1 min of the job's run and of
				// samples) has passed and one cycle more.
				var last decide.Decision
				var actions []decide.Action
				judgedAt := time.Time{}
				deadline := time.Now().Add(2 * time.Minute)
				for time.Now().Before(deadline) {
					d, err := ctl.Cycle(ctx)
					if err != nil && strings.Contains(err.Error(), "no node agent answered") {
						// The agent process on the node is gone (seen on a
						// loaded machine, stopped by a signal right after its
						// start) or not listening yet: start it again where it
						// is gone; what is tested is the map.
						if b.NodeExec(t, nil, "kill", "-0", agentPID).Code != 0 {
							t.Logf("the node's agent (pid %s) is gone; starting it again:\n%s", agentPID,
								b.NodeExec(t, nil, "cat", "/var/log/reclaimd-agent.log").Stdout)
							startAgent()
						}
						time.Sleep(2 * time.Second)
						continue
					}
					if err != nil {
						t.Fatalf("cycle: %v", err)
					}
					last = d
					for _, a := range d.Actions {
						if a.JobID != id {
							t.Fatalf("an action on job %d, not the test's %d: %+v", a.JobID, id, a)
						}
						actions = append(actions, a)
					}
					if len(actions) > 0 {
						break
					}
					skip, _ := skipOf(d, id)
					if skip.Reason == decide.SkipGPUMismatch && judgedAt.IsZero() {
						judgedAt = time.Now()
					}
					if !judgedAt.IsZero() && time.Since(judgedAt) > 30*time.Second {
						break
					}
					time.Sleep(3 * time.Second)
				}
				skip, skipped := skipOf(last, id)
				if !tc.mismatch {
					if len(actions) == 0 || actions[0].Kind != decide.Warn {
						t.Fatalf("job %d, idle, its GPU map in agreement: actions %+v, last skip %+v; want a warning", id, actions, skip)
					}
					return
				}
				if !strings.Contains(logBuf.String(), "GPU order mismatch") {
					t.Errorf("the controller did not log the mismatch:\n%s", logBuf.String())
				}
				if len(actions) != 0 {
					// The agent's map places the job (its process runs on the
					// one device its cgroup opens), so it is judged on that
					// GPU's samples, named by Slurm's index: never on the
					// samples of the GPU Slurm's index points at.
					ev := actions[0].Evidence
					if actions[0].Kind != decide.Warn || len(ev.GPUs) != 1 || fmt.Sprint(ev.GPUs[0].GPU) != fmt.Sprintf("%s:%d", node, slurmGPU) {
						t.Fatalf("job %d, its GPUs in disagreement, placed by the agent's map: actions %+v; want a warning on its own GPU %s:%d",
							id, actions, node, slurmGPU)
					}
					return
				}
				wantDetail := fmt.Sprintf("job %d runs on GPU %d (NVML), which Slurm gives to no job", id, dev)
				if !skipped || skip.Reason != decide.SkipGPUMismatch || !strings.Contains(skip.Detail, wantDetail) {
					t.Fatalf("job %d's last skip = %+v, %v; want %q with %q", id, skip, skipped, decide.SkipGPUMismatch, wantDetail)
				}
			})
		}
	})
}

func skipOf(d decide.Decision, id int64) (decide.Skip, bool) {
	for _, s := range d.Skipped {
		if s.JobID == id {
			return s, true
		}
	}
	return decide.Skip{}, false
}

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

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
