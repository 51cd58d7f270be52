package testbed

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/testbed/nodeexec"
)

// NodeEnvVar names the environment files of the node beds (testbed.sh up
// --node-vm), separated by spaces or colons. They are apart from
// STRATA_TESTBEDS: a node bed's jobs run in a VM, so their files are not
// under the bed's root on the host, and it has one small node.
const NodeEnvVar = "STRATA_NODEBEDS"

// NodeBeds returns every configured node bed. Without any it skips the
// test, except under CI=true, where the node bed is part of the run and a
// missing one fails.
func NodeBeds(t testing.TB) []*Bed {
	t.Helper()
	v := os.Getenv(NodeEnvVar)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set under CI=true: start the node bed (make nodebed-up) and pass its environment file", NodeEnvVar)
		}
		t.Skipf("%s is not set: start the node bed (make nodebed-up) to run the confinement tests", NodeEnvVar)
	}
	var beds []*Bed
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' }) {
		b, err := Load(f)
		if err != nil {
			t.Fatalf("node bed %s: %v", f, err)
		}
		if !b.NodeVM || b.NodeAgent == "" {
			t.Fatalf("%s: not a node bed (no STRATA_TB_NODE_VM=1): start it with testbed.sh up --node-vm", f)
		}
		beds = append(beds, b)
	}
	return beds
}

// EachNode runs fn as a subtest per node bed, named after its version,
// holding the bed to itself: the node is small (two CPUs), and the
// confinement tests count on what runs on it.
func EachNode(t *testing.T, fn func(t *testing.T, b *Bed)) {
	t.Helper()
	for _, b := range NodeBeds(t) {
		t.Run("node-"+b.Version, func(t *testing.T) {
			t.Parallel()
			asked := time.Now()
			b.lock(t, syscall.LOCK_EX)
			// What a test costs the bed, apart from the wait for it: the
			// node beds' share of a test run is the sum of these.
			got := time.Now()
			t.Cleanup(func() {
				t.Logf("node bed %s: held %.1fs (waited %.1fs for it)", b.Name, time.Since(got).Seconds(), got.Sub(asked).Seconds())
			})
			b.DumpLogsOnFailure(t)
			b.dumpNodeLogsOnFailure(t)
			fn(t, b)
		})
	}
}

// NodeExec runs a command as root in the node's VM with stdin (nil: none)
// and returns what it did; only a failure to reach the agent or to start
// the command fails the test.
func (b *Bed) NodeExec(t testing.TB, stdin []byte, args ...string) *nodeexec.Response {
	t.Helper()
	resp, err := nodeexec.Run(Context(t), b.NodeAgent, nodeexec.Request{Args: args, Stdin: stdin})
	if err != nil {
		t.Fatalf("node %s: %v", b.Name, err)
	}
	return resp
}

// NodeSh runs a shell script as root in the node's VM and returns its
// standard output; a non-zero exit fails the test.
func (b *Bed) NodeSh(t testing.TB, script string) string {
	t.Helper()
	r := b.NodeExec(t, nil, "sh", "-c", script)
	if r.Code != 0 {
		t.Fatalf("node %s: sh -c %q: exit %d\nstdout: %s\nstderr: %s", b.Name, script, r.Code, r.Stdout, r.Stderr)
	}
	return string(r.Stdout)
}

// NodeWriteFile writes a file in the node's VM.
func (b *Bed) NodeWriteFile(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	r := b.NodeExec(t, data, "sh", "-c", `cat >"$0" && chmod "$1" "$0"`, path, fmt.Sprintf("%o", mode))
	if r.Code != 0 {
		t.Fatalf("node %s: write %s: %s", b.Name, path, r.Stderr)
	}
}

// NodeWaitFile polls until the file in the node's VM contains substr.
func (b *Bed) NodeWaitFile(t testing.TB, path, substr string, timeout time.Duration) string {
	t.Helper()
	end := time.Now().Add(timeout)
	var data []byte
	for time.Now().Before(end) {
		data = b.NodeExec(t, nil, "cat", path).Stdout
		if bytes.Contains(data, []byte(substr)) {
			return string(data)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("node %s: %s: no %q after %s; it holds:\n%s", b.Name, path, substr, timeout, data)
	return ""
}

func (b *Bed) dumpNodeLogsOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		r, err := nodeexec.Run(Context(t), b.NodeAgent, nodeexec.Request{Args: []string{"sh", "-c",
			"tail -n 30 /var/log/slurm/slurmd-*.log /var/log/slurm/slurmd-*.out /var/log/munged.out; dmesg | tail -n 20"}})
		if err != nil {
			t.Logf("node %s: no logs: %v", b.Name, err)
			return
		}
		t.Logf("node %s (VM, %s):\n%s%s", b.Name, b.NodeAccel, r.Stdout, r.Stderr)
	})
}
