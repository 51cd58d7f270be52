package controller_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/dcgmprom/dcgmpromtest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// TestGPUOrderDCGMJobLabels: the Prometheus source over a replayed
// dcgm-exporter exposition with its HPC job mapping on (hpc_job labels).
// Slurm gives job 1 GPUs 0-1 of gpu1 and job 2 GPUs 2-3; in the
// exposition GPUs 0-1 are busy and labelled job 2, GPUs 2-3 idle and
// labelled job 1 (GPU 3's label of job 4711, which Slurm does not run,
// is left out here: a GPU shared with another job places neither).
// Read by Slurm's index, busy job 2 looks idle and would be warned; the
// labels contradict Slurm's placement, so the samples are joined on them:
// idle job 1 is warned on its own GPUs and busy job 2 is spared. Where
// the labels agree with Slurm, nothing changes; where a label puts a job
// on a GPU Slurm gives to no job, that job is not judged and the node is
// logged; without labels, today's behaviour stays (read by Slurm's
// index: here the busy job warned, as by any source whose order no one
// checks; in a dry run, as this harness replays no record of job 2).
func TestGPUOrderDCGMJobLabels(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "collect", "testdata", "dcgm-exporter-hpc-job.prom"))
	if err != nil {
		t.Fatal(err)
	}
	exposition := string(body)
	relabel := func(gpu, jobs string) func(string) string {
		return func(s string) string {
			re := regexp.MustCompile(`(gpu="` + gpu + `",[^}]*),hpc_job="[^"]*"`)
			return re.ReplaceAllString(s, `${1},hpc_job="`+jobs+`"`)
		}
	}
	unlabel := func(s string) string { return regexp.MustCompile(`,hpc_job="[^"]*"`).ReplaceAllString(s, "") }
	// swap exchanges GPUs 0-1 with 2-3 (values and labels alike).
	swap := func(s string) string {
		return strings.NewReplacer(`gpu="0"`, `gpu="2"`, `gpu="1"`, `gpu="3"`, `gpu="2"`, `gpu="0"`, `gpu="3"`, `gpu="1"`).Replace(s)
	}
	exposition = regexp.MustCompile(`(?m)^.*hpc_job="4711".*\n`).ReplaceAllString(exposition, "")
	for name, tc := range map[string]struct {
		edit        []func(string) string
		dryRun      bool
		wantJob     int64 // the job acted on (0: 1)
		wantActions []string
		wantSkip1   decide.SkipReason // job 1's skip where no action
		wantSkip2   decide.SkipReason
		wantLog     string
	}{
		"labels contradict Slurm: joined on them, the idle job warned, the busy one spared": {
			wantActions: []string{"warn"}, wantSkip2: decide.SkipBusy,
			wantLog: `msg="GPU order mismatch: only jobs dcgm-exporter's job labels place are acted on" node=gpu1 ` +
				`detail="dcgm-exporter's job labels (hpc_job) and Slurm place jobs on different GPUs: job 2 is labelled on GPU 0 (dcgm-exporter's gpu), which Slurm gives to job 1`,
		},
		"labels of a job on a GPU Slurm gives to no job: that job is not judged, the other is": {
			// GPU 4 (idle, no job in Slurm) carries job 2's label too: the
			// labels put job 2 on three GPUs, Slurm on two.
			edit: []func(string) string{func(s string) string {
				return s + strings.ReplaceAll(strings.ReplaceAll(grepGPU(s, "2"), `gpu="2"`, `gpu="4"`), `hpc_job="1"`, `hpc_job="2"`)
			}},
			wantActions: []string{"warn"}, wantSkip2: decide.SkipGPUMismatch,
			wantLog: `job 2 is labelled on GPU 4 (dcgm-exporter's gpu), which Slurm gives to no job`,
		},
		"labels agree with Slurm: read by Slurm's index": {
			edit:        []func(string) string{swap},
			wantActions: []string{"warn"}, wantSkip2: decide.SkipBusy,
		},
		"a GPU whose label disagrees is not judged for the other job": {
			// GPU 3 (idle) labelled job 2 where Slurm gives it to job 1:
			// job 1 has one labelled GPU of two, job 2 three of two.
			edit:        []func(string) string{swap, relabel("1", "2")},
			wantActions: nil, wantSkip1: decide.SkipGPUMismatch, wantSkip2: decide.SkipGPUMismatch,
			wantLog: `job 2 is labelled on GPU 1 (dcgm-exporter's gpu), which Slurm gives to job 1`,
		},
		"no labels: Slurm's index alone, as before": {
			edit: []func(string) string{unlabel}, dryRun: true, wantJob: 2,
			wantActions: []string{"warn"}, wantSkip1: decide.SkipBusy,
		},
	} {
		t.Run(name, func(t *testing.T) {
			rules := cancelRules
			if tc.dryRun {
				rules = dryRunRules
			}
			b := newBed(t, "26.05", rules, 0)
			b.twoJobs()
			exp := exposition
			for _, e := range tc.edit {
				exp = e(exp)
			}
			prom := dcgmpromtest.New(t, dcgmpromtest.Exposition{Body: []byte(exp)})
			b.ctl = b.newControllerOver(&collect.Prometheus{URL: prom.URL, Step: 10 * time.Second, Window: time.Hour,
				MemActivityMetric: "DCGM_FI_DEV_MEM_COPY_UTIL", Now: b.clock})
			srv := httptest.NewServer(withToken(b.ctl.Handler(time.Hour)))
			defer srv.Close()

			d, err := b.ctl.Cycle(t.Context())
			if err != nil {
				t.Fatalf("cycle: %v\nlog:\n%s", err, b.logs.String())
			}
			b.setClock(b.clock().Add(10 * time.Second))
			if got := kinds(d); !cmp.Equal(got, tc.wantActions) {
				t.Errorf("actions = %v, want %v\nlog:\n%s", got, tc.wantActions, b.logs.String())
			}
			for _, a := range d.Actions {
				if want := max(tc.wantJob, 1); a.JobID != want {
					t.Errorf("%s of job %d, want only job %d acted on", a.Kind, a.JobID, want)
				}
			}
			for id, want := range map[int64]decide.SkipReason{1: tc.wantSkip1, 2: tc.wantSkip2} {
				if want == "" {
					continue
				}
				code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, id))
				var jr controller.JobReclaim
				if err := json.Unmarshal([]byte(body), &jr); err != nil || code != http.StatusOK {
					t.Fatalf("GET /v1/jobs/%d/reclaim = %d %s (%v)", id, code, body, err)
				}
				if jr.Skipped == nil || jr.Skipped.Reason != want {
					t.Errorf("job %d skipped = %+v, want %q", id, jr.Skipped, want)
				}
			}
			if logs := b.logs.String(); tc.wantLog != "" && !strings.Contains(logs, tc.wantLog) {
				t.Errorf("no log line %q:\n%s", tc.wantLog, logs)
			}
		})
	}
}

// grepGPU returns the sample lines of one GPU of an exposition.
func grepGPU(exposition, gpu string) string {
	var b strings.Builder
	for _, l := range strings.Split(exposition, "\n") {
		if strings.Contains(l, `{gpu="`+gpu+`",`) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestMIGPerInstance: gpu1's GPU 0 is in MIG mode (GPU instances 1 and 9,
// 1g.10gb), and Slurm gives job 1 the MIG device of index 0 and job 2
// that of index 1 (gres/gpu:1g.10gb). In the replayed dcgm-exporter
// exposition instance 1 is idle and instance 9 busy, while GPU 0 as a
// whole reads 0 % utilisation: each job is judged on its own instance,
// so idle job 1 is warned and busy job 2 spared.
func TestMIGPerInstance(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "collect", "testdata", "dcgm-exporter-mig.prom"))
	if err != nil {
		t.Fatal(err)
	}
	b := newBed(t, "26.05", cancelRules, 0)
	b.migGres("gpu:1g.10gb:1(IDX:0)", "gpu:1g.10gb:1(IDX:1)")
	prom := dcgmpromtest.New(t, dcgmpromtest.Exposition{Body: body})
	b.ctl = b.newControllerOver(&collect.Prometheus{URL: prom.URL, Step: 10 * time.Second, Window: time.Hour, Now: b.clock})
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Hour)))
	defer srv.Close()
	d, err := b.ctl.Cycle(t.Context())
	if err != nil {
		t.Fatalf("cycle: %v\nlog:\n%s", err, b.logs.String())
	}
	if got := kinds(d); !cmp.Equal(got, []string{"warn"}) || d.Actions[0].JobID != 1 {
		t.Fatalf("actions = %v (%+v), want job 1 warned\nlog:\n%s", got, d.Actions, b.logs.String())
	}
	code, out := get(t, srv.URL+"/v1/jobs/2/reclaim")
	var jr controller.JobReclaim
	if err := json.Unmarshal([]byte(out), &jr); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/jobs/2/reclaim = %d %s (%v)\nlog:\n%s", code, out, err, b.logs.String())
	}
	if jr.Skipped == nil || jr.Skipped.Reason != decide.SkipBusy {
		t.Errorf("job 2 skipped = %+v, want busy (its own MIG device works)", jr.Skipped)
	}
}

// migGres is twoJobs with MIG devices: job 1 and job 2 on gpu1, each
// with the gres_detail given (as Slurm writes a MIG gres), in the job
// list and in job 1's own record.
func (b *bed) migGres(job1, job2 string) {
	b.t.Helper()
	rec := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		b.t.Fatal(err)
	}
	jobs := resp["jobs"].([]any)
	var second map[string]any
	if err := json.Unmarshal(mustJSON(b.t, jobs[0]), &second); err != nil {
		b.t.Fatal(err)
	}
	second["job_id"] = 2
	second["gres_detail"] = []string{job2}
	jobs[0].(map[string]any)["gres_detail"] = []string{job1}
	resp["jobs"] = []any{jobs[0], second}
	rec.Response = mustJSON(b.t, resp)
	b.srv.Handle(http.MethodGet, "/slurm/"+b.slurm.Info().Parser+"/jobs/", slurmresttest.Reply(rec))
	var one map[string]any
	if err := json.Unmarshal(b.job.Response, &one); err != nil {
		b.t.Fatal(err)
	}
	for _, j := range one["jobs"].([]any) {
		j.(map[string]any)["gres_detail"] = []string{job1}
	}
	b.job.Response = mustJSON(b.t, one)
	b.srv.Handle(http.MethodGet, b.jobPath(), slurmresttest.Reply(b.job))
}
