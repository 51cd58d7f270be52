package render

import (
	"fmt"
	"maps"
	"slices"

	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "serving.json", Dir: DirStrata, Mode: 0o644, Doc: "accounts, namespaces and serving quotas, for strata-bridge", Render: ServingJSON})
}

// Serving returns the serving quotas of a policy: every tenant with its
// namespace ("strata-<tenant>" unless the policy names one), its quota
// (zero without a serving: block), its sharing tiers (those with a quota
// above 0, sorted by name) with their lines, and its projects' accounts.
func Serving(p *spec.Policy) *servingquota.File {
	f := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{}}
	for i, t := range p.Tenants {
		st := servingquota.Tenant{Name: t.Name, Namespace: "strata-" + t.Name, Projects: []servingquota.Project{}, Line: t.Line}
		if s := t.Serving; s != nil {
			st.GPUs, st.Replicas, st.Isolation = s.GPUs, s.Replicas, s.Isolation
			if s.Namespace != "" {
				st.Namespace = s.Namespace
			}
			sp := fmt.Sprintf("tenants[%d].serving", i)
			st.ServingLine = p.Positions.At(sp).Line
			for _, name := range slices.Sorted(maps.Keys(s.Tiers)) {
				if s.Tiers[name] > 0 {
					st.Tiers = append(st.Tiers, servingquota.Tier{Name: name, Resource: servingquota.Resource(name),
						Quota: s.Tiers[name], Line: p.Positions.At(sp + ".tiers." + name).Line})
				}
			}
		}
		for _, pr := range t.Projects {
			st.Projects = append(st.Projects, servingquota.Project{Name: pr.Name, Account: p.Account(t.Name, pr.Name)})
		}
		f.Tenants = append(f.Tenants, st)
	}
	return f
}

// ServingJSON renders [Serving], validated.
func ServingJSON(p *spec.Policy) ([]byte, error) {
	f := Serving(p)
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f.Marshal()
}
