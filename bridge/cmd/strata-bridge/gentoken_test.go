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

// gen-token writes api.token_file of the configuration, once.
func TestGenToken(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "bridge-api.token")
	example, err := os.ReadFile("../../../etc/strata/bridge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(example), "token_file: /etc/strata/bridge-api.token", "token_file: "+token, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{": written (root:" + g.Name + " 0640)", ": exists, kept (--force replaces it)"} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), []string{"strata-bridge", "--config", cfg, "gen-token", "--group", g.Name}, &out, &errb); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, errb.String())
		}
		if out.String() != token+want+"\n" {
			t.Errorf("run %d printed %q, want %q", i, out.String(), token+want)
		}
	}
	st, err := os.Stat(token)
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("%s: %v %v, want mode 0640", token, st, err)
	}
}
