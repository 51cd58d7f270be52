package service

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// TestMeRoles: /v1/me names every role the caller holds: a tenant's
// admin (who reads and controls the whole tenant) is shown as one.
func TestMeRoles(t *testing.T) {
	h := newHarness(t)
	for user, want := range map[string]struct {
		clusterAdmin bool
		tenantAdmin  []string
	}{"tadmin": {tenantAdmin: []string{"acme"}}, "ops": {clusterAdmin: true, tenantAdmin: []string{}}, "mem": {tenantAdmin: []string{}}} {
		code, body := h.do(user, "GET", "/v1/me", nil)
		var me api.Me
		if code != 200 || json.Unmarshal(body, &me) != nil || len(me.Clusters) == 0 {
			t.Fatalf("%s: GET /v1/me = %d %s", user, code, body)
		}
		for _, m := range me.Clusters {
			if m.ClusterAdmin != want.clusterAdmin || !slices.Equal(m.TenantAdmin, want.tenantAdmin) {
				t.Errorf("%s on %s: cluster admin %t, tenant admin of %v; want %t, %v", user, m.Cluster, m.ClusterAdmin, m.TenantAdmin,
					want.clusterAdmin, want.tenantAdmin)
			}
		}
	}
}
