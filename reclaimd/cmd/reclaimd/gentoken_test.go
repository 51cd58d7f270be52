package main

import (
	"bytes"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// gen-token writes the agents' secret where the configuration names it,
// in a form check-config and the daemons accept, and keeps it after.
func TestGenToken(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "reclaimd-agent.token")
	cfg := filepath.Join(dir, "reclaimd.yaml")
	text := "apiVersion: strata/v1\nkind: ReclaimdConfig\nrules_file: /x/rules.json\ntenants_file: /x/tenants.json\nslurm:\n  token_file: /x/jwt\n" +
		"agents:\n  token_file: " + token + "\nagent:\n  token_file: " + token + "\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{": written (root:" + g.Name + " 0640)", ": exists, kept (--force replaces it)"} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), []string{"reclaimd", "--config", cfg, "gen-token", "--group", g.Name}, &out, &errb); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, errb.String())
		}
		if out.String() != token+want+"\n" {
			t.Errorf("run %d printed %q, want %q", i, out.String(), token+want)
		}
	}
	if _, err := openSecret("agents.token_file", token, nil); err != nil {
		t.Errorf("the daemon refuses the secret gen-token made: %v", err)
	}
	if b, _ := os.ReadFile(token); len(strings.TrimSpace(string(b))) < 32 {
		t.Errorf("secret %q is short", b)
	}
}
