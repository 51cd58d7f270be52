//go:build integration

package agent_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/internal/testbed/nodeexec"
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

// reclaimdBinary is the reclaimd the packages ship, in STRATA_PACKAGES
// (what `make packages` wrote; make test-integration builds it first), or
// else one built here once for the test binary: a link of reclaimd takes
// a minute on a loaded 2-core machine. The guests' C library (Debian 13
// and testing) is newer than the build host's, so the host's cgo build
// runs in them.
var reclaimdBinary = sync.OnceValues(func() (string, error) {
	if d := os.Getenv("STRATA_PACKAGES"); d != "" {
		bin := filepath.Join(d, "bin", "reclaimd")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	dir, err := os.MkdirTemp("", "strata-reclaimd-nodebed-")
	if err != nil {
		return "", err
	}
	builtDir.Store(&dir)
	bin := filepath.Join(dir, "reclaimd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/strata-hpc/strata/reclaimd/cmd/reclaimd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build reclaimd: %w\n%s", err, out)
	}
	return bin, nil
})

// builtDir is the folder of a reclaimd built here, removed by TestMain
// once every test is done (about 20 MB a run otherwise left in /tmp).
var builtDir atomic.Pointer[string]

func TestMain(m *testing.M) {
	code := m.Run()
	if d := builtDir.Load(); d != nil {
		_ = os.RemoveAll(*d)
	}
	os.Exit(code)
}

// gzReclaimd is reclaimd's binary compressed: the exec agent reads a
// request for at most 30 s, and qemu's user network on a busy 2-core host
// is slow. The gzip command compresses it, not compress/gzip: under -race
// that took most of a minute on a loaded machine.
var gzReclaimd = sync.OnceValues(func() ([]byte, error) {
	bin, err := reclaimdBinary()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("gzip", "-c", bin)
	cmd.Stderr = &stderr
	gz, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("gzip %s: %w: %s", bin, err, stderr.Bytes())
	}
	return gz, nil
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
// new slurmd has registered and the node is idle. slurmctld goes on
// calling the node IDLE for a while after its slurmd stopped: a job
// given to it before the new slurmd registers fails to launch and is
// requeued only after slurmctld gives up terminating it (64 s and more
// on 26.05), so "idle" alone is not "back". The node's SlurmdStartTime
// changes when the new slurmd registers.
func restartSlurmd(t *testing.T, b *testbed.Bed, gres string) {
	t.Helper()
	b.NodeWriteFile(t, "/etc/slurm/gres.conf", []byte(gres), 0o644)
	b.NodeSh(t, `started() { scontrol -o show node gpu1 2>/dev/null | sed -n 's/.*SlurmdStartTime=\([^ ]*\).*/\1/p'; }
before=$(started)
pid=$(pidof slurmd) && kill $pid && i=0 && while kill -0 $pid 2>/dev/null; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.2; done
setsid /usr/sbin/slurmd -D -N gpu1 >>/var/log/slurm/slurmd-gpu1.out 2>&1 </dev/null &
i=0; until [ "$(started)" != "$before" ] && scontrol -o show node gpu1 2>/dev/null | grep -q 'State=IDLE '; do i=$((i+1)); [ $i -lt 300 ] || exit 1; sleep 0.5; done`)
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
	// reclaimd is built while the beds and the first jobs are waited for
	// (the link alone takes most of a minute on a loaded 2-core machine);
	// it is needed only when the node's agent starts.
	if os.Getenv(testbed.NodeEnvVar) != "" {
		go func() { _, _ = gzReclaimd() }()
	}
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		if b.GPUsPerNode < 2 {
			t.Fatalf("the node has %d GPUs: the test swaps two", b.GPUsPerNode)
		}
		began := time.Now()
		// lap logs where the time goes: the node bed's share of a test
		// run is mostly this test's.
		lap := func(t *testing.T, what string) { t.Logf("+%.1fs %s", time.Since(began).Seconds(), what) }
		node := b.Nodes[0]
		orig := b.NodeSh(t, "cat /etc/slurm/gres.conf")
		// The node's gres.conf now: slurmd is restarted only to change it,
		// and given the bed's own back at the end.
		cur := orig
		t.Cleanup(func() {
			if cur != orig {
				restartSlurmd(t, b, orig)
				lap(t, "slurmd restarted with the bed's gres.conf")
			}
		})
		secret := []byte("node bed agent secret")
		// reclaimd goes to the node while the first job starts (its copy
		// through the exec agent takes half a minute on a loaded machine):
		// it is needed only when the node's agent starts.
		copyCtx := testbed.Context(t)
		copyDone := make(chan error, 1)
		go func() {
			gz, err := gzReclaimd()
			if err != nil {
				copyDone <- err
				return
			}
			r, err := nodeexec.Run(copyCtx, b.NodeAgent, nodeexec.Request{Stdin: gz, Args: []string{"sh", "-c",
				"mkdir -p /etc/strata && gunzip >/usr/local/sbin/reclaimd.tmp && chmod 755 /usr/local/sbin/reclaimd.tmp && mv /usr/local/sbin/reclaimd.tmp /usr/local/sbin/reclaimd"}})
			switch {
			case err != nil:
				copyDone <- fmt.Errorf("copy reclaimd to the node: %w", err)
			case r.Code != 0:
				copyDone <- fmt.Errorf("copy reclaimd to the node: exit %d: %s", r.Code, r.Stderr)
			default:
				copyDone <- nil
			}
		}()
		copied := false
		copyReclaimd := func(t *testing.T) {
			if copied {
				return
			}
			if err := <-copyDone; err != nil {
				t.Fatal(err)
			}
			b.NodeWriteFile(t, "/etc/strata/reclaimd-agent.token", secret, 0o600)
			copied = true
			lap(t, "reclaimd on the node")
		}

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
		// The bed's own gres.conf lists the devices in order
		// (File=/dev/fakegpu[0-3]): the in-order case runs on it as it is,
		// without a restart of slurmd.
		inOrderConf := inOrder.String()
		if slices.Equal(gresFiles(orig, node), gresFiles(inOrderConf, node)) {
			inOrderConf = orig
		}

		for _, tc := range []struct {
			name, gres string
			mismatch   bool
		}{{"in order", inOrderConf, false}, {"swapped", swapped.String(), true}} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.gres != cur {
					cur = tc.gres // set first: a restart that fails half-way is undone too
					restartSlurmd(t, b, tc.gres)
					lap(t, "slurmd restarted with the case's gres.conf")
				}
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
				lap(t, fmt.Sprintf("job %d running on Slurm's GPU %d", id, slurmGPU))
				// Slurm may count the job running before a slurmd just
				// restarted takes its launch (it reissues the credential).
				probe := b.NodeWaitFile(t, out, "PROBED", 3*time.Minute)
				lap(t, "the job has probed its devices")
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
				copyReclaimd(t)
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
				lap(t, "the node's agent listens")
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
				cycles := 0
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
					if cycles++; cycles == 1 {
						lap(t, "first cycle")
					}
					last = d
					for _, a := range d.Actions {
						if a.JobID != id {
							t.Fatalf("an action on job %d, not the test's %d: %+v", a.JobID, id, a)
						}
						actions = append(actions, a)
					}
					if len(actions) > 0 {
						lap(t, fmt.Sprintf("%s on job %d", actions[0].Kind, id))
						break
					}
					skip, _ := skipOf(d, id)
					if skip.Reason == decide.SkipGPUMismatch && judgedAt.IsZero() {
						judgedAt = time.Now()
						lap(t, "the mismatch is reported")
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

// gresFiles lists the device files gres.conf gives node, in order,
// with a range such as /dev/fakegpu[0-3] spelled out.
func gresFiles(conf, node string) []string {
	var files []string
	for _, line := range strings.Split(conf, "\n") {
		var name, file string
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "NodeName":
				name = v
			case "File":
				file = v
			}
		}
		if name != node || file == "" {
			continue
		}
		prefix, rest, ok := strings.Cut(file, "[")
		lo, hi, ok2 := strings.Cut(strings.TrimSuffix(rest, "]"), "-")
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if !ok || !ok2 || err1 != nil || err2 != nil || !strings.HasSuffix(rest, "]") {
			files = append(files, file)
			continue
		}
		for i := a; i <= z; i++ {
			files = append(files, prefix+strconv.Itoa(i))
		}
	}
	return files
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

// TestGresFiles: the helper that decides whether the bed's own gres.conf
// already lists the devices in order (the in-order case then restarts no
// slurmd) reads ranges, single files and other nodes' lines.
func TestGresFiles(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       []string
	}{
		{"range", "AutoDetect=off\nNodeName=gpu1 Name=gpu Type=h100 File=/dev/fakegpu[0-3]\n",
			[]string{"/dev/fakegpu0", "/dev/fakegpu1", "/dev/fakegpu2", "/dev/fakegpu3"}},
		{"one a line, swapped", "AutoDetect=off\nNodeName=gpu1 Name=gpu Type=h100 File=/dev/fakegpu1\nNodeName=gpu1 Name=gpu Type=h100 File=/dev/fakegpu0\n",
			[]string{"/dev/fakegpu1", "/dev/fakegpu0"}},
		{"another node's", "NodeName=gpu2 Name=gpu File=/dev/fakegpu[0-1]\nNodeName=gpu1 Name=gpu File=/dev/fakegpu2\n",
			[]string{"/dev/fakegpu2"}},
		{"not a range", "NodeName=gpu1 Name=gpu File=/dev/nvidia[0,2]\n", []string{"/dev/nvidia[0,2]"}},
		{"none", "AutoDetect=off\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gresFiles(tc.conf, "gpu1"); !slices.Equal(got, tc.want) {
				t.Errorf("gresFiles(%q) = %q, want %q", tc.conf, got, tc.want)
			}
		})
	}
}
