package reclaimrules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

func TestRecoveryParse(t *testing.T) {
	r, err := reclaimrules.Parse([]byte(`{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [],
	  "recovery": [{"name": "train", "match": {"classes": ["train"]},
	    "gpu_fault": {"retries": 3, "notify": ["owner", "admins"]},
	    "user_error": {"retries": 0},
	    "nccl": {"backoff": "5m", "on_exhausted": "leave"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := r.RecoveryFor(reclaimrules.JobInfo{Class: "train"})
	if !ok {
		t.Fatal("no recovery rule for class train")
	}
	if _, ok := r.RecoveryFor(reclaimrules.JobInfo{Class: "batch"}); ok {
		t.Error("class batch has a recovery rule")
	}
	if rec.MaxRetries != reclaimrules.DefaultMaxRetries || rec.SameFailureNodes != reclaimrules.DefaultSameFailureNodes {
		t.Errorf("defaults: %+v", rec)
	}
	type got struct {
		Retries     int
		Backoff     time.Duration
		Exclude     bool
		OnExhausted reclaimrules.Exhausted
		Reason      string
		Notify      []string
	}
	view := func(x reclaimrules.Retry) got {
		return got{*x.Retries, x.Backoff.Std(), *x.ExcludeNode, x.OnExhausted, x.HoldReason, x.Notify}
	}
	tests := map[string]got{
		"gpu_fault":  {3, 0, true, reclaimrules.ExhaustedHold, "held until its owner or an admin releases or cancels it", []string{"owner", "admins"}},
		"node_fail":  {2, 0, true, reclaimrules.ExhaustedHold, "held until its owner or an admin releases or cancels it", []string{"owner"}},
		"nccl":       {1, 5 * time.Minute, true, reclaimrules.ExhaustedLeave, "", []string{"owner"}},
		"user_error": {0, 0, false, reclaimrules.ExhaustedLeave, "", []string{"owner"}},
		"oom":        {0, 0, false, reclaimrules.ExhaustedLeave, "", []string{"owner"}},
		"cancelled":  {0, 0, false, reclaimrules.ExhaustedLeave, "", []string{"owner"}},
	}
	for class, want := range tests {
		if diff := cmp.Diff(want, view(rec.Retry(class))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", class, diff)
		}
	}
}

func TestRecoveryInvalid(t *testing.T) {
	_, err := reclaimrules.Parse([]byte(`{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [],
	  "recovery": [{"name": "a", "oom": {"retries": -1}},
	               {"name": "a", "match": {"classes": ["x"]}, "timeout": {"exclude_node": true, "on_exhausted": "hold"}, "same_failure_nodes": 1}]}`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"2:50: recovery[0].oom.retries: -1: must not be negative",
		`3:26: recovery[1].name: "a" is the name of recovery[0] too`,
		"3:17: recovery[1]: never applies: every job it matches is matched first by recovery[0]",
		"recovery[1].same_failure_nodes: 1 would hold every job",
		"recovery[1].timeout.exclude_node: true, but timeout is never retried",
		"recovery[1].timeout.on_exhausted: hold, but timeout is never retried",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
