package render

import (
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// TestReclaimRulesFromExample: the rules rendered from the example policy
// are a valid reclaimd rules file with one rule per class that has one.
func TestReclaimRulesFromExample(t *testing.T) {
	p, err := spec.Load("../../../etc/strata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ReclaimRules(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reclaimrules.Parse(out)
	if err != nil {
		t.Fatalf("reclaimd cannot read what policy renders: %v\n%s", err, out)
	}
	want := 0
	for _, c := range p.Classes {
		if c.Reclaim != nil {
			want++
			rule, ok := r.For(reclaimrules.JobInfo{Class: c.Name})
			if !ok || rule.Name != c.Name {
				t.Errorf("class %s: rule %+v, %v", c.Name, rule, ok)
			}
		}
	}
	if len(r.Rules) != want || want == 0 {
		t.Errorf("%d rules for %d classes with a reclaim rule", len(r.Rules), want)
	}
	tj, err := TenantsJSON(p)
	if err != nil || !strings.Contains(string(tj), `"acme-llm": "acme"`) {
		t.Errorf("tenants = %s, %v", tj, err)
	}
}
