// Package render writes the files other parts read from a policy:
// reclaim-rules.json for reclaimd (one rule per workload class with a
// reclaim rule) and the account-to-tenant map. Output is deterministic.
package render

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// ReclaimRules returns the reclaim rules of a policy: for every class with
// a reclaim rule, a rule named after the class that matches the class.
// The file is validated before it is returned.
func ReclaimRules(p *spec.Policy) ([]byte, error) {
	r := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind}
	for _, c := range p.Classes {
		if c.Reclaim == nil {
			continue
		}
		rule := *c.Reclaim
		rule.Name = c.Name
		rule.Match = reclaimrules.Match{Classes: []string{c.Name}}
		r.Rules = append(r.Rules, rule)
	}
	if errs := r.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("rendered reclaim rules are invalid: %v", errs)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Tenants maps every account the policy defines to its tenant, for
// reclaimd's tenants: key and the metrics' tenant label.
func Tenants(p *spec.Policy) map[string]string {
	m := map[string]string{}
	for _, t := range p.Tenants {
		m[t.Name] = t.Name
		for _, pr := range t.Projects {
			m[p.Account(t.Name, pr.Name)] = t.Name
		}
	}
	return m
}

// TenantsJSON renders Tenants as sorted JSON.
func TenantsJSON(p *spec.Policy) ([]byte, error) {
	m := Tenants(p)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
