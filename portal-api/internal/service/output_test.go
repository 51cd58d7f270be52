package service

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
)

// TestJobOutput: a job's stdout tail, stderr and working directory are
// shown from beneath the cluster's output root, only what the job's user
// owns: another user's file, a symbolic link and a path outside the root
// are refused, each on its own, and another user's file is not listed.
func TestJobOutput(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to other users")
	}
	h := newHarness(t)
	const uid, other = 2001, 2002
	root := h.outputRoot
	work := filepath.Join(root, "mem", "run")
	write := func(name string, owner int, data string) {
		t.Helper()
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "mem"), work} {
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("step done\n", 10000) + "loss 0.25\n" // 100 KB: more than the tail
	write("llm-train-910101.out", uid, big)
	write("other.err", other, "the other user's secret\n")
	write("notes.txt", uid, "mine\n")
	write("theirs.txt", other, "not mine\n")
	if err := os.Symlink("notes.txt", filepath.Join(work, "link.out")); err != nil {
		t.Fatal(err)
	}
	jobs := append([]clustertest.Job(nil), gpu1Jobs...)
	jobs[0].UID, jobs[0].WorkDir, jobs[0].StdOut, jobs[0].StdErr = uid, work, "%x-%j.out", work+"/other.err"
	jobs = append(jobs,
		clustertest.Job{ID: 910120, User: "mem", Account: "acme-llm", UID: uid, WorkDir: work, StdOut: "link.out"},
		clustertest.Job{ID: 910121, User: "mem", Account: "acme-llm", UID: uid, WorkDir: "/etc", StdOut: "/etc/passwd"})
	h.beds["gpu1"].SetJobs(jobs...)
	if err := h.pollers["gpu1"].Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	get := func(user string, id string) (int, api.JobOutput, string) {
		t.Helper()
		code, body := h.do(user, "GET", "/v1/jobs/gpu1/"+id+"/output", nil)
		var out api.JobOutput
		if code == 200 {
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
		}
		return code, out, string(body)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}

	code, out, body := get("mem", "910101")
	if code != 200 {
		t.Fatalf("GET output = %d %s", code, body)
	}
	if out.Stdout.Path != work+"/llm-train-910101.out" || out.Stdout.Error != nil || !strings.HasSuffix(str(out.Stdout.Tail), "loss 0.25\n") ||
		len(str(out.Stdout.Tail)) != core.OutputTailBytes || out.Stdout.Truncated == nil || !*out.Stdout.Truncated || *out.Stdout.Size != int64(len(big)) {
		t.Errorf("stdout = %s %v %v (tail %d bytes)", out.Stdout.Path, str(out.Stdout.Error), out.Stdout.Size, len(str(out.Stdout.Tail)))
	}
	if out.Stderr == nil || !strings.Contains(str(out.Stderr.Error), "not owned by the user") || out.Stderr.Tail != nil {
		t.Errorf("another user's stderr = %+v", out.Stderr)
	}
	if strings.Contains(body, "secret") || strings.Contains(body, "theirs.txt") || strings.Contains(body, "link.out") {
		t.Errorf("the answer shows another user's file or a link (stderr %+v, workdir %+v)", out.Stderr, out.Workdir)
	}
	var names []string
	for _, e := range out.Workdir.Entries {
		names = append(names, e.Name)
	}
	if out.Workdir.Error != nil || strings.Join(names, " ") != "llm-train-910101.out notes.txt" {
		t.Errorf("workdir = %v %s", names, str(out.Workdir.Error))
	}
	// The job's viewer reads it too; another tenant's user does not.
	if code, _, _ := get("view", "910101"); code != 200 {
		t.Errorf("view: GET output = %d", code)
	}
	if code, _, _ := get("gmem", "910101"); code != 404 {
		t.Errorf("gmem: GET output of acme's job = %d", code)
	}

	_, out, _ = get("mem", "910120")
	if !strings.Contains(str(out.Stdout.Error), "symbolic link") || out.Stdout.Tail != nil {
		t.Errorf("a symlinked stdout = %+v", out.Stdout)
	}
	_, out, body = get("mem", "910121")
	if !strings.Contains(str(out.Stdout.Error), "not beneath") || !strings.Contains(str(out.Workdir.Error), "not beneath") || strings.Contains(body, "root:") {
		t.Errorf("outside the root: %s", body)
	}
}
