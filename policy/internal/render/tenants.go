package render

import (
	"fmt"
	"maps"
	"slices"

	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "tenants.json", Dir: DirStrata, Mode: 0o644,
		Doc: "accounts -> tenants and projects, members and roles, limits and their policy lines, for reclaimd and the portal", Render: TenantsJSON})
}

// Tenants returns the tenant map of a policy: the cluster's admins, the
// policy file and its classes with their per-job limits, and for every
// tenant its account, admins, limits and projects, each project with its
// account, classes, limits (gpus_per_user: the project's, else its
// tenant's, as compile puts on each member's association) and members
// (roles filled in by the policy's defaults), in the policy's order.
// Every entry and limit carries its source, the line and path in the
// policy file, so that the portal explains a limit as strata-policy
// explain does; strata-policy explain builds its map with this function.
func Tenants(p *spec.Policy) *tenantmap.Map {
	src := func(path string, line int) *tenantmap.Source {
		if line == 0 {
			line = p.Positions.At(path).Line
		}
		return &tenantmap.Source{Line: line, Path: path}
	}
	m := &tenantmap.Map{APIVersion: tenantmap.APIVersion, Kind: tenantmap.Kind, Cluster: p.Cluster.Name,
		Admins: append([]string{}, p.Admins...), Policy: p.File, Classes: []tenantmap.Class{}, Tenants: []tenantmap.Tenant{}}
	for ci, c := range p.Classes {
		base := fmt.Sprintf("classes[%d]", ci)
		tc := tenantmap.Class{Name: c.Name, Source: src(base, c.Line)}
		if c.MaxGPUsPerJob > 0 {
			tc.MaxGPUsPerJob = &tenantmap.Limit{Value: int64(c.MaxGPUsPerJob), Source: src(base+".max_gpus_per_job", 0)}
		}
		if c.MaxTime > 0 {
			tc.MaxTime = &tenantmap.TimeLimit{Value: c.MaxTime, Source: src(base+".max_time", 0)}
		}
		m.Classes = append(m.Classes, tc)
	}
	for ti, t := range p.Tenants {
		tbase := fmt.Sprintf("tenants[%d]", ti)
		tt := tenantmap.Tenant{Name: t.Name, Account: t.Name, Admins: append([]string{}, t.Admins...), Source: src(tbase, t.Line),
			Limits: tenantLimits(t.Limits, tbase, src), Projects: []tenantmap.Project{}}
		for pi, pr := range t.Projects {
			pbase := fmt.Sprintf("%s.projects[%d]", tbase, pi)
			tp := tenantmap.Project{Name: pr.Name, Account: p.Account(t.Name, pr.Name),
				Classes: append([]string{}, pr.Classes...), Source: src(pbase, pr.Line), Limits: tenantLimits(pr.Limits, pbase, src),
				Members: []tenantmap.Member{}}
			if pr.Limits.GPUsPerUser == 0 {
				tp.Limits.GPUsPerUser = tt.Limits.GPUsPerUser // the tenant's, as compile does
			}
			for mi, mb := range pr.Members {
				mpath := fmt.Sprintf("%s.members[%d]", pbase, mi)
				role := tenantmap.Role(mb.Role)
				if role == "" {
					role = tenantmap.RoleMember // a policy built in code, without defaults
				}
				tm := tenantmap.Member{User: mb.User, Role: role, Default: mb.Default, Source: src(mpath, mb.Line)}
				if mb.Default {
					tm.DefaultSource = src(mpath+".default", 0)
				}
				tp.Members = append(tp.Members, tm)
			}
			tt.Projects = append(tt.Projects, tp)
		}
		m.Tenants = append(m.Tenants, tt)
	}
	return m
}

// tenantLimits are a tenant's or project's limits as compile maps them to its
// association: every positive value, and each GPU type's (0 forbids the
// type), each with its source under base.
func tenantLimits(l spec.Limits, base string, src func(string, int) *tenantmap.Source) *tenantmap.Limits {
	out := &tenantmap.Limits{}
	one := func(name string, v int) *tenantmap.Limit {
		if v <= 0 {
			return nil
		}
		return &tenantmap.Limit{Value: int64(v), Source: src(base+".limits."+name, 0)}
	}
	out.GPUs, out.CPUs, out.MemoryGB = one("gpus", l.GPUs), one("cpus", l.CPUs), one("memory_gb", l.MemoryGB)
	out.RunningJobs, out.GPUHours, out.GPUsPerUser = one("running_jobs", l.RunningJobs), one("gpu_hours", l.GPUHours), one("gpus_per_user", l.GPUsPerUser)
	for _, typ := range slices.Sorted(maps.Keys(l.GPUsByType)) {
		if out.GPUsByType == nil {
			out.GPUsByType = map[string]tenantmap.Limit{}
		}
		out.GPUsByType[typ] = tenantmap.Limit{Value: int64(l.GPUsByType[typ]), Source: src(base+".limits.gpus_by_type."+typ, 0)}
	}
	return out
}

// TenantsJSON renders [Tenants], validated.
func TenantsJSON(p *spec.Policy) ([]byte, error) {
	m := Tenants(p)
	if errs := m.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("rendered tenant map is invalid: %v", errs)
	}
	return m.Marshal()
}
