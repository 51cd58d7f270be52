package core

import (
	"reflect"
	"testing"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// BenchmarkPrepare is what the poller's goroutine does after a poll that
// changed the job list of a cluster of 2,000 jobs (1,500 pending): index
// the snapshot and explain every pending job.
func BenchmarkPrepare(b *testing.B) {
	m, users, accountOf := benchMap(b)
	var jobs []clustertest.Job
	for i := range 2000 {
		u := users[i%len(users)]
		j := clustertest.Job{ID: int64(100000 + i), User: u, Account: accountOf[u], QOS: "batch"}
		if i%4 != 0 {
			j.State, j.Reason = "PENDING", []string{"Priority", "Resources", "QOSGrpGRES", "AssocGrpGRES"}[i%4]
		}
		jobs = append(jobs, j)
	}
	bed := clustertest.New(b, "26.05", jobs...)
	p := cluster.New(cluster.Config{Name: "gpu1", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")}})
	if err := p.Poll(b.Context()); err != nil {
		b.Fatal(err)
	}
	snap := p.Snapshot()
	for b.Loop() {
		newIndex(snap, m).explainAll()
	}
}

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
