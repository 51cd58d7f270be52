package core

import (
	"cmp"
	"context"
	"slices"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
)

// Projects are the caller's projects on each cluster (cluster: that one
// alone): every project whose jobs they may read, with its limits from
// the cluster's tenant map (each with its policy line) and Slurm, and
// its use from the snapshot, as internal/explain reads an account for
// strata-policy explain.
func (s *Core) Projects(ctx context.Context, who auth.Identity, only string) (api.ProjectList, *Problem) {
	if only != "" {
		if _, ok := s.byName[only]; !ok {
			return api.ProjectList{}, noCluster(only)
		}
	}
	out := api.ProjectList{Projects: []api.Project{}}
	var stale []string
	for _, c := range s.clusters {
		name := c.Poller.Name()
		if only != "" && name != only {
			continue
		}
		m := c.Tenants()
		grants := rbac.Grants(m, who.User)
		if len(grants) == 0 {
			continue
		}
		if c.Poller.Health().Stale {
			stale = append(stale, name)
		}
		var in explain.Input
		snap := c.Poller.Snapshot()
		if snap != nil {
			in = explain.Input{Tenants: m, Live: explain.Snapshot{Associations: snap.Associations, Users: snap.Users,
				QOS: snap.QOS, Jobs: snap.Jobs, Partitions: snap.Partitions, Nodes: snap.Nodes, Shares: snap.Shares}}
		}
		for _, t := range m.Tenants {
			for _, pr := range t.Projects {
				target := rbac.Target{Tenant: t.Name, Project: pr.Name}
				if !rbac.AllowedBy(grants, who.User, rbac.ReadJobs, target) {
					continue
				}
				out.Projects = append(out.Projects, projectOf(name, t, pr, who.User, grants, in, snap != nil))
			}
		}
	}
	slices.SortFunc(out.Projects, func(a, b api.Project) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Project, b.Project))
	})
	if len(stale) > 0 {
		out.StaleClusters = &stale
	}
	return out, nil
}

// projectOf is one project: its limits and use where the cluster has a
// snapshot (live), the policy's limits alone where it has none yet.
func projectOf(cluster string, t tenantmap.Tenant, pr tenantmap.Project, user string, grants []rbac.Grant, in explain.Input, live bool) api.Project {
	out := api.Project{Cluster: cluster, Tenant: t.Name, Project: pr.Name, Account: pr.Account, Limits: []api.ProjectLimit{}}
	if len(pr.Classes) > 0 {
		out.Classes = ptr(slices.Clone(pr.Classes))
	}
	if role := roleIn(grants, t.Name, pr.Name); role != "" {
		out.Role = ptr(role)
	}
	if !live {
		return out
	}
	rep, err := explain.Account(in, pr.Account)
	if err != nil {
		return out // an account neither in the policy nor in Slurm: nothing to say of it
	}
	for _, l := range rep.Limits {
		pl := api.ProjectLimit{Name: l.Name, Slurm: l.Slurm, Unit: l.Unit, Policy: l.Policy, Live: l.Live, Used: l.Used}
		if l.Source != nil {
			pl.PolicyLine = ptr(l.Source.String())
		}
		if l.Drift {
			pl.Drift = ptr(true)
		}
		out.Limits = append(out.Limits, pl)
	}
	out.Usage = api.ProjectUsage{Gpus: rep.Usage.GPUs, Cpus: rep.Usage.CPUs, RunningJobs: rep.Usage.Running, PendingJobs: rep.Usage.Pending}
	if rep.Usage.MemoryGiB > 0 {
		out.Usage.MemoryGib = ptr(rep.Usage.MemoryGiB)
	}
	if b := rep.Budget; b != nil {
		gh := api.GpuHourBudget{Hours: b.Hours, Used: b.Used, Running: b.Running}
		if b.Source != nil {
			gh.PolicyLine = ptr(b.Source.String())
		}
		if b.Unavailable != "" {
			gh.Unavailable = ptr(b.Unavailable)
		}
		out.GpuHours = &gh
	}
	var fs api.ProjectFairShare
	for _, sl := range rep.FairShare {
		if sl.Account == pr.Account && sl.User == "" {
			fs.LevelFs, fs.EffectiveUsage = sl.LevelFS, ptr(sl.EffectiveUsage)
		}
	}
	for _, sh := range in.Live.Shares {
		if sh.Account == pr.Account && sh.User == user {
			fs.Factor = ptr(sh.FairShareFactor)
		}
	}
	if fs.LevelFs != nil || fs.EffectiveUsage != nil || fs.Factor != nil {
		out.FairShare = &fs
	}
	return out
}

// roleIn is the caller's role that reaches a project: their own in it,
// else their tenant's or the cluster's admin role.
func roleIn(grants []rbac.Grant, tenant, project string) string {
	role := ""
	for _, g := range grants {
		switch {
		case g.Project == project && g.Tenant == tenant:
			return string(g.Role)
		case g.Role == rbac.ClusterAdmin && role == "":
			role = string(g.Role)
		case g.Tenant == tenant && g.Project == "":
			role = string(g.Role)
		}
	}
	return role
}
