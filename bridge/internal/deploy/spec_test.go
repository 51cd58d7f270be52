package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// What a job asks for, from its comment and its working directory (a real
// folder under a temporary host root).
func TestJobSpec(t *testing.T) {
	host := t.TempDir()
	local := func(p string) string { return filepath.Join(host, p) }
	write := func(dir, data string) {
		if err := os.MkdirAll(local(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if data != "" {
			if err := os.WriteFile(local(dir+"/"+servespec.FileName), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("/jobs/plain", "")
	write("/jobs/file", "name: llama-ft\nmodel: /shared/proj/llama\nruntime: vllm\ngpus: 2\nreplicas: 2\n")
	write("/jobs/autoscale", "name: small\nmodel: /shared/proj/small\ncpu: \"2\"\nautoscale:\n  min_replicas: 1\n  max_replicas: 3\n")
	write("/jobs/bad", "name: llama-ft\nmodel: /shared/proj/llama\ngpus: two\n")
	hostile(t, local)
	defaults := servespec.Defaults{Runtime: "generic", Replicas: 1, GPUs: 1}

	tests := map[string]struct {
		job       slurmrest.Job
		want      *servespec.Spec
		wantErr   error
		wantCheck string
		wantMsg   string
	}{
		"comment only: the working directory with the defaults": {
			job:  slurmrest.Job{ID: 1, Comment: "strata:serve=llama", WorkDir: "/jobs/plain"},
			want: &servespec.Spec{Name: "llama", ModelPath: "/jobs/plain", Runtime: "generic", Replicas: 1, GPUs: 1},
		},
		"comment among other items": {
			job:  slurmrest.Job{ID: 1, Comment: "strata:class=train,strata:serve=llama", WorkDir: "/jobs/plain"},
			want: &servespec.Spec{Name: "llama", ModelPath: "/jobs/plain", Runtime: "generic", Replicas: 1, GPUs: 1},
		},
		"the file, defaults fill the rest": {
			job:  slurmrest.Job{ID: 2, WorkDir: "/jobs/file"},
			want: &servespec.Spec{Name: "llama-ft", ModelPath: "/shared/proj/llama", Runtime: "vllm", Replicas: 2, GPUs: 2},
		},
		"the file wins over the comment": {
			job:  slurmrest.Job{ID: 2, Comment: "strata:serve=other", WorkDir: "/jobs/file"},
			want: &servespec.Spec{Name: "llama-ft", ModelPath: "/shared/proj/llama", Runtime: "vllm", Replicas: 2, GPUs: 2},
		},
		"autoscaling keeps no replicas": {
			job: slurmrest.Job{ID: 3, WorkDir: "/jobs/autoscale"},
			want: &servespec.Spec{Name: "small", ModelPath: "/shared/proj/small", Runtime: "generic", GPUs: 1, CPU: "2",
				Autoscale: &servespec.Autoscale{MinReplicas: 1, MaxReplicas: 3, TargetCPUPercent: 80}},
		},
		"nothing asked": {
			job:     slurmrest.Job{ID: 4, Comment: "strata:class=train", WorkDir: "/jobs/plain"},
			wantErr: ErrNotRequested,
		},
		"a bad file says where": {
			job:       slurmrest.Job{ID: 5, WorkDir: "/jobs/bad"},
			wantCheck: CheckSpec, wantMsg: "/jobs/bad/strata-serve.yaml:3:7",
		},
		"a bad name in the comment": {
			job:       slurmrest.Job{ID: 6, Comment: "strata:serve=Llama_FT", WorkDir: "/jobs/plain"},
			wantCheck: CheckSpec, wantMsg: "Llama_FT",
		},
		"comment, but no working directory": {
			job:       slurmrest.Job{ID: 7, Comment: "strata:serve=llama"},
			wantCheck: CheckSpec, wantMsg: "no working directory",
		},
		"another user's job does not read this user's file": {
			job:       slurmrest.Job{ID: 8, UserID: int64(os.Getuid()) + 1, WorkDir: "/jobs/file"},
			wantCheck: CheckSpec, wantMsg: fmt.Sprintf("belongs to uid %d, not uid %d", os.Getuid(), os.Getuid()+1),
		},
		"a job without a valid user id reads nothing": {
			job:       slurmrest.Job{ID: 9, UserID: -1, WorkDir: "/jobs/file"},
			wantCheck: CheckSpec, wantMsg: "no valid user id",
		},
	}
	for _, h := range hostileCases {
		if h.dir == "given-away" && os.Geteuid() != 0 {
			continue // only root can give a file away: run the unit tests as root to check it
		}
		tests["hostile: "+h.dir] = struct {
			job       slurmrest.Job
			want      *servespec.Spec
			wantErr   error
			wantCheck string
			wantMsg   string
		}{job: slurmrest.Job{ID: 20, Comment: "strata:serve=llama", WorkDir: "/jobs/" + h.dir}, wantCheck: CheckSpec, wantMsg: h.want}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.job.UserID == 0 {
				tc.job.UserID = int64(os.Getuid())
			}
			var (
				got  *servespec.Spec
				err  error
				done = make(chan struct{})
			)
			go func() { got, err = JobSpec(tc.job, local, defaults); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("JobSpec still blocks after 10s")
			}
			if err != nil && strings.Contains(err.Error(), secretToken) {
				t.Errorf("the refusal quotes the secret: %v", err)
			}
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.wantCheck != "":
				wantRefusal(t, err, tc.wantCheck, tc.wantMsg)
			default:
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("spec (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// secretToken stands for the bridge's own token file, which a hostile
// job links to in the hope that a refusal prints it.
const secretToken = "eyJhbGciOi-the-bridge-token"

// hostileCases are working directories whose strata-serve.yaml a user
// arranged against the bridge (made by hostile), and what the refusal
// must say.
var hostileCases = []struct{ dir, want string }{
	{"fifo", "named pipe"},                 // a plain read blocks for ever
	{"zero", "symbolic link"},              // a plain read runs out of memory
	{"token", "symbolic link"},             // a parse error would quote the token
	{"folder", "is not a regular file"},    // neither a file
	{"huge", "too large"},                  // read no more than the cap
	{"given-away", "belongs to uid 12345"}, // root only: a file of another user (a hard link looks the same)
}

// hostile makes the hostileCases' working directories under local("/jobs").
func hostile(t *testing.T, local func(string) string) {
	t.Helper()
	etc := local("/etc/strata")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(etc, "slurm.token")
	if err := os.WriteFile(token, []byte(secretToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range hostileCases {
		dir := local("/jobs/" + h.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, servespec.FileName)
		var err error
		switch h.dir {
		case "fifo":
			err = syscall.Mkfifo(p, 0o644)
		case "zero":
			err = os.Symlink("/dev/zero", p)
		case "token":
			err = os.Symlink(token, p)
		case "folder":
			err = os.Mkdir(p, 0o755)
		case "huge":
			err = os.WriteFile(p, []byte("name: x\n# "+strings.Repeat("x", servespec.MaxFileSize)+"\n"), 0o644)
		case "given-away":
			if err = os.WriteFile(p, []byte("name: llama\nmodel: /shared/proj/llama\n"), 0o644); err == nil && os.Geteuid() == 0 {
				err = os.Chown(p, 12345, 12345)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Which version a rollback restores.
func TestPickRollback(t *testing.T) {
	vs := []store.Version{
		{JobID: 10, Outcome: store.OutcomeReady},
		{JobID: 11, Outcome: store.OutcomeFailed},
		{JobID: 12, Outcome: store.OutcomeReady},
		{JobID: 13, Outcome: store.OutcomeTimeout},
	}
	tests := map[string]struct {
		current, to int64
		want        int64
		wantMsg     string
	}{
		"the previous ready one":               {current: 13, want: 12},
		"skips versions that never rolled out": {current: 12, want: 10},
		"named with --to":                      {current: 13, to: 11, want: 11},
		"nothing before the first":             {current: 10, wantMsg: "no version before the current one (job-10) ever rolled out"},
		"not a version of it":                  {current: 13, to: 99, wantMsg: "job-99 is not a version of this deployment; its versions are job-10 (ready), job-11 (failed)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := pickRollback(vs, tc.current, tc.to)
			if tc.wantMsg != "" {
				wantRefusal(t, err, CheckVersion, tc.wantMsg)
				return
			}
			if err != nil || got.JobID != tc.want {
				t.Errorf("pickRollback = job-%d, %v; want job-%d", got.JobID, err, tc.want)
			}
		})
	}
}
