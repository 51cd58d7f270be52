// Package testbed gives integration tests the Slurm test beds that
// test/testbed/slurm/testbed.sh started: it reads their environment files,
// builds clients, mints tokens, waits for job states, and prints the
// daemons' logs when a test fails.
//
// STRATA_TESTBEDS names the environment files, separated by spaces or
// colons (make test-integration sets it to one test bed per Slurm version).
package testbed

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Bed is one running test bed.
type Bed struct {
	Name        string
	Version     string // "26.05"
	Release     string // "26.05.5"
	Cluster     string
	URL         string
	Parsers     []string
	AdminUser   string
	TokenFile   string
	JWTKey      string
	Root        string
	Bin         string
	Scontrol    string
	Logs        []string
	Nodes       []string
	GPUsPerNode int
	GPUType     string
	Partition   string
	Account     string
	Users       []string
	JobDir      string // inside Root
	SlurmConf   string
	// MetricsURL is slurmctld's OpenMetrics (".../metrics"; its paths
	// are /nodes, /partitions, /jobs, /jobs-users-accts, /scheduler);
	// empty where the release has none (24.11).
	MetricsURL string
	// Sessions is whether the bed's root has the servers of the portal's
	// session templates (testbed.sh up --sessions: JupyterLab, ttyd).
	Sessions bool
	// NodeAddr is the address every node's slurmd listens on (NodeAddr):
	// the nodes' names resolve to it inside the root, not on the host.
	NodeAddr string
	// Node* describe a node bed (testbed.sh up --node-vm): its node runs
	// in a qemu VM under its own kernel. NodeAgent is the address of the
	// guest's exec agent (forwarded from the host's loopback), NodeAccel
	// "tcg" or "kvm", NodeKernel the guest's kernel release, NodeScratch
	// the guest's XFS file system mounted with prjquota.
	NodeVM      bool
	NodeAgent   string
	NodeAccel   string
	NodeKernel  string
	NodeScratch string
}

// EnvVar names the environment files of the test beds.
const EnvVar = "STRATA_TESTBEDS"

// All returns every configured test bed, or skips the test when none is
// configured; `make test` always configures them.
func All(t testing.TB) []*Bed {
	t.Helper()
	v := os.Getenv(EnvVar)
	if v == "" {
		t.Skipf("%s is not set: run `make test-integration`, which starts the test beds", EnvVar)
	}
	var beds []*Bed
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' }) {
		b, err := Load(f)
		if err != nil {
			t.Fatalf("test bed %s: %v", f, err)
		}
		beds = append(beds, b)
	}
	return beds
}

// Load reads one environment file.
func Load(path string) (*Bed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (is the test bed up? make testbed-up)", err)
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		kv[k] = strings.Trim(v, `"`)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	b := &Bed{
		Name: kv["STRATA_TB_NAME"], Version: kv["STRATA_TB_SLURM_VERSION"], Release: kv["STRATA_TB_SLURM_RELEASE"],
		Cluster: kv["STRATA_TB_CLUSTER"], URL: kv["STRATA_TB_REST_URL"], Parsers: strings.Fields(kv["STRATA_TB_PARSERS"]),
		AdminUser: kv["STRATA_TB_ADMIN_USER"], TokenFile: kv["STRATA_TB_ADMIN_TOKEN_FILE"], JWTKey: kv["STRATA_TB_JWT_KEY"],
		Root: kv["STRATA_TB_ROOT"], Bin: kv["STRATA_TB_BIN"], Scontrol: kv["STRATA_TB_SCONTROL"],
		Logs: strings.Fields(kv["STRATA_TB_LOGS"]), Nodes: strings.Fields(kv["STRATA_TB_NODES"]),
		GPUType: kv["STRATA_TB_GPU_TYPE"], Partition: kv["STRATA_TB_PARTITION"], Account: kv["STRATA_TB_ACCOUNT"],
		Users: strings.Fields(kv["STRATA_TB_USERS"]), JobDir: kv["STRATA_TB_JOB_DIR"], SlurmConf: kv["SLURM_CONF"],
		MetricsURL: kv["STRATA_TB_METRICS_URL"], Sessions: kv["STRATA_TB_SESSIONS"] == "1", NodeAddr: kv["STRATA_TB_NODE_ADDR"],
		NodeVM: kv["STRATA_TB_NODE_VM"] == "1", NodeAgent: kv["STRATA_TB_NODE_AGENT"], NodeAccel: kv["STRATA_TB_NODE_ACCEL"],
		NodeKernel: kv["STRATA_TB_NODE_KERNEL"], NodeScratch: kv["STRATA_TB_NODE_SCRATCH"],
	}
	if _, err := fmt.Sscan(kv["STRATA_TB_GPUS_PER_NODE"], &b.GPUsPerNode); err != nil {
		return nil, fmt.Errorf("%s: STRATA_TB_GPUS_PER_NODE: %w", path, err)
	}
	if b.URL == "" || b.TokenFile == "" {
		return nil, fmt.Errorf("%s: not a test bed environment file", path)
	}
	return b, nil
}

// Each runs fn as a parallel subtest per test bed, named after its
// version. The subtest holds the bed's lock shared: tests in other
// packages (go test runs packages at once) may run beside it, but not one
// that disturbs the whole cluster (EachExclusive).
func Each(t *testing.T, fn func(t *testing.T, b *Bed)) { each(t, syscall.LOCK_SH, fn) }

// EachExclusive is Each for tests that change cluster-wide state or stop
// slurmctld (topology, slurm.conf, accounts other tests use): the subtest
// waits until no other test uses the bed and keeps it to itself.
func EachExclusive(t *testing.T, fn func(t *testing.T, b *Bed)) { each(t, syscall.LOCK_EX, fn) }

func each(t *testing.T, how int, fn func(t *testing.T, b *Bed)) {
	t.Helper()
	for _, b := range All(t) {
		t.Run("slurm-"+b.Version, func(t *testing.T) {
			t.Parallel()
			b.lock(t, how)
			b.DumpLogsOnFailure(t)
			fn(t, b)
		})
	}
}

// Config is a client configuration for the admin token.
func (b *Bed) Config() slurmrest.Config {
	return slurmrest.Config{
		URL: b.URL, User: b.AdminUser, Tokens: &slurmrest.FileToken{Path: b.TokenFile},
		Requeuer: slurmrest.ScontrolRequeuer{Path: b.Scontrol},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// Client connects as the admin.
func (b *Bed) Client(t testing.TB) *slurmrest.Client {
	t.Helper()
	c, err := slurmrest.New(Context(t), b.Config())
	if err != nil {
		t.Fatalf("connect to %s: %v", b.Name, err)
	}
	return c
}

// Context is a context that ends with the test or after five minutes.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// HostPath maps a path inside the test bed's root to the host.
func (b *Bed) HostPath(p string) string { return filepath.Join(b.Root, p) }

var submittedJob = regexp.MustCompile(`Submitted batch job (\d+)`)

// Sbatch submits with the bed's sbatch as user, authenticated by a
// short-lived token in SLURM_JWT, in the bed's account and partition with
// a 10-minute limit, and returns the job id. Job arrays and heterogeneous
// jobs have no field in slurmrest's JobSpec: sbatch is how users submit them.
func (b *Bed) Sbatch(t testing.TB, user string, args ...string) int64 {
	t.Helper()
	signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := signer.Token(Context(t), user)
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{"-A", b.Account, "-p", b.Partition, "-t", "10", "-J", Unique("sbatch"),
		"--chdir", b.JobDir, "-o", "/dev/null"}, args...)
	cmd := exec.CommandContext(Context(t), filepath.Join(b.Bin, "sbatch"), full...)
	cmd.Env = []string{"SLURM_JWT=" + tok}
	out, err := cmd.CombinedOutput()
	m := submittedJob.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("sbatch %v: %v: %s", full, err, out)
	}
	id, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return id
}

// WaitJob polls until cond holds for the job or the timeout passes.
func WaitJob(t testing.TB, c *slurmrest.Client, id int64, timeout time.Duration, what string, cond func(slurmrest.Job) bool) slurmrest.Job {
	t.Helper()
	ctx := Context(t)
	end := time.Now().Add(timeout)
	var last slurmrest.Job
	var lastErr error
	for time.Now().Before(end) {
		last, lastErr = c.Job(ctx, id)
		if lastErr == nil && cond(last) {
			return last
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("job %d: not %s after %s (state %v, reason %q, restarts %d, err %v)",
		id, what, timeout, last.State, last.StateReason, last.RestartCount, lastErr)
	return last
}

// WaitFile polls until the file inside the root contains substr.
func (b *Bed) WaitFile(t testing.TB, path, substr string, timeout time.Duration) string {
	t.Helper()
	end := time.Now().Add(timeout)
	var data []byte
	for time.Now().Before(end) {
		data, _ = os.ReadFile(b.HostPath(path))
		if strings.Contains(string(data), substr) {
			return string(data)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: no %q after %s; it holds:\n%s", path, substr, timeout, data)
	return ""
}

// lock takes the bed's lock (flock, so it holds across the test processes
// of all packages) until the test ends.
// LockExclusive keeps the bed to t alone until t ends, as EachExclusive
// does, for a test that serves several beds at once (one portal over
// every cluster). Lock beds in the order All returns them.
func (b *Bed) LockExclusive(t testing.TB) { b.lock(t, syscall.LOCK_EX) }

func (b *Bed) lock(t testing.TB, how int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(filepath.Dir(b.Root), "test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		t.Fatalf("lock: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() })
}

// DumpLogsOnFailure prints the tails of the daemons' logs when t fails.
func (b *Bed) DumpLogsOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var files []string
		for _, d := range b.Logs {
			m, _ := filepath.Glob(filepath.Join(d, "*"))
			files = append(files, m...)
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || len(data) == 0 {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(lines) > 25 {
				lines = lines[len(lines)-25:]
			}
			t.Logf("==> %s (test bed %s) <==\n%s", f, b.Name, strings.Join(lines, "\n"))
		}
	})
}

// Unique returns a name no other test run uses: prefix plus the time.
func Unique(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1_000_000_000)
}
