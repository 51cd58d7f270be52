package service

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestSettleUnfinished: the audit records a crash left open (an intent
// without a result) are settled at start with what Slurm shows: a cancel
// of a job Slurm shows cancelled is ok, one of a job still running
// failed, a hold of a held job ok; a submission, a job Slurm no longer
// lists and an unknown cluster are unknown, "the portal stopped".
func TestSettleUnfinished(t *testing.T) {
	h := newHarness(t)
	jobs := append([]clustertest.Job(nil), gpu1Jobs...)
	jobs[1].State, jobs[1].Reason = "CANCELLED", ""
	jobs[2].Hold = true
	h.beds["gpu1"].SetJobs(jobs...)
	for _, a := range []store.Audit{
		{Cluster: "gpu1", Action: "cancel", Target: "910102"}, // cancelled
		{Cluster: "gpu1", Action: "cancel", Target: "910101"}, // still running
		{Cluster: "gpu1", Action: "hold", Target: "910103"},   // held
		{Cluster: "gpu1", Action: "release", Target: "910103"},
		{Cluster: "gpu1", Action: "cancel", Target: "999999"}, // gone
		{Cluster: "gpu1", Action: "submit", Target: "train"},
		{Cluster: "gpu9", Action: "cancel", Target: "1"},
	} {
		a.User, a.Via = "mem", "token"
		if _, err := h.store.Intent(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.server.Core().SettleUnfinished(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left, _ := h.store.Unfinished(t.Context()); len(left) != 0 {
		t.Errorf("records still open: %+v", left)
	}
	log, err := h.store.AuditLog(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(log) - 1; i >= 0; i-- {
		got = append(got, log[i].Action+" "+log[i].Target+": "+log[i].Result)
		if log[i].Result == store.ResultUnknown && !strings.HasPrefix(log[i].Error, core.StoppedResult) {
			t.Errorf("record %d: %q does not say the portal stopped", log[i].ID, log[i].Error)
		}
		if log[i].FinishedAt.IsZero() {
			t.Errorf("record %d has no finish time", log[i].ID)
		}
	}
	want := []string{"cancel 910102: ok", "cancel 910101: failed", "hold 910103: ok", "release 910103: failed",
		"cancel 999999: unknown", "submit train: unknown", "cancel 1: unknown"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settled records (-want +got):\n%s", diff)
	}
	// A second start finds nothing to settle.
	if err := h.server.Core().SettleUnfinished(t.Context()); err != nil {
		t.Fatal(err)
	}
}
