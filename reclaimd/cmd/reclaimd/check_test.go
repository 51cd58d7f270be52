package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tenantsJSON = `{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": "gpu", "admins": [], "tenants": [
  {"name": "acme", "account": "acme", "admins": [], "projects": [
    {"name": "llm", "account": "acme-llm", "classes": ["train"], "members": [{"user": "alice", "role": "member"}]}]}]}
`

// TestCheckConfig: check-config loads the configuration, the rules and the
// tenant map it names, and reports the problems of both files at once.
func TestCheckConfig(t *testing.T) {
	rules, err := filepath.Abs("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		rules, tenants string // file contents; "" for the example rules
		wantOut        string
		wantErrs       []string
	}{
		"valid": {tenants: tenantsJSON, wantOut: "tenants.json has 1 tenants"},
		"bad tenant map": {
			tenants:  strings.Replace(tenantsJSON, `"role": "member"`, `"role": "owner"`, 1),
			wantErrs: []string{`tenants.json:3:104: tenants[0].projects[0].members[0].role: "owner" is not a role`},
		},
		"both bad": {
			rules:    `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rulez": []}`,
			tenants:  `{}`,
			wantErrs: []string{"rules.json: 1:", "rulez: unknown field", "tenants.json:1:1: apiVersion: missing"},
		},
		"no tenant map": {wantErrs: []string{"tenants.json: no such file", "strata-policy render writes it"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rulesPath, tenantsPath := rules, filepath.Join(dir, "tenants.json")
			if tc.rules != "" {
				rulesPath = filepath.Join(dir, "rules.json")
				write(t, rulesPath, tc.rules)
			}
			if tc.tenants != "" {
				write(t, tenantsPath, tc.tenants)
			}
			cfg := filepath.Join(dir, "reclaimd.yaml")
			write(t, cfg, "apiVersion: strata/v1\nkind: ReclaimdConfig\nrules_file: "+rulesPath+"\ntenants_file: "+tenantsPath+"\n")
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"reclaimd", "--config", cfg, "check-config"}, &out, &errb)
			if tc.wantErrs == nil {
				if err != nil {
					t.Fatalf("check-config: %v\n%s", err, errb.String())
				}
				if !strings.Contains(out.String(), tc.wantOut) {
					t.Errorf("output %q lacks %q", out.String(), tc.wantOut)
				}
				return
			}
			if err == nil {
				t.Fatal("check-config accepted")
			}
			for _, w := range tc.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
