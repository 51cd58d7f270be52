package core

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"context"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
)

// topReasons is how many reasons a tenant's queue shows.
const topReasons = 3

// Overview is the operators' view: for a cluster admin the whole
// cluster (its GPUs, the queue by tenant, nodes down or drained); for a
// tenant's admin their tenant alone; for anyone else a 403.
func (s *Core) Overview(ctx context.Context, who auth.Identity) (api.Overview, *Problem) {
	user := who.User
	out := api.Overview{Clusters: []api.ClusterOverview{}}
	for _, c := range s.clusters {
		m := c.Tenants()
		grants := rbac.Grants(m, user)
		admin := rbac.AllowedBy(grants, user, rbac.OperatorViews, rbac.Target{})
		tenants := map[string]bool{}
		for _, t := range m.Tenants {
			if rbac.AllowedBy(grants, user, rbac.OperatorViews, rbac.Target{Tenant: t.Name}) {
				tenants[t.Name] = true
			}
		}
		if !admin && len(tenants) == 0 {
			continue
		}
		co := api.ClusterOverview{Cluster: c.Poller.Name(), Stale: c.Poller.Health().Stale, Tenants: []api.TenantOverview{}}
		x := s.indexes.of(c)
		if x == nil {
			out.Clusters = append(out.Clusters, co)
			continue
		}
		by := map[string]*api.TenantOverview{}
		reasons := map[string]map[string]int{}
		for i := range x.snap.Jobs {
			j := &x.snap.Jobs[i]
			tenant := x.owners[i].Tenant
			if !admin && !tenants[tenant] {
				continue
			}
			to, ok := by[tenant]
			if !ok {
				to = &api.TenantOverview{Tenant: tenant, TopReasons: []api.ReasonCount{}}
				by[tenant], reasons[tenant] = to, map[string]int{}
			}
			switch {
			case j.Running():
				to.Running++
				to.GpusAllocated += len(j.GPUs)
			case j.State.Has("PENDING"):
				to.Pending++
				reasons[tenant][cmp.Or(j.StateReason, "None")]++
			}
		}
		co.Deployments, co.Replicas, co.BridgeUnavailable = s.overviewDeployments(ctx, c, user, admin, tenants, by, reasons)
		s.gpuUse(ctx, c, x, by, &co)
		for tenant, to := range by {
			for reason, n := range reasons[tenant] {
				to.TopReasons = append(to.TopReasons, api.ReasonCount{Reason: reason, Count: n})
			}
			slices.SortFunc(to.TopReasons, func(a, b api.ReasonCount) int {
				return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
			})
			to.TopReasons = to.TopReasons[:min(len(to.TopReasons), topReasons)]
			co.Running += to.Running
			co.Pending += to.Pending
			co.GpusAllocated += to.GpusAllocated
			if strings.HasPrefix(to.Tenant, "account:") {
				to.Tenant = "" // jobs of accounts outside the policy
			}
			co.Tenants = append(co.Tenants, *to)
		}
		slices.SortFunc(co.Tenants, func(a, b api.TenantOverview) int { return cmp.Compare(a.Tenant, b.Tenant) })
		if admin {
			total := 0
			down := []api.UnavailableNode{}
			for _, n := range x.snap.Nodes {
				total += n.GPUs
				if slices.ContainsFunc(n.State, func(s string) bool { return s == "DOWN" || s == "DRAIN" || s == "DRAINED" || s == "DRAINING" }) {
					un := api.UnavailableNode{Name: n.Name, State: nonNil(n.State)}
					if n.Reason != "" {
						un.Reason = ptr(n.Reason)
					}
					down = append(down, un)
				}
			}
			co.GpusTotal, co.NodesUnavailable = ptr(total), &down
		}
		s.recoveryOverview(ctx, c, m, admin, tenants, &co)
		out.Clusters = append(out.Clusters, co)
	}
	if len(out.Clusters) == 0 {
		return api.Overview{}, problem(http.StatusForbidden, api.Forbidden, "the overview is for the clusters' and tenants' admins", "GET /v1/queue shows your projects' queue")
	}
	return out, nil
}
