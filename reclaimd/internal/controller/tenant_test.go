package controller

import (
	"testing"

	"github.com/strata-hpc/strata/internal/tenantmap"
)

// TestTenant: a job's tenant comes from the tenant map in force, read at
// each lookup so that a SIGHUP reload takes effect at once; an account
// outside the map, or every account without a map, is its own tenant.
func TestTenant(t *testing.T) {
	m := &tenantmap.Map{Tenants: []tenantmap.Tenant{{Name: "acme", Account: "acme",
		Projects: []tenantmap.Project{{Name: "llm", Account: "acme-llm"}}}}}
	current := m
	c := &Controller{cfg: Config{Tenants: func() *tenantmap.Map { return current }}}
	for account, want := range map[string]string{"acme-llm": "acme", "acme": "acme", "initech": "initech"} {
		if got := c.tenant(account); got != want {
			t.Errorf("tenant(%q) = %q, want %q", account, got, want)
		}
	}
	current = &tenantmap.Map{}
	if got := c.tenant("acme-llm"); got != "acme-llm" {
		t.Errorf("after the map changed, tenant(acme-llm) = %q, want acme-llm", got)
	}
	if got := (&Controller{}).tenant("acme-llm"); got != "acme-llm" {
		t.Errorf("without a map, tenant(acme-llm) = %q", got)
	}
}
