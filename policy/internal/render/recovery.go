package render

import (
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// recoveryRules are the retry policies of the classes with a recovery
// block: one per class, named after it and matching it.
func recoveryRules(p *spec.Policy) []reclaimrules.Recovery {
	var out []reclaimrules.Recovery
	for _, c := range p.Classes {
		if c.Recovery == nil {
			continue
		}
		rec := *c.Recovery
		rec.Name = c.Name
		rec.Match = reclaimrules.Match{Classes: []string{c.Name}}
		out = append(out, rec)
	}
	return out
}
