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

// TestSkipsVisible: a job whose samples stop is not judged, and says so:
// counted by reason, explained by GET /v1/jobs/{id}/reclaim, and once the
// rule has judged nothing for a whole window, a log line names the rule
// and the reason.
func TestSkipsVisible(t *testing.T) {
	b := newBed(t, "26.05", requeueRules, 90) // busy: judged, no action
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Hour)))
	defer srv.Close()
	b.mustTick()
	if v := counter(t, b.metrics.Skipped.WithLabelValues("busy")); v != 1 {
		t.Errorf("skipped{reason=busy} = %v, want 1", v)
	}
	// The agent stops sampling: after two intervals the samples are stale.
	for range 10 {
		b.setClock(b.clock().Add(10 * time.Second))
		if _, err := b.ctl.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if v := counter(t, b.metrics.Skipped.WithLabelValues("stale_data")); v < 8 {
		t.Errorf("skipped{reason=stale_data} = %v, want 8 or more", v)
	}
	code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, jobID))
	var jr controller.JobReclaim
	if err := json.Unmarshal([]byte(body), &jr); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/jobs/1/reclaim = %d %s (%v)", code, body, err)
	}
	if jr.Skipped == nil || jr.Skipped.Reason != decide.SkipStaleData || jr.Skipped.Judged || !strings.Contains(jr.Skipped.Detail, "gpu1:0: no samples") {
		t.Errorf("skipped = %+v, want stale data, not judged, naming the GPU", jr.Skipped)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, `msg="a rule has judged no job for a whole window" rule=test window=1m0s jobs=1 reason="stale data"`) {
		t.Errorf("no log line for the rule that judged nothing:\n%s", logs)
	}
	if n := strings.Count(logs, "a rule has judged no job"); n != 1 {
		t.Errorf("%d drought log lines in 100 s of a 1m window, want 1", n)
	}
	if code, body := get(t, srv.URL+"/metrics"); !strings.Contains(body, `strata_reclaim_skipped_total{reason="stale_data"}`) {
		t.Errorf("GET /metrics = %d, lacks the skip counter:\n%s", code, body)
	}
}

// TestUnreadableJobSkipped: a job whose gres_detail does not pair with
// its nodes is skipped, counted and logged with its id; the other jobs of
// the list are judged and acted on, and the cycle does not fail.
func TestUnreadableJobSkipped(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	rec := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		t.Fatal(err)
	}
	jobs := resp["jobs"].([]any)
	var odd map[string]any
	if err := json.Unmarshal(mustJSON(t, jobs[0]), &odd); err != nil {
		t.Fatal(err)
	}
	odd["job_id"] = 2
	odd["gres_detail"] = []string{"gpu:2(IDX:0-1)", "gpu:2(IDX:2-3)"} // two entries for one node
	resp["jobs"] = []any{odd, jobs[0]}
	rec.Response = mustJSON(t, resp)
	b.srv.Handle(http.MethodGet, "/slurm/"+b.slurm.Info().Parser+"/jobs/", slurmresttest.Reply(rec))
	d, err := b.tick()
	if err != nil {
		t.Fatalf("cycle with an unreadable job: %v", err)
	}
	if got := kinds(d); !cmp.Equal(got, []string{"warn"}) {
		t.Errorf("actions = %v, want job 1 warned", got)
	}
	if st := b.ctl.LastStatus(); !st.SlurmOK || st.Error != "" || st.Jobs != 1 {
		t.Errorf("status = %+v, want Slurm ok and one job judged", st)
	}
	if v := counter(t, b.metrics.Skipped.WithLabelValues("unreadable_record")); v != 1 {
		t.Errorf("skipped{reason=unreadable_record} = %v, want 1", v)
	}
	if logs := b.logs.String(); !strings.Contains(logs, `msg="job record unreadable: the job is skipped, the others are judged" job_id=2`) ||
		!strings.Contains(logs, "refusing to guess") {
		t.Errorf("no log line for job 2:\n%s", logs)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIdleGPUSecondsSeenOnly: the idle GPU time of a job judged idle is
// the time its samples show idle; while the samples stop, the time still
// counts as judged idle, but not as idle.
func TestIdleGPUSecondsSeenOnly(t *testing.T) {
	b := newBed(t, "26.05", `{"apiVersion": "strata/v1", "kind": "ReclaimRules",
	  "rules": [{"name": "tell", "idle": {"window": "1m"}, "action": "notify"}]}`, 0)
	if got := b.mustTick(); !cmp.Equal(got, []string{"notify"}) {
		t.Fatalf("first cycle: %v, want notify", got)
	}
	b.mustTick()
	b.mustTick()  // two cycles of 10 s with a sample each: 2 GPUs × 20 s seen idle
	for range 3 { // the agent stops sampling: 30 s judged idle, not seen
		b.setClock(b.clock().Add(10 * time.Second))
		if _, err := b.ctl.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if v := counter(t, b.metrics.IdleGPUSeconds.WithLabelValues("research")); v != 40 {
		t.Errorf("idle GPU-seconds = %v, want 40 (seen idle only)", v)
	}
	if v := counter(t, b.metrics.JudgedIdleGPUSeconds.WithLabelValues("research")); v != 100 {
		t.Errorf("judged idle GPU-seconds = %v, want 100", v)
	}
}

// TestMarkKeepsAdminComment: the mark is appended to the job's admin
// comment as re-read before the action; an admin's note stays, and the
// warning's mark is replaced by the next one, not piled up.
func TestMarkKeepsAdminComment(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	b.jobAs(func(j map[string]any) { j["admin_comment"] = "ticket 42: keep on gpu1" })
	if got := b.mustTick(); !cmp.Equal(got, []string{"warn"}) {
		t.Fatalf("first cycle: %v, want warn", got)
	}
	b.jobAs(func(j map[string]any) {
		j["admin_comment"] = "ticket 42: keep on gpu1 | strata: reclaim warn (rule idle-cancel): idle"
	})
	for range 2 {
		b.mustTick()
	}
	var marks []string
	for _, a := range b.actions() {
		if m, ok := strings.CutPrefix(a, "mark "); ok {
			marks = append(marks, m)
		}
	}
	if len(marks) != 2 || !strings.HasPrefix(marks[0], "ticket 42: keep on gpu1 | strata: reclaim warn (rule idle-cancel): ") ||
		!strings.HasPrefix(marks[1], "ticket 42: keep on gpu1 | strata: reclaimed (cancel, rule idle-cancel): ") {
		t.Errorf("marks = %q, want the admin's note kept and one Strata mark after it", marks)
	}
}
