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
	searchable(t, root)
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
	if out.Stderr == nil || str(out.Stderr.Error) != "does not exist or is not readable by the user it is read for" || out.Stderr.Tail != nil {
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

// searchable lets every user search the folders above dir (t.TempDir's
// are root's 0700), as the folders above a site's output root are.
func searchable(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJobOutputForeignFolder: a job whose output points into another
// user's private folder gets the same answer, byte for byte, for a file
// that exists there and for one that does not: the portal looks no
// further than the job's user could.
func TestJobOutputForeignFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to other users")
	}
	h := newHarness(t)
	const uid, other = 2001, 2002
	root := h.outputRoot
	searchable(t, root)
	private := filepath.Join(root, "other", "private")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(private, "secret.out")
	if err := os.WriteFile(secret, []byte("the other user's secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(root, "other"), private, secret} {
		if err := os.Chown(p, other, other); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	jobs := append([]clustertest.Job(nil), gpu1Jobs...)
	jobs = append(jobs,
		clustertest.Job{ID: 910130, User: "mem", Account: "acme-llm", UID: uid, WorkDir: private, StdOut: private + "/secret.out"},
		clustertest.Job{ID: 910131, User: "mem", Account: "acme-llm", UID: uid, WorkDir: private, StdOut: private + "/nosuch.out"},
		clustertest.Job{ID: 910132, User: "mem", Account: "acme-llm", UID: other, WorkDir: private, StdOut: private + "/secret.out"})
	h.beds["gpu1"].SetJobs(jobs...)
	if err := h.pollers["gpu1"].Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	answer := func(id string) (api.JobOutput, []byte) {
		t.Helper()
		code, body := h.do("mem", "GET", "/v1/jobs/gpu1/"+id+"/output", nil)
		if code != 200 {
			t.Fatalf("GET output of %s = %d %s", id, code, body)
		}
		var out api.JobOutput
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out, body
	}
	exists, existsBody := answer("910130")
	missing, _ := answer("910131")
	// The same answer but for the file's name, which the caller gave.
	exists.Stdout.Path, missing.Stdout.Path = "", ""
	a, _ := json.Marshal(exists)
	b, _ := json.Marshal(missing)
	if string(a) != string(b) {
		t.Errorf("a foreign file that exists and one that does not are told apart:\n%s\n%s", a, b)
	}
	if strings.Contains(string(existsBody), "secret") && !strings.Contains(string(existsBody), "secret.out") {
		t.Errorf("the answer shows the file: %s", existsBody)
	}
	if exists.Stdout.Error == nil || exists.Stdout.Tail != nil || exists.Workdir.Error == nil || len(exists.Workdir.Entries) != 0 {
		t.Errorf("a foreign private folder: %s", existsBody)
	}
	// Its own user's job reads it.
	if own, body := answer("910132"); own.Stdout.Error != nil || own.Stdout.Tail == nil {
		t.Errorf("the folder's owner's job: %s", body)
	}
}
