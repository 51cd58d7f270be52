package slurmplugins

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The job mapping scripts for dcgm-exporter (--hpc-job-mapping-dir).
const (
	mapProlog = "dcgm-job-map-prolog.sh"
	mapEpilog = "dcgm-job-map-epilog.sh"
)

// slurmEnv is the environment slurmd gives a Prolog or Epilog for a job
// (https://slurm.schedmd.com/prolog_epilog.html): no PATH, the job's ids,
// and its GPUs on the node; "" leaves a variable unset. The directory is
// the test's.
func slurmEnv(dir, context, job, gpus, cuda string) []string {
	env := []string{
		"STRATA_DCGM_JOB_MAP_DIR=" + dir,
		"SLURM_SCRIPT_CONTEXT=" + context,
		"SLURM_JOB_USER=alice", "SLURM_JOB_UID=1001", "SLURM_JOB_ACCOUNT=research-llm",
		"SLURM_JOB_PARTITION=gpu", "SLURM_CLUSTER_NAME=testbed", "SLURMD_NODENAME=gpu01",
	}
	if job != "" {
		env = append(env, "SLURM_JOB_ID="+job)
	}
	if gpus != "" {
		env = append(env, "SLURM_JOB_GPUS="+gpus)
	}
	if cuda != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+cuda, "GPU_DEVICE_ORDINAL="+cuda)
	}
	return env
}

// runMap runs one script as slurmd would; it must exit 0 whatever
// happens (a failed prolog or epilog drains the node). It returns stderr.
func runMap(t testing.TB, script string, env []string) string {
	t.Helper()
	cmd := exec.Command("./" + script)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || len(out) > 0 {
		t.Fatalf("%s %v: %v, stdout %q, stderr:\n%s", script, env, err, out, stderr.String())
	}
	return stderr.String()
}

// readMap reads the directory as dcgm-exporter's HPC job mapper does: each
// regular file whose name is a number is a GPU, each of its lines a job on
// it. Any other file must be the lock: the scripts leave nothing else.
func readMap(t testing.TB, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return map[string][]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.IsDir() {
			if e.Name() != ".lock" {
				t.Errorf("the directory has %s, which is neither a GPU's file nor the lock", e.Name())
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644 (dcgm-exporter need not run as root)", e.Name(), info.Mode().Perm())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out[e.Name()] = append(out[e.Name()], sc.Text())
		}
		f.Close()
		if len(out[e.Name()]) == 0 {
			t.Errorf("GPU %s has an empty file (the epilog removes a file left without a job)", e.Name())
		}
	}
	return out
}

// TestJobMap: the prolog adds a job to the files of its GPUs, the epilog
// takes it out of every file, and both keep the other jobs of a shared
// GPU, as dcgm-exporter reads them.
func TestJobMap(t *testing.T) {
	type step struct{ script, job, gpus, cuda string }
	tests := map[string]struct {
		steps      []step
		want       map[string][]string
		wantStderr string
	}{
		"two GPUs": {
			steps: []step{{mapProlog, "101", "0,1", "0,1"}},
			want:  map[string][]string{"0": {"101"}, "1": {"101"}},
		},
		"CUDA_VISIBLE_DEVICES without SLURM_JOB_GPUS": {
			steps: []step{{mapProlog, "101", "", "2,3"}},
			want:  map[string][]string{"2": {"101"}, "3": {"101"}},
		},
		"a range, and leading zeros dropped as dcgm-exporter's gpu label has none": {
			steps: []step{{mapProlog, "101", "04-06,10", ""}},
			want:  map[string][]string{"4": {"101"}, "5": {"101"}, "6": {"101"}, "10": {"101"}},
		},
		"a shared GPU lists both jobs": {
			steps: []step{{mapProlog, "101", "0", ""}, {mapProlog, "102", "0,1", ""}},
			want:  map[string][]string{"0": {"101", "102"}, "1": {"102"}},
		},
		"a prolog run twice lists the job once": {
			steps: []step{{mapProlog, "101", "0", ""}, {mapProlog, "101", "0", ""}},
			want:  map[string][]string{"0": {"101"}},
		},
		"the epilog keeps the other job of a shared GPU": {
			steps: []step{{mapProlog, "101", "0,1", ""}, {mapProlog, "102", "1", ""}, {mapEpilog, "101", "0,1", ""}},
			want:  map[string][]string{"1": {"102"}},
		},
		"the epilog of the last job removes the files": {
			steps: []step{{mapProlog, "101", "0,1", ""}, {mapEpilog, "101", "0,1", ""}},
			want:  map[string][]string{},
		},
		"the epilog without GPU variables still clears the job": {
			steps: []step{{mapProlog, "101", "3", ""}, {mapProlog, "102", "3", ""}, {mapEpilog, "102", "", ""}},
			want:  map[string][]string{"3": {"101"}},
		},
		"a job id that is a prefix of another is not the other": {
			steps: []step{{mapProlog, "10", "0", ""}, {mapProlog, "101", "0", ""}, {mapEpilog, "10", "", ""}},
			want:  map[string][]string{"0": {"101"}},
		},
		"an epilog before any prolog": {
			steps: []step{{mapEpilog, "101", "0", ""}},
			want:  map[string][]string{},
		},
		"a job without GPUs maps nothing": {
			steps: []step{{mapProlog, "101", "", ""}},
			want:  map[string][]string{},
		},
		"no device files": {
			steps:      []step{{mapProlog, "101", "", "NoDevFiles"}},
			want:       map[string][]string{},
			wantStderr: "GPU index 'NoDevFiles' is not a number or a range: skipped",
		},
		"indices that are not numbers are skipped, the others mapped": {
			steps:      []step{{mapProlog, "101", "0,../../etc/passwd,*,3-1,1-2-3,123,1", ""}},
			want:       map[string][]string{"0": {"101"}, "1": {"101"}},
			wantStderr: "GPU index '../../etc/passwd' is not a number or a range: skipped",
		},
		"a job id that is not a number maps nothing": {
			steps:      []step{{mapProlog, "1; rm -rf /", "0", ""}},
			want:       map[string][]string{},
			wantStderr: "SLURM_JOB_ID is not a job id: nothing mapped",
		},
		"without a job id the epilog touches nothing": {
			steps:      []step{{mapProlog, "101", "0", ""}, {mapEpilog, "", "0", ""}},
			want:       map[string][]string{"0": {"101"}},
			wantStderr: "SLURM_JOB_ID is not a job id: nothing unmapped",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dcgm-job-map")
			var stderr strings.Builder
			for _, s := range tt.steps {
				ctx := "prolog_slurmd"
				if s.script == mapEpilog {
					ctx = "epilog_slurmd"
				}
				stderr.WriteString(runMap(t, s.script, slurmEnv(dir, ctx, s.job, s.gpus, s.cuda)))
			}
			if d := cmp.Diff(tt.want, readMap(t, dir)); d != "" {
				t.Errorf("GPU files (-want +got):\n%s", d)
			}
			if tt.wantStderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr of a clean run:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
		})
	}
}

// TestJobMapUnwritable: a directory that cannot be made or written maps
// nothing and says so, and the scripts still exit 0.
func TestJobMapUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "dcgm-job-map")
	if got := runMap(t, mapProlog, slurmEnv(dir, "prolog_slurmd", "101", "0", "")); !strings.Contains(got, "cannot write "+dir+": nothing mapped") {
		t.Errorf("prolog stderr: %q", got)
	}
	// The epilog of a directory that exists but is not writable (a
	// directory that is not there has nothing to clear).
	ro := t.TempDir()
	runMap(t, mapProlog, slurmEnv(ro, "prolog_slurmd", "101", "0", ""))
	if err := os.Remove(filepath.Join(ro, ".lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })
	if os.Geteuid() == 0 {
		t.Log("root writes a read-only directory: the epilog's refusal is not checked")
		return
	}
	if got := runMap(t, mapEpilog, slurmEnv(ro, "epilog_slurmd", "101", "", "")); !strings.Contains(got, "nothing unmapped") {
		t.Errorf("epilog stderr: %q", got)
	}
}

// TestJobMapConcurrent: prologs and epilogs of jobs sharing a GPU run at
// once on a node (each rewrites whole files); the lock keeps every job.
func TestJobMapConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 12
	var want []string
	var wg sync.WaitGroup
	for i := range n {
		job := strconv.Itoa(1000 + i)
		want = append(want, job)
		wg.Go(func() { runMap(t, mapProlog, slurmEnv(dir, "prolog_slurmd", job, "0,1", "")) })
	}
	wg.Wait()
	got := readMap(t, dir)
	for _, g := range []string{"0", "1"} {
		slices.Sort(got[g])
		if d := cmp.Diff(want, got[g]); d != "" {
			t.Errorf("GPU %s after %d prologs at once (-want +got):\n%s", g, n, d)
		}
	}
	for _, job := range want {
		wg.Go(func() { runMap(t, mapEpilog, slurmEnv(dir, "epilog_slurmd", job, "", "")) })
	}
	wg.Wait()
	if got := readMap(t, dir); len(got) != 0 {
		t.Errorf("after every epilog: %v", got)
	}
}

var digits = regexp.MustCompile(`^[0-9]+$`)

// FuzzJobMapGPUs: whatever the GPU list and job id, the prolog exits 0,
// writes only GPU files named by a number of at most 2 digits without a
// leading zero (or "0"), each holding the job once, and nothing outside
// its directory; the epilog then leaves no GPU file.
//
// Each fuzzing process keeps one shell running (mapShell) that runs the
// scripts in a subshell per input, and the seeds are short lists: a
// shell started per script and a seed of 100 GPUs (600 processes a run)
// kept the target from getting past its seeds. What the prolog did is
// turned into Go branches (jobMapFeedback), the only coverage the fuzzer
// sees, so an input that makes the script do something new is kept.
func FuzzJobMapGPUs(f *testing.F) {
	for _, s := range []struct{ job, gpus string }{
		{"101", "0,1"}, {"101", "04-06,10"}, {"7", "../x,*,3-1"}, {"1; rm", "0"}, {"101", "NoDevFiles"},
		{"101", "97-99"}, {"101", "100"}, {"101", ",,"}, {"101", "0\n1"}, {"101", "-1"}, {"101", "1-"}, {"101", "00,0"},
		{"0101", "5"}, {"", "1"}, {"101", "2-2,2"}, {"101", "$(id),`id`"}, {"101", "7 8"}, {"101", "1-0x2"},
	} {
		f.Add(s.job, s.gpus)
	}
	name := regexp.MustCompile(`^(0|[1-9][0-9]?)$`)
	var sh mapShell
	defer sh.close()
	f.Fuzz(func(t *testing.T, job, gpus string) {
		if strings.ContainsRune(job+gpus, 0) {
			t.Skip("an environment variable holds no NUL")
		}
		parent := t.TempDir()
		dir := filepath.Join(parent, "map")
		stderr := sh.run(t, mapProlog, slurmEnv(dir, "prolog_slurmd", job, gpus, ""))
		jobMapFeedback(stderr, len(readMap(t, dir)))
		if entries, _ := os.ReadDir(parent); len(entries) > 1 {
			t.Fatalf("the prolog wrote beside its directory: %v", entries)
		}
		for g, jobs := range readMap(t, dir) {
			if !name.MatchString(g) {
				t.Errorf("GPU file %q", g)
			}
			if !digits.MatchString(job) || !slices.Equal(jobs, []string{job}) {
				t.Errorf("GPU %s lists %q for job %q", g, jobs, job)
			}
		}
		sh.run(t, mapEpilog, slurmEnv(dir, "epilog_slurmd", job, "", ""))
		if got := readMap(t, dir); len(got) != 0 {
			t.Errorf("after the epilog: %v", got)
		}
	})
}

// jobMapFeedback branches on what the prolog did, the only coverage the
// fuzzer sees of a shell script: the messages it wrote and how many GPU
// files it left. An input that makes the script do something new is
// kept.
func jobMapFeedback(stderr string, files int) {
	for line := range strings.SplitSeq(stderr, "\n") {
		switch {
		case line == "":
		case strings.Contains(line, "not a job id"):
			feedbackSink++
		case strings.Contains(line, "is not a number or a range"):
			feedbackSink += 2
		case strings.Contains(line, "cannot write"):
			feedbackSink += 3
		case strings.Contains(line, "held for"):
			feedbackSink += 4
		default:
			feedbackSink += 5
		}
	}
	switch {
	case files == 0:
		feedbackSink++
	case files == 1:
		feedbackSink += 2
	case files < 4:
		feedbackSink += 3
	case files < 16:
		feedbackSink += 4
	default:
		feedbackSink += 5
	}
}

// mapShell is a /bin/sh left running, with an empty environment, that
// runs each script as a subshell sourcing it with exactly the variables
// of env exported: what slurmd's fork and exec gives the script, less the
// exec. The one difference a script could see is $$, the shell's and not
// the subshell's (the scripts name temporary files with it, which only
// matters between prologs running at once; TestJobMapConcurrent runs
// those as slurmd does).
type mapShell struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	dir string // the files each run's stdout and stderr go to
}

// run is runMap through the shell.
func (s *mapShell) run(t testing.TB, script string, env []string) string {
	t.Helper()
	if s.cmd == nil {
		s.start(t)
	}
	var b strings.Builder
	b.WriteString("(")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b.WriteString(" export " + k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "';")
	}
	fmt.Fprintf(&b, " . ./%s ) >%s/out 2>%s/err; echo \"rc=$?\"\n", script, s.dir, s.dir)
	if _, err := io.WriteString(s.in, b.String()); err != nil {
		s.close()
		t.Fatalf("shell: %v", err)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		s.close() // the next input starts a new one
		t.Fatalf("shell: %v", err)
	}
	stdout, _ := os.ReadFile(filepath.Join(s.dir, "out"))
	stderr, _ := os.ReadFile(filepath.Join(s.dir, "err"))
	if line != "rc=0\n" || len(stdout) > 0 {
		t.Fatalf("%s %v: %s, stdout %q, stderr:\n%s", script, env, strings.TrimSpace(line), stdout, stderr)
	}
	return string(stderr)
}

func (s *mapShell) start(t testing.TB) {
	t.Helper()
	dir, err := os.MkdirTemp("", "strata-jobmap-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-s")
	cmd.Env = []string{}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.in, s.out, s.dir = cmd, in, bufio.NewReader(out), dir
}

func (s *mapShell) close() {
	if s.cmd == nil {
		return
	}
	_ = s.in.Close()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
	s.cmd = nil
}

// TestJobMapHeaders: the scripts say what they are for and point to the
// README, which says how to install them.
func TestJobMapHeaders(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{mapProlog, mapEpilog} {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("#!/bin/sh\n")) || !bytes.Contains(data, []byte("slurm-plugins/README.md")) {
			t.Errorf("%s: no #!/bin/sh or no pointer to the README", s)
		}
		if info, err := os.Stat(s); err != nil || info.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable", s)
		}
		if !bytes.Contains(readme, []byte(s)) {
			t.Errorf("README.md does not say how to install %s", s)
		}
	}
	if !bytes.Contains(readme, []byte("--hpc-job-mapping-dir")) {
		t.Error("README.md does not say how to start dcgm-exporter with --hpc-job-mapping-dir")
	}
}
