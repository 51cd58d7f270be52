package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// TestRecoveryRendered: a class's recovery block becomes a recovery rule
// named after the class and matching it, which reclaimd reads back with
// the values the policy gave and the defaults for the rest.
func TestRecoveryRendered(t *testing.T) {
	example, _ := loadExample(t)
	b, err := ReclaimRules(example)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reclaimrules.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rec := range r.Recovery {
		names = append(names, rec.Name)
	}
	if diff := cmp.Diff([]string{"train"}, names); diff != "" {
		t.Fatalf("recovery rules (-want +got):\n%s", diff)
	}
	rec, ok := r.RecoveryFor(reclaimrules.JobInfo{Class: "train"})
	if !ok {
		t.Fatal("no recovery rule for train jobs")
	}
	if _, ok := r.RecoveryFor(reclaimrules.JobInfo{Class: "batch"}); ok {
		t.Error("batch jobs, whose class has no recovery block, have a recovery rule")
	}
	g := rec.Retry("gpu_fault")
	if *g.Retries != 2 || !*g.ExcludeNode || g.OnExhausted != reclaimrules.ExhaustedHold || !g.Tells(reclaimrules.NotifyAdmins) {
		t.Errorf("gpu_fault: %+v", g)
	}
	if n := rec.Retry("nccl"); *n.Retries != 1 || n.Backoff.Std().String() != "2m0s" || n.OnExhausted != reclaimrules.ExhaustedLeave {
		t.Errorf("nccl: %+v", n)
	}
	if u := rec.Retry("user_error"); *u.Retries != 0 {
		t.Errorf("user_error: %+v", u)
	}
}
