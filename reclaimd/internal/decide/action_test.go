package decide_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// requeueAction is what Decide gives for an idle job signalled 5 minutes
// ago on two GPUs of gpu-001.
func requeueAction(t *testing.T) decide.Action {
	t.Helper()
	g := gpus("gpu-001", 2)
	s := decide.Snapshot{
		Taken: now, Jobs: []decide.Job{job(7, g)}, Samples: samples(nil, g, t0, now, flat(0, 0.3)),
		SampleInterval: interval, SourceOK: true, SlurmOK: true,
		States: map[int64]decide.JobState{7: signalled(6 * time.Minute)},
	}
	d := decide.Decide(s, now, llmRules())
	if len(d.Actions) != 1 || d.Actions[0].Kind != decide.Requeue {
		t.Fatalf("Decide = %+v, want one requeue", d)
	}
	return d.Actions[0]
}

func TestMarker(t *testing.T) {
	a := requeueAction(t)
	want := "strata: reclaimed (requeue, rule llm): 2 of 2 GPUs idle for 1m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%); still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue"
	if got := a.Marker(); got != want {
		t.Errorf("Marker:\n got: %s\nwant: %s", got, want)
	}
	a.Kind, a.Reason = decide.Warn, "idle"
	if got, want := a.Marker(), "strata: reclaim warn (rule llm): idle"; got != want {
		t.Errorf("Marker = %q, want %q", got, want)
	}
	if !strings.HasPrefix(a.Marker(), decide.MarkerPrefix) {
		t.Errorf("Marker %q lacks the ownership prefix", a.Marker())
	}
}

// TestLogValue: an action is one log line with its evidence, in
// snake_case keys.
func TestLogValue(t *testing.T) {
	a := requeueAction(t)
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	logger.Info("reclaim action", "action", a)
	want := `level=INFO msg="reclaim action" action.job_id=7 action.kind=requeue action.rule=llm action.dry_run=false ` +
		`action.reason="2 of 2 GPUs idle for 1m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%); still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue" ` +
		`action.idle_gpus=2 action.total_gpus=2 action.window_start=2026-03-02T10:59:00.000Z action.window_end=2026-03-02T11:00:00.000Z ` +
		`action.gpus="gpu-001:0 idle util 0.0% mem 0.3% coverage 100%, gpu-001:1 idle util 0.0% mem 0.3% coverage 100%"` + "\n"
	if got := buf.String(); got != want {
		t.Errorf("log line:\n got: %s\nwant: %s", got, want)
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Error("an action is not one log line")
	}
}

func TestStillApplies(t *testing.T) {
	a := requeueAction(t)
	same := job(7, gpus("gpu-001", 2))
	tests := map[string]struct {
		job     func(j *decide.Job)
		wantErr string
	}{
		"the same run":               {job: func(*decide.Job) {}},
		"the same GPUs in any order": {job: func(j *decide.Job) { j.GPUs = []decide.GPUKey{j.GPUs[1], j.GPUs[0]} }},
		"another job": {
			job:     func(j *decide.Job) { j.ID = 8 },
			wantErr: "job changed since the decision: job 8 is not job 7",
		},
		"requeued and running again": {
			job:     func(j *decide.Job) { j.Start = now },
			wantErr: "job changed since the decision: job 7 started again at 2026-03-02T11:00:00Z (decided for the run started at 2026-03-02T09:00:00Z)",
		},
		"other GPUs": {
			job: func(j *decide.Job) {
				j.GPUs = []decide.GPUKey{{Node: "gpu-001", Index: 0}, {Node: "gpu-002", Index: 1}}
			},
			wantErr: "job changed since the decision: job 7 holds gpu-001:0,gpu-002:1, decided for gpu-001:0,gpu-001:1",
		},
		"fewer GPUs": {
			job:     func(j *decide.Job) { j.GPUs = j.GPUs[:1] },
			wantErr: "job changed since the decision: job 7 holds gpu-001:0, decided for gpu-001:0,gpu-001:1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := same
			j.GPUs = append([]decide.GPUKey(nil), same.GPUs...)
			tc.job(&j)
			err := a.StillApplies(j)
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, decide.ErrJobChanged) {
					t.Errorf("error %v does not wrap ErrJobChanged", err)
				}
			}
			if got != tc.wantErr {
				t.Errorf("StillApplies:\n got: %s\nwant: %s", got, tc.wantErr)
			}
		})
	}
}

func TestKindDestructive(t *testing.T) {
	for k, want := range map[decide.Kind]bool{
		decide.Warn: false, decide.Notify: false, decide.Recover: false,
		decide.Signal: true, decide.Requeue: true, decide.RequeueHold: true, decide.Cancel: true,
	} {
		if k.Destructive() != want {
			t.Errorf("%s.Destructive() = %v, want %v", k, !want, want)
		}
	}
}

func TestWithMarker(t *testing.T) {
	const mark = "strata: reclaimed (requeue, rule llm): idle"
	for name, tc := range map[string]struct{ comment, want string }{
		"empty":                     {"", mark},
		"an admin's note is kept":   {"ticket 42: keep on gpu-001", "ticket 42: keep on gpu-001 | " + mark},
		"an earlier mark, replaced": {"strata: reclaim warn (rule llm): idle", mark},
		"note and earlier mark":     {"ticket 42 | strata: reclaim warn (rule llm): idle", "ticket 42 | " + mark},
		"blank note":                {"  ", mark},
	} {
		t.Run(name, func(t *testing.T) {
			if got := decide.WithMarker(tc.comment, mark); got != tc.want {
				t.Errorf("WithMarker(%q) = %q, want %q", tc.comment, got, tc.want)
			}
		})
	}
}
