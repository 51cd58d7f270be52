package service

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/strata-hpc/strata/internal/tenantmap"
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
	// why memoises explained reasons by job id: an explanation reads the
	// whole snapshot. It is kept while the job list is the same (a poll
	// that found no job changed), as are the owners.
	why *sync.Map
}

func newIndex(snap *cluster.Snapshot, m *tenantmap.Map) *index {
	x := &index{snap: snap, tenants: m, owners: make([]rbac.Target, len(snap.Jobs)), classes: make([]string, len(snap.Jobs)),
		owner: map[string]rbac.Target{}, jobs: map[string][]int{}, why: &sync.Map{}}
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
		nx.snap = snap
		p.Store(&nx)
		return &nx
	}
	x = newIndex(snap, m)
	p.Store(x)
	return x
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
