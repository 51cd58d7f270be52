package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := JobSpec(tc.job, local, defaults)
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
