package render

import (
	"fmt"

	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "tenants.json", Dir: DirStrata, Mode: 0o644,
		Doc: "accounts -> tenants and projects, members and roles, for reclaimd and the portal", Render: TenantsJSON})
}

// Tenants returns the tenant map of a policy: the cluster's admins, and for
// every tenant its account, admins and projects, each project with its
// account, classes and members (roles filled in by the policy's defaults),
// in the policy's order.
func Tenants(p *spec.Policy) *tenantmap.Map {
	m := &tenantmap.Map{APIVersion: tenantmap.APIVersion, Kind: tenantmap.Kind, Cluster: p.Cluster.Name,
		Admins: append([]string{}, p.Admins...), Tenants: []tenantmap.Tenant{}}
	for _, t := range p.Tenants {
		tt := tenantmap.Tenant{Name: t.Name, Account: t.Name, Admins: append([]string{}, t.Admins...), Projects: []tenantmap.Project{}}
		for _, pr := range t.Projects {
			tp := tenantmap.Project{Name: pr.Name, Account: p.Account(t.Name, pr.Name),
				Classes: append([]string{}, pr.Classes...), Members: []tenantmap.Member{}}
			for _, mb := range pr.Members {
				role := tenantmap.Role(mb.Role)
				if role == "" {
					role = tenantmap.RoleMember // a policy built in code, without defaults
				}
				tp.Members = append(tp.Members, tenantmap.Member{User: mb.User, Role: role, Default: mb.Default})
			}
			tt.Projects = append(tt.Projects, tp)
		}
		m.Tenants = append(m.Tenants, tt)
	}
	return m
}

// TenantsJSON renders [Tenants], validated.
func TenantsJSON(p *spec.Policy) ([]byte, error) {
	m := Tenants(p)
	if errs := m.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("rendered tenant map is invalid: %v", errs)
	}
	return m.Marshal()
}
