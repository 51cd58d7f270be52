package render

import (
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/servingquota"
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

// TestServingFromExample: the example's acme has a serving block (8 GPUs,
// 4 replicas, namespace strata-acme); globex has none, so it is listed
// with a zero quota and the default namespace.
func TestServingFromExample(t *testing.T) {
	p, err := spec.Load("../../../etc/strata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ServingJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := servingquota.Parse(out)
	if err != nil {
		t.Fatalf("the bridge cannot read what policy renders: %v\n%s", err, out)
	}
	acme, ok := f.Lookup("acme-vision")
	if !ok || acme.Tenant.Name != "acme" || acme.Project != "vision" || acme.Tenant.GPUs != 8 || acme.Tenant.Replicas != 4 || acme.Tenant.Namespace != "strata-acme" {
		t.Errorf("acme-vision -> %+v %v", acme.Tenant, ok)
	}
	globex, ok := f.Lookup("globex-rl")
	if !ok || globex.Tenant.GPUs != 0 || globex.Tenant.Replicas != 0 || globex.Tenant.Namespace != "strata-globex" {
		t.Errorf("globex-rl -> %+v %v", globex.Tenant, ok)
	}
	names := []string{}
	for _, f := range Files() {
		names = append(names, f.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "serving.json") {
		t.Errorf("Files() = %v, want serving.json among them", names)
	}
}
