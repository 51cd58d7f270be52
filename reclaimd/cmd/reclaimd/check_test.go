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
		config         string // more of the configuration
		shipped        bool   // the shipped configuration, with the files above
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
		"shipped configuration and rules": {tenants: tenantsJSON, shipped: true, wantOut: "has 3 rules and 2 recovery rules (dry run: true)"},
		// The shipped configuration of old: every rule of the example rules
		// judges a window longer than the agents keep.
		"agent window shorter than the rules": {
			tenants: tenantsJSON, config: "agent:\n  window: 15m\n",
			wantErrs: []string{
				`reclaim-rules.json:18:80: rules[0].idle.window: rule "train": judges a 30m0s window, but the agents source keeps only 15m0s of samples (agent.window): it can never judge a job (hint: set agent.window to 30m0s or more`,
				`reclaim-rules.json:29:80: rules[1].idle.window: rule "interactive-batch": judges a 2h0m0s window`,
				`reclaim-rules.json:37:80: rules[2].idle.window: rule "default": judges a 1h0m0s window`,
			},
		},
		"prometheus window shorter than a rule": {
			tenants: tenantsJSON, config: "source: prometheus\nprometheus:\n  window: 1h\n",
			wantErrs: []string{`rules[1].idle.window: rule "interactive-batch": judges a 2h0m0s window, but the prometheus source keeps only 1h0m0s of samples (prometheus.window)`},
		},
		// The newest sample is up to one interval old when a cycle reads
		// it: no window is ever wholly covered, however long the agents
		// keep their samples.
		"full coverage": {
			rules: `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [
  {"name": "all", "idle": {"window": "1h", "min_coverage": 1}}]}`,
			tenants: tenantsJSON,
			wantErrs: []string{`rules.json:2:60: rules[0].idle.min_coverage: rule "all": needs 100% coverage of 1h0m0s, but the newest sample is up to one 10s interval old`,
				"it can never judge a job (hint: lower min_coverage to 0.99 or less"},
		},
		"coverage out of reach": {
			rules: `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [
  {"name": "all", "idle": {"window": "2h", "min_coverage": 0.999}}]}`,
			tenants:  tenantsJSON,
			wantErrs: []string{`rules.json:2:60: rules[0].idle.min_coverage: rule "all": needs 99.9% coverage of 2h0m0s, but 2h0m0s of samples, one 10s interval behind, cover at most 99.86%`, "lower min_coverage to 0.99 or less, or set agent.window to 2h0m10s or more"},
		},
		// A key the rule leaves to its default is located at the
		// nearest value the file gives.
		"defaulted key located at its rule": {
			rules: `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [
  {"name": "all", "idle": {"window": "3h"}}]}`,
			tenants:  tenantsJSON,
			wantErrs: []string{`rules.json:2:38: rules[0].idle.window: rule "all": judges a 3h0m0s window`},
		},
		"warning shorter than a sample": {
			rules: `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [
  {"name": "all", "idle": {"window": "1h"}, "warn": "5s", "action": "cancel", "signal": {"name": "TERM", "wait": "5s"}}]}`,
			tenants: tenantsJSON,
			wantErrs: []string{`rules.json:2:53: rules[0].warn: rule "all": warning period 5s is shorter than the 10s sample interval`,
				`rules.json:2:114: rules[0].signal.wait: rule "all": wait 5s after the signal is shorter than the 10s sample interval`},
		},
		"no tenant map": {wantErrs: []string{"tenants.json: no such file", "strata-policy render writes it"}},
		// The PostgreSQL password is a secret like the tokens: one others
		// can read is refused; one in the URL is refused before.
		"database password readable by all": {
			tenants: tenantsJSON, config: "database: postgres://reclaimd@db.example.org/strata_reclaimd\ndatabase_password_file: {dir}/db.password\n",
			wantErrs: []string{"database_password_file: ", "db.password"},
		},
		"database password in the URL": {
			tenants: tenantsJSON, config: "database: postgres://reclaimd:hunter2@db.example.org/strata_reclaimd\n",
			wantErrs: []string{"database: the URL holds a password"},
		},
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
			write(t, filepath.Join(dir, "db.password"), "secret\n")
			text := "apiVersion: strata/v1\nkind: ReclaimdConfig\nrules_file: " + rulesPath + "\ntenants_file: " + tenantsPath + "\n" +
				strings.ReplaceAll(tc.config, "{dir}", dir)
			if tc.shipped {
				b, err := os.ReadFile("../../../etc/strata/reclaimd.yaml")
				if err != nil {
					t.Fatal(err)
				}
				text = strings.NewReplacer("rules_file: /etc/strata/rendered/reclaim-rules.json", "rules_file: "+rulesPath,
					"tenants_file: /etc/strata/rendered/tenants.json", "tenants_file: "+tenantsPath).Replace(string(b))
			}
			write(t, cfg, text)
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
