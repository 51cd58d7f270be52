package controller_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// TestGPUOrderReversed: two jobs share gpu1. Job 1 is idle and job 2 busy,
// but Slurm numbers the node's GPUs in the reverse of NVML's order (as
// Slurm 24.11 and the NVIDIA driver did on a 4× H100 NVL node): Slurm
// gives job 1 GPUs 0-1 and job 2 GPUs 2-3, while NVML's GPUs 0-1 run job
// 2's processes. Read by Slurm's indices, the busy job looks idle and the
// idle one busy. The node agent's map (the processes' jobs, from their
// cgroups) contradicts Slurm's: the samples are joined on it, so the busy
// job, whose processes it places on GPUs of its own, is judged on them
// and spared; the idle job, which has no process to place, is not judged
// (the skip is counted, logged and shown by the API), and once its
// processes are placed too it is warned on its own GPUs. Where the two
// maps agree, the idle job is warned and the busy one spared.
func TestGPUOrderReversed(t *testing.T) {
	for name, tc := range map[string]struct {
		// busyOn are the NVML indices where job 2's processes run (and the
		// GPUs are busy); job 1's GPUs have no process and are idle.
		// unattributed: the agent cannot tie job 2's processes to it;
		// idleProcs: job 1 has a process on each of the other GPUs 0-3.
		busyOn         []int
		unattributed   bool
		idleProcs      bool
		wantActions    []string
		wantSkip       decide.SkipReason
		wantLog        string
		wantMismatches float64
	}{
		"reversed: the busy job is judged on its own GPUs, the idle one without processes is not judged": {
			busyOn: []int{0, 1}, wantSkip: decide.SkipBusy, wantMismatches: 1,
			wantLog: `msg="GPU order mismatch: only jobs the agent places are acted on" node=gpu1 detail="the node agent and Slurm place jobs on different GPUs: job 2 runs on GPU 0 (NVML), which Slurm gives to job 1; job 2 runs on GPU 1 (NVML), which Slurm gives to job 1`,
		},
		"reversed, both jobs' processes placed: the idle job is warned on its own GPUs, the busy one spared": {
			busyOn: []int{0, 1}, idleProcs: true, wantActions: []string{"warn"}, wantSkip: decide.SkipBusy,
		},
		// Read by Slurm's indices, busy job 2 looks idle; the agent's map
		// has no job on any GPU, so nothing contradicts Slurm's. Its
		// processes it cannot place are what marks the node.
		"reversed, the processes in no job the agent can find: nothing on the node is acted on": {
			busyOn: []int{0, 1}, unattributed: true, wantSkip: decide.SkipGPUMismatch, wantMismatches: 2,
			wantLog: `msg="GPU order mismatch: only jobs the agent places are acted on" node=gpu1 detail="the node agent cannot tell whose processes run on its GPUs (processes of no Slurm job it could find: 1 on GPU 0 (NVML), 1 on GPU 1 (NVML))`,
		},
		"agreeing: the idle job is warned, the busy one spared": {
			busyOn: []int{2, 3}, wantActions: []string{"warn"}, wantSkip: decide.SkipBusy,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t, "26.05", cancelRules, 0)
			b.twoJobs()
			b.startAgentProcs(func(g int) (util int, pids, jobs string) {
				for _, i := range tc.busyOn {
					if i == g && tc.unattributed {
						return 95, fmt.Sprint(4700 + g), ""
					}
					if i == g {
						return 95, "", "2"
					}
				}
				if tc.idleProcs && g < 4 {
					return 0, "", "1"
				}
				return 0, "", ""
			})
			b.ctl = b.newController()
			srv := httptest.NewServer(withToken(b.ctl.Handler(time.Hour)))
			defer srv.Close()

			if got := b.mustTick(); !cmp.Equal(got, tc.wantActions) {
				t.Errorf("actions = %v, want %v\nlog:\n%s", got, tc.wantActions, b.logs.String())
			}
			if v := counter(t, b.metrics.Skipped.WithLabelValues(decide.SkipGPUMismatch.Label())); v != tc.wantMismatches {
				t.Errorf("skipped{reason=gpu_map_mismatch} = %v, want %v", v, tc.wantMismatches)
			}
			code, body := get(t, fmt.Sprintf("%s/v1/jobs/2/reclaim", srv.URL))
			var jr controller.JobReclaim
			if err := json.Unmarshal([]byte(body), &jr); err != nil || code != http.StatusOK {
				t.Fatalf("GET /v1/jobs/2/reclaim = %d %s (%v)", code, body, err)
			}
			if jr.Skipped == nil || jr.Skipped.Reason != tc.wantSkip {
				t.Errorf("job 2 skipped = %+v, want %q", jr.Skipped, tc.wantSkip)
			}
			if tc.wantSkip == decide.SkipGPUMismatch && jr.Skipped != nil && !strings.Contains(jr.Skipped.Detail, "Slurm's GPU order (gres.conf) differs from NVML's") &&
				!strings.Contains(jr.Skipped.Detail, "which GPU each job's samples come from is not known") {
				t.Errorf("job 2 skip detail %q does not say what is wrong", jr.Skipped.Detail)
			}
			if logs := b.logs.String(); tc.wantLog != "" && !strings.Contains(logs, tc.wantLog) {
				t.Errorf("no log line %q:\n%s", tc.wantLog, logs)
			}
		})
	}
}

// twoJobs makes slurmrestd list job 2 beside the captured job 1, on the
// same node and run: job 1 holds GPUs 0-1 and job 2 GPUs 2-3, by Slurm's
// indices.
func (b *bed) twoJobs() {
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
	second["gres_detail"] = []string{"gpu:h100:2(IDX:2-3)"}
	resp["jobs"] = []any{jobs[0], second}
	rec.Response = mustJSON(b.t, resp)
	b.srv.Handle(http.MethodGet, "/slurm/"+b.slurm.Info().Parser+"/jobs/", slurmresttest.Reply(rec))
}
