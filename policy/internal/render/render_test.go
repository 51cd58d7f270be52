package render

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/tenantmap"
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
}

// TestTenantsFromExample: the tenant map rendered from the example policy,
// written as render writes it, loads with the loader reclaimd uses
// (tenantmap.Load, which reclaimd reloads on SIGHUP), and maps every account of the
// policy to its tenant and project.
func TestTenantsFromExample(t *testing.T) {
	p, err := spec.Load("../../../etc/strata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := TenantsJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tenants.json")
	if err := atomicfile.Write(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := tenantmap.Load(path)
	if err != nil {
		t.Fatalf("reclaimd cannot read what policy renders: %v\n%s", err, out)
	}
	accounts := 0
	for _, tn := range p.Tenants {
		if o, ok := m.Lookup(tn.Name); !ok || o != (tenantmap.Owner{Tenant: tn.Name}) {
			t.Errorf("account %s -> %+v, %v", tn.Name, o, ok)
		}
		for _, pr := range tn.Projects {
			accounts++
			acct := p.Account(tn.Name, pr.Name)
			if o, ok := m.Lookup(acct); !ok || o != (tenantmap.Owner{Tenant: tn.Name, Project: pr.Name}) {
				t.Errorf("account %s -> %+v, %v", acct, o, ok)
			}
		}
	}
	if accounts == 0 || m.Cluster != p.Cluster.Name {
		t.Errorf("%d project accounts, cluster %q", accounts, m.Cluster)
	}
	acme, _ := m.Tenant("acme")
	if acme == nil || len(acme.Projects) == 0 || len(acme.Projects[0].Members) == 0 || acme.Projects[0].Members[0].Role != tenantmap.RoleTenantAdmin {
		t.Errorf("acme = %+v: want alice, tenant-admin, first in llm", acme)
	}
}

// TestServingFromExample: the example's acme has a serving block (8 GPUs,
// 12 replicas, namespace strata-acme, MIG and MPS tiers, isolation); globex has none, so it is listed
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
	if !ok || acme.Tenant.Name != "acme" || acme.Project != "vision" || acme.Tenant.GPUs != 8 || acme.Tenant.Replicas != 12 || acme.Tenant.Namespace != "strata-acme" {
		t.Errorf("acme-vision -> %+v %v", acme.Tenant, ok)
	}
	if tn := acme.Tenant; tn != nil {
		if got := strings.Join(tn.TierNames(), " "); !tn.Isolation || got != "dedicated mig-1g.10gb mig-3g.40gb mps" || tn.ServingLine == 0 {
			t.Errorf("acme: isolation %v, tiers %s, serving line %d: want isolation, dedicated mig-1g.10gb mig-3g.40gb mps, a line",
				tn.Isolation, got, tn.ServingLine)
		}
		if mig, ok := tn.Allowed("mig-1g.10gb"); !ok || mig.Quota != 8 || mig.Line <= tn.ServingLine {
			t.Errorf("acme mig-1g.10gb = %+v, %v: want quota 8 on a line after serving:", mig, ok)
		}
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
