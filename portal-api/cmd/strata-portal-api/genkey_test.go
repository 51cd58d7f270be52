package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/config"
)

// gen-key writes sessions.cookie_key_file, once, as a key the portal
// accepts.
func TestGenKey(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	cfg := setup(t)
	key := filepath.Join(filepath.Dir(cfg), "portal-session.key")
	data, _ := os.ReadFile(cfg)
	// Under the test configuration's sessions block (it names the origin).
	with := strings.Replace(string(data), "sessions:\n", "sessions:\n  cookie_key_file: "+key+"\n", 1)
	if with == string(data) {
		t.Fatal("the test configuration has no sessions block")
	}
	if err := os.WriteFile(cfg, []byte(with), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{": written (root:" + g.Name + " 0640)", ": exists, kept (--force replaces it)"} {
		out, stderr, err := runCLI(t, "--config", cfg, "gen-key", "--group", g.Name)
		if err != nil || out != key+want+"\n" {
			t.Fatalf("run %d: %q %q %v, want %q", i, out, stderr, err, key+want)
		}
	}
	if k, err := cookieKey(nil, config.Sessions{CookieKeyFile: key}); err != nil || len(k) < minCookieKey {
		t.Errorf("the portal refuses the key gen-key made: %d bytes, %v", len(k), err)
	}
	// A configuration without the setting: say so.
	if _, _, err := runCLI(t, "--config", setup(t), "gen-key"); err == nil || !strings.Contains(err.Error(), "--file") {
		t.Errorf("gen-key without sessions.cookie_key_file: %v, want an error naming --file", err)
	}
}
