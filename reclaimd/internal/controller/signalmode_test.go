package controller_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// TestSignalModes: the checkpoint signal kills a batch script that does
// not trap it, and a job that dies is not requeued. By default
// (skip-unless-requested) only a job whose comment says strata:signal is
// signalled, at its batch shell; the others go from the warning to the
// requeue. Mode all-steps signals every job's every process.
func TestSignalModes(t *testing.T) {
	const rules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules",
	  "rules": [{"name": "test", "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
	    "warn": "10s", "signal": {"name": "USR1", "wait": "10s"MODE}, "action": "requeue"}]}`
	for name, tc := range map[string]struct {
		mode, comment string
		wantActions   []string
		wantVerbs     []string
	}{
		"default, the job did not ask: no signal": {
			wantActions: []string{"warn", "requeue"}, wantVerbs: []string{"mark", "mark", "requeue "},
		},
		"default, the job asked: its batch shell": {
			comment: "strata:class=train,strata:signal", wantActions: []string{"warn", "signal", "requeue"},
			wantVerbs: []string{"mark", "mark", "signal signal=SIGUSR1&flags=BATCH_JOB", "mark", "requeue "},
		},
		"all-steps: every process of the job": {
			mode: "all-steps", wantActions: []string{"warn", "signal", "requeue"},
			wantVerbs: []string{"mark", "mark", "signal signal=SIGUSR1", "mark", "requeue "},
		},
	} {
		t.Run(name, func(t *testing.T) {
			mode := ""
			if tc.mode != "" {
				mode = `, "mode": "` + tc.mode + `"`
			}
			b := newBed(t, "26.05", strings.Replace(rules, "MODE", mode, 1), 0)
			if tc.comment != "" {
				b.listAs(func(j map[string]any) { j["comment"] = tc.comment })
				b.jobAs(func(j map[string]any) { j["comment"] = tc.comment })
			}
			sig := b.record("signal")
			sig.Query = "signal=SIGUSR1"
			b.srv.Add(sig)
			var got []string
			for range 6 {
				got = append(got, b.mustTick()...)
			}
			if diff := cmp.Diff(tc.wantActions, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			if diff := cmp.Diff(tc.wantVerbs, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
		})
	}
}

// listAs serves the jobs listing with the captured job changed by edit.
func (b *bed) listAs(edit func(job map[string]any)) {
	b.t.Helper()
	rec := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		b.t.Fatal(err)
	}
	edit(resp["jobs"].([]any)[0].(map[string]any))
	rec.Response = mustJSON(b.t, resp)
	b.srv.Handle(http.MethodGet, "/slurm/"+b.slurm.Info().Parser+"/jobs/", slurmresttest.Reply(rec))
}
