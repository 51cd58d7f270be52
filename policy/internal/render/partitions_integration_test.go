//go:build integration

package render

import (
	"bytes"
	"context"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// testbedScript starts and stops the private test beds.
const testbedScript = "../../../test/testbed/slurm/testbed.sh"

// TestPartitionsConfOnSlurm installs the partitions.conf of
// testdata/derived/bed-partitions.yaml on a private test bed per Slurm
// release of STRATA_TESTBEDS: a fresh instance of two nodes started from
// the cached root, on free ports, and purged at the end. Changing the
// partitions means rewriting slurm.conf and reconfiguring slurmctld,
// which the shared beds must not go through while other packages' tests
// use them.
//
// It proves that slurmctld takes the file in place of slurm.conf's own
// partition lines (scontrol shows every value rendered), and that the
// partitions admit what the policy says and nothing else. The accounts'
// associations are given every QOS on purpose, so that each refusal comes
// from the partition (with EnforcePartLimits=ALL, at submit) and not from
// the association.
func TestPartitionsConfOnSlurm(t *testing.T) {
	versions := map[string]bool{}
	for _, b := range testbed.All(t) {
		versions[b.Version] = true
	}
	p, err := spec.Load("testdata/derived/bed-partitions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := PartitionsConf(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range slices.Sorted(maps.Keys(versions)) {
		t.Run("slurm-"+v, func(t *testing.T) {
			t.Parallel()
			b := privateBed(t, v, 28000+1000*i)
			installPartitions(t, b, conf)
			checkPartitions(t, b, conf)
			checkAdmission(t, b)
		})
	}
}

// privateBed starts a fresh two-node test bed of a Slurm release on the
// first free port base from from, and purges it when the test ends.
func privateBed(t *testing.T, version string, from int) *testbed.Bed {
	t.Helper()
	name := "tpart" + strings.ReplaceAll(version, ".", "")
	base := freePortBase(t, from)
	args := []string{"--version", version, "--name", name}
	t.Cleanup(func() {
		start := time.Now()
		out, err := exec.Command("bash", append([]string{testbedScript, "down", "--purge"}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("testbed down %s: %v\n%s", name, err, out)
		}
		t.Logf("test bed %s down and purged in %s", name, time.Since(start).Round(time.Second))
	})
	up := append([]string{testbedScript, "up", "--fresh", "--nodes", "2", "--cluster", name, "--port-base", strconv.Itoa(base)}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "bash", up...).CombinedOutput(); err != nil {
		t.Fatalf("testbed up %s: %v\n%s", name, err, out)
	}
	t.Logf("test bed %s (Slurm %s, ports from %d) up in %s", name, version, base, time.Since(start).Round(time.Second))
	b, err := testbed.Load(filepath.Join("/var/lib/strata/testbed", name, "env"))
	if err != nil {
		t.Fatal(err)
	}
	b.DumpLogsOnFailure(t)
	return b
}

// freePortBase returns the first base from from on, in steps of 100, whose
// ports (base to base+2 for the daemons, base+11 and base+12 for the two
// slurmds) nothing listens on.
func freePortBase(t *testing.T, from int) int {
	t.Helper()
	for base := from; base < from+1000; base += 100 {
		free := true
		for _, port := range []int{base, base + 1, base + 2, base + 11, base + 12} {
			l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no free ports from %d to %d", from, from+1000)
	return 0
}

// slurm runs one of the bed's Slurm commands, as the user a token is for
// (as root without one).
func slurm(t *testing.T, b *testbed.Bed, token, cmd string, args ...string) (string, error) {
	t.Helper()
	c := exec.Command(filepath.Join(b.Bin, cmd), args...)
	c.Env = os.Environ()
	if token != "" {
		c.Env = append(c.Env, "SLURM_JWT="+token)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return strings.TrimSpace(out.String()), err
}

func mustSlurm(t *testing.T, b *testbed.Bed, cmd string, args ...string) string {
	t.Helper()
	out, err := slurm(t, b, "", cmd, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", cmd, strings.Join(args, " "), err, out)
	}
	return out
}

// installPartitions does what an admin does: the QOS and accounts first
// (Slurm 26.05 stops at an AllowQos it does not know), then the file, an
// Include in place of slurm.conf's own partition line, and a
// reconfigure, whose exit status says nothing of whether slurmctld
// survived: ping tells.
func installPartitions(t *testing.T, b *testbed.Bed, conf []byte) {
	t.Helper()
	mustSlurm(t, b, "sacctmgr", "-i", "add", "qos", "train,batch,interactive")
	mustSlurm(t, b, "sacctmgr", "-i", "add", "account", "acme,globex", "Organization=strata")
	mustSlurm(t, b, "sacctmgr", "-i", "add", "account", "acme-llm,acme-vision", "parent=acme", "Organization=strata")
	mustSlurm(t, b, "sacctmgr", "-i", "add", "account", "globex-rl", "parent=globex", "Organization=strata")
	// Not in the policy: a sub-account under acme-llm, which Slurm admits
	// where acme-llm is allowed.
	mustSlurm(t, b, "sacctmgr", "-i", "add", "account", "acme-llm-sub", "parent=acme-llm", "Organization=strata")
	all := "qos=normal,train,batch,interactive"
	mustSlurm(t, b, "sacctmgr", "-i", "add", "user", "alice,bob", "account=acme-llm,acme-vision,acme-llm-sub,globex-rl", all)
	mustSlurm(t, b, "sacctmgr", "-i", "modify", "user", "alice,bob", "where", "account=testbed", "set", all)

	if err := os.MkdirAll(b.HostPath("/etc/slurm/strata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.HostPath("/etc/slurm/strata/partitions.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(b.SlurmConf)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		if !strings.HasPrefix(l, "PartitionName=") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, "EnforcePartLimits=ALL", "Include /etc/slurm/strata/partitions.conf")
	if err := os.WriteFile(b.SlurmConf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSlurm(t, b, "scontrol", "reconfigure")
	end := time.Now().Add(30 * time.Second)
	for {
		out, err := slurm(t, b, "", "scontrol", "show", "partition", "interactive")
		if err == nil && strings.Contains(out, "PriorityTier=2") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("slurmctld does not show the new partitions 30 s after reconfigure: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// keyValues parses "K=V K=V" words; scontrol -o prints a partition so.
func keyValues(line string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		}
	}
	return m
}

// checkPartitions: scontrol shows every value of every rendered line, and
// no partition but these (the bed's own gpu line is gone).
func checkPartitions(t *testing.T, b *testbed.Bed, conf []byte) {
	t.Helper()
	shown := map[string]map[string]string{}
	for _, l := range strings.Split(mustSlurm(t, b, "scontrol", "-o", "show", "partition"), "\n") {
		kv := keyValues(l)
		shown[kv["PartitionName"]] = kv
	}
	var names []string
	for _, l := range derivedLines(conf) {
		want := keyValues(l)
		names = append(names, want["PartitionName"])
		got := shown[want["PartitionName"]]
		for k, v := range want {
			if !strings.EqualFold(got[k], v) {
				t.Errorf("partition %s: scontrol shows %s=%s, partitions.conf says %s", want["PartitionName"], k, got[k], v)
			}
		}
	}
	if !slices.Equal(names, []string{"gpu", "interactive"}) || len(shown) != 2 {
		t.Errorf("partitions %v rendered, %d shown: want gpu and interactive only", names, len(shown))
	}
	// The values themselves, from the policy (see TestPartitions).
	if g := shown["gpu"]; g["AllowQos"] != "batch,train" || g["AllowAccounts"] != "acme-llm,acme-vision" ||
		g["DefaultTime"] != "04:00:00" || g["MaxTime"] != "7-00:00:00" || g["Default"] != "YES" || g["Nodes"] != "gpu1" {
		t.Errorf("gpu = %v", g)
	}
}

// checkAdmission submits held jobs as alice and bob: each is admitted or
// refused by the partition as the policy says.
func checkAdmission(t *testing.T, b *testbed.Bed) {
	t.Helper()
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		tok := mustSlurm(t, b, "scontrol", "token", "username="+u, "lifespan=600")
		tokens[u] = strings.TrimPrefix(tok, "SLURM_JWT=")
	}
	const (
		noAccount = "Invalid account or account/partition combination specified"
		noQOS     = "Invalid qos specification"
		noTime    = "Requested time limit is invalid (missing or exceeds some limit)"
	)
	for _, tc := range []struct {
		why, user, args string
		refusal         string // "": admitted
		timeLimit       string // of an admitted job
	}{
		{"a project of batch, in batch's partition; no --time: the partition's DefaultTime", "alice", "-p gpu -A acme-llm -q batch", "", "04:00:00"},
		{"the default partition is gpu, batch's", "alice", "-A acme-vision -q batch", "", "04:00:00"},
		{"a sub-account of an allowed account (Slurm checks AllowAccounts up the tree)", "alice", "-p gpu -A acme-llm-sub -q train -t 7-00:00:00", "", "7-00:00:00"},
		{"an account outside the policy", "alice", "-p gpu -A testbed -q batch", noAccount, ""},
		{"globex-rl may use interactive only", "bob", "-p gpu -A globex-rl -q batch", noAccount, ""},
		{"acme-vision may use batch only", "bob", "-p interactive -A acme-vision -q interactive", noAccount, ""},
		{"interactive is not a class of partition gpu", "alice", "-p gpu -A acme-llm -q interactive", noQOS, ""},
		{"QOS normal is no class", "alice", "-p gpu -A acme-llm -q normal", noQOS, ""},
		{"a project of interactive in its partition", "bob", "-p interactive -A globex-rl -q interactive", "", "02:00:00"},
		{"longer than the partition's MaxTime (interactive's 12h)", "alice", "-p interactive -A acme-llm -q interactive -t 13:00:00", noTime, ""},
	} {
		args := append([]string{"--hold", "--parsable", "--chdir=/tmp", "--wrap=true"}, strings.Fields(tc.args)...)
		out, err := slurm(t, b, tokens[tc.user], "sbatch", args...)
		switch {
		case tc.refusal != "":
			if err == nil || !strings.Contains(out, tc.refusal) {
				t.Errorf("%s (%s %s): %v %q, want refused with %q", tc.why, tc.user, tc.args, err, out, tc.refusal)
			}
		case err != nil:
			t.Errorf("%s (%s %s): refused: %v %s", tc.why, tc.user, tc.args, err, out)
		default:
			// --parsable prints the id last; job_submit.lua's warnings (this
			// bed has no policy data file) come before it.
			lines := strings.Split(strings.TrimSpace(out), "\n")
			id := strings.TrimSpace(lines[len(lines)-1])
			job := keyValues(mustSlurm(t, b, "scontrol", "-o", "show", "job", id))
			if job["TimeLimit"] != tc.timeLimit {
				t.Errorf("%s: job %s has TimeLimit %s, want %s", tc.why, id, job["TimeLimit"], tc.timeLimit)
			}
			mustSlurm(t, b, "scancel", id)
		}
	}
}
