package config

import (
	"strings"
	"testing"
)

// TestTenantsFile: the tenant map is a file strata-policy renders, found
// at its default place; an empty name is refused, and the inline map of
// older configs is an unknown key.
func TestTenantsFile(t *testing.T) {
	head := "apiVersion: strata/v1\nkind: ReclaimdConfig\n"
	cfg, err := Parse("reclaimd.yaml", []byte(head))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TenantsFile != "/etc/strata/rendered/tenants.json" {
		t.Errorf("default tenants_file = %q", cfg.TenantsFile)
	}
	for name, tc := range map[string]struct{ in, want string }{
		"empty":      {head + "tenants_file: \"\"\n", "tenants_file: required"},
		"inline map": {head + "tenants: {acme-llm: acme}\n", "tenants"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("reclaimd.yaml", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
