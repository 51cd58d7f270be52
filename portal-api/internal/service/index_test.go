package service

import (
	"reflect"
	"testing"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// TestReasonsPreparedAtPoll: every pending job's reason is explained by
// the poll that brought it (at New for the first snapshot), before any
// request asks, as internal/explain explains it; a request only looks it
// up.
func TestReasonsPreparedAtPoll(t *testing.T) {
	h := newHarness(t)
	check := func(name string) {
		t.Helper()
		c := h.server.byName[name]
		x := h.server.indexes[name].Load()
		if x == nil || x.snap != c.Poller.Snapshot() {
			t.Fatalf("%s: no index of the last snapshot", name)
		}
		in := explain.Input{Tenants: c.Tenants(), Live: explain.Snapshot{Associations: x.snap.Associations, Users: x.snap.Users,
			QOS: x.snap.QOS, Jobs: x.snap.Jobs, Partitions: x.snap.Partitions, Nodes: x.snap.Nodes, Shares: x.snap.Shares}}
		pending := 0
		for i := range x.snap.Jobs {
			j := &x.snap.Jobs[i]
			got, ok := x.why.Load(j.ID)
			if !j.State.Has("PENDING") {
				if ok {
					t.Errorf("%s: job %d is not pending and has a reason", name, j.ID)
				}
				continue
			}
			pending++
			if !ok {
				t.Errorf("%s: pending job %d not explained before a request", name, j.ID)
				continue
			}
			rep, err := explain.Job(in, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := reason(j)
			explained(want, rep.Why)
			if !reflect.DeepEqual(got.(*api.Reason), want) {
				t.Errorf("%s: job %d: reason %+v, explain.Job says %+v", name, j.ID, got, want)
			}
			if x.reason(j) != got {
				t.Errorf("%s: job %d explained again", name, j.ID)
			}
		}
		if pending == 0 {
			t.Fatalf("%s: no pending job", name)
		}
	}
	check("gpu1")
	check("gpu2")
	// A poll that brings new jobs explains them.
	h.beds["gpu2"].SetJobs(append(gpu2Jobs,
		clustertest.Job{ID: 920203, User: "mem", Account: "acme-llm", State: "PENDING", Reason: "AssocGrpGRES"},
		clustertest.Job{ID: 920204, User: "mem", Account: "acme-llm", State: "PENDING", Reason: "Resources"})...)
	if err := h.pollers["gpu2"].Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !hasJob(h.server.indexes["gpu2"].Load().snap.Jobs, 920204) {
		t.Fatal("the poll did not bring job 920204")
	}
	check("gpu2")
}

func hasJob(jobs []slurmrest.Job, id int64) bool {
	for _, j := range jobs {
		if j.ID == id {
			return true
		}
	}
	return false
}
