package core

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
)

// index is a cluster's snapshot sorted by account under one tenant map:
// each job's owner and class worked out once per poll, not once per
// request, and a request looks only at the accounts its caller may read.
type index struct {
	snap    *cluster.Snapshot
	tenants *tenantmap.Map
	owners  []rbac.Target // by the job's position in snap.Jobs
	classes []string
	// accounts in order, each with its owner (no user) and its jobs.
	accounts []string
	owner    map[string]rbac.Target
	jobs     map[string][]int
	// why memoises explained reasons by job id: the poller's goroutine
	// fills it for every pending job after each poll (Server.prepare), so
	// that a request only looks up. It is kept while the job list is the
	// same (a poll that found no job changed), as are the owners.
	why *sync.Map
	// explainer is the snapshot and tenant map looked up once for
	// explaining any number of their jobs, made at its first use.
	explainer func() *explain.Prepared
}

func newIndex(snap *cluster.Snapshot, m *tenantmap.Map) *index {
	x := &index{snap: snap, tenants: m, owners: make([]rbac.Target, len(snap.Jobs)), classes: make([]string, len(snap.Jobs)),
		owner: map[string]rbac.Target{}, jobs: map[string][]int{}, why: &sync.Map{}, explainer: prepare(snap, m)}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		o := owner(m, j)
		x.owners[i], x.classes[i] = o, classOf(j)
		if _, ok := x.owner[j.Account]; !ok {
			x.owner[j.Account] = rbac.Target{Tenant: o.Tenant, Project: o.Project}
			x.accounts = append(x.accounts, j.Account)
		}
		x.jobs[j.Account] = append(x.jobs[j.Account], i)
	}
	slices.Sort(x.accounts)
	return x
}

// indexes keeps each cluster's last index.
type indexes map[string]*atomic.Pointer[index]

// of returns the index of the cluster's snapshot and tenant map now, nil
// before the first poll.
func (xs indexes) of(c Cluster) *index {
	snap := c.Poller.Snapshot()
	if snap == nil {
		return nil
	}
	m := c.Tenants()
	p := xs[c.Poller.Name()]
	x := p.Load()
	switch {
	case x != nil && x.snap == snap && x.tenants == m:
		return x
	case x != nil && x.tenants == m && sameJobs(x.snap, snap):
		// A poll that found no job changed: the same jobs, newer nodes.
		nx := *x
		nx.snap, nx.explainer = snap, prepare(snap, m)
		p.Store(&nx)
		return &nx
	}
	x = newIndex(snap, m)
	p.Store(x)
	return x
}

// prepare looks the snapshot and tenant map up for explaining their
// pending jobs, once, at the first call.
func prepare(snap *cluster.Snapshot, m *tenantmap.Map) func() *explain.Prepared {
	return sync.OnceValue(func() *explain.Prepared {
		return explain.Prepare(explain.Input{Tenants: m, Live: explain.Snapshot{Associations: snap.Associations, Users: snap.Users,
			QOS: snap.QOS, Jobs: snap.Jobs, Partitions: snap.Partitions, Nodes: snap.Nodes, Shares: snap.Shares}})
	})
}

// reason is why a pending job of the snapshot waits, explained in full
// (explained) once per job and then looked up.
func (x *index) reason(j *slurmrest.Job) *api.Reason {
	if r, ok := x.why.Load(j.ID); ok {
		return r.(*api.Reason)
	}
	r := reason(j)
	explained(r, x.explainer().Why(j))
	got, _ := x.why.LoadOrStore(j.ID, r)
	return got.(*api.Reason)
}

// explainAll explains every pending job of the snapshot not explained yet.
func (x *index) explainAll() {
	for i := range x.snap.Jobs {
		if j := &x.snap.Jobs[i]; j.State.Has("PENDING") {
			x.reason(j)
		}
	}
}

var readOwn = rbac.ReachesOwn(rbac.ReadJobs)

// readable appends the views of the jobs of x that user may read.
func (x *index) readable(out []view, cluster, user string) []view {
	grants := rbac.Grants(x.tenants, user)
	if len(grants) == 0 {
		return out
	}
	for _, acct := range x.accounts {
		whole := rbac.AllowedBy(grants, user, rbac.ReadJobs, x.owner[acct])
		if !whole && !readOwn {
			continue
		}
		for _, i := range x.jobs[acct] {
			if whole || rbac.AllowedBy(grants, user, rbac.ReadJobs, x.owners[i]) {
				out = append(out, view{cluster: cluster, job: &x.snap.Jobs[i], owner: x.owners[i], class: x.classes[i]})
			}
		}
	}
	return out
}

// sameJobs reports whether two snapshots hold the very same job list (the
// poller keeps the list of the last poll when slurmctld says nothing
// changed).
func sameJobs(a, b *cluster.Snapshot) bool {
	return len(a.Jobs) == len(b.Jobs) && (len(a.Jobs) == 0 || &a.Jobs[0] == &b.Jobs[0])
}
