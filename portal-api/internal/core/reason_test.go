package core

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// TestReasonLimit: the limit holding a pending job comes beside its
// English text as fields a page renders in any language: who holds it
// (kind and name; a user's account apart), the limit (Slurm's, else the
// policy's), its unit, what is used and what the job asks for, with the
// policy line as before.
func TestReasonLimit(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	src := &explain.Source{File: "policy.yaml", Line: 52}
	for name, tc := range map[string]struct {
		why  explain.Why
		want *api.ReasonLimit
		line string
	}{
		"a project's GPUs": {
			why: explain.Why{Reason: "AssocGrpGRES", Detail: "project acme-llm uses 4 of its 4 GPUs; this job asks for 8",
				Limit: &explain.Blocker{Level: "project acme-llm", Ask: 8,
					Limit: explain.Limit{Name: "gpus", Slurm: "GrpTRES gres/gpu", Unit: "GPUs", Policy: f(4), Live: f(4), Used: f(4), Source: src}}},
			want: &api.ReasonLimit{Kind: "project", Level: "acme-llm", Name: "gpus", Slurm: ptr("GrpTRES gres/gpu"), Unit: "GPUs",
				Used: f(4), Limit: f(4), Asked: f(8)},
			line: "policy.yaml:52",
		},
		"a user's, the policy's alone": {
			why: explain.Why{Limit: &explain.Blocker{Level: "user alice in acme-llm", Ask: 2,
				Limit: explain.Limit{Name: "gpus_per_user", Slurm: "GrpTRES gres/gpu", Unit: "GPUs", Policy: f(2), Used: f(1)}}},
			want: &api.ReasonLimit{Kind: "user", Level: "alice", Account: ptr("acme-llm"), Name: "gpus_per_user", Slurm: ptr("GrpTRES gres/gpu"),
				Unit: "GPUs", Used: f(1), Limit: f(2), Asked: f(2)},
		},
		"a QOS's time": {
			why: explain.Why{Limit: &explain.Blocker{Level: "QOS train", Ask: 600,
				Limit: explain.Limit{Name: "MaxWall", Slurm: "MaxWall (QOS train)", Unit: "minutes", Live: f(480)}}},
			want: &api.ReasonLimit{Kind: "qos", Level: "train", Name: "MaxWall", Slurm: ptr("MaxWall (QOS train)"), Unit: "minutes",
				Limit: f(480), Asked: f(600)},
		},
		"no limit": {why: explain.Why{Reason: "Priority", Meaning: "jobs of higher priority go first"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &api.Reason{Slurm: tc.why.Reason}
			explained(r, &tc.why)
			if diff := cmp.Diff(tc.want, r.Limit); diff != "" {
				t.Errorf("limit (-want +got):\n%s", diff)
			}
			if deref(r.PolicyLine) != tc.line {
				t.Errorf("policy line %q, want %q", deref(r.PolicyLine), tc.line)
			}
			if tc.why.Detail != "" && deref(r.Text) != tc.why.Detail {
				t.Errorf("text %q, want the English beside the fields", deref(r.Text))
			}
		})
	}
}
