//go:build integration

package main

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestMigrateStore: a site on SQLite copies its portal's file into an
// empty PostgreSQL database with migrate-store: the dry run prints each
// table's rows on both sides and changes nothing, --apply copies them,
// and a portal started on PostgreSQL takes the token made on SQLite and
// shows its audit log; a second copy is refused with the reason.
func TestMigrateStore(t *testing.T) {
	cfg := setup(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := regexp.MustCompile(`(?m)^database: (.*)$`).FindStringSubmatch(string(b))[1]
	out, stderr, err := runCLI(t, "--config", cfg, "token", "create", "--user", "mem", "--expires", "1h")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	tok := strings.TrimSpace(out)
	if _, _, err := runCLI(t, "--config", cfg, "migrate-store", "--from", file); err == nil ||
		!strings.Contains(err.Error(), "--to: give the PostgreSQL database") {
		t.Errorf("migrate-store with a SQLite configuration and no --to: %v", err)
	}
	db := pgtest.New(t)
	args := []string{"--config", cfg, "migrate-store", "--from", file, "--to", db.URL, "--to-password-file", db.PasswordFile}
	out, stderr, err = runCLI(t, args...)
	if err != nil {
		t.Fatalf("dry run: %v\n%s%s", err, out, stderr)
	}
	t.Logf("dry run:\n%s", out)
	for _, want := range []string{fmt.Sprintf("schema version %d", store.Migrations()), ": empty", "dry run, nothing changed", "not copied: the state of running portals"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run: no %q in\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^tokens\s+1\s+0\s*$`).MatchString(out) {
		t.Errorf("dry run: tokens not counted 1 and 0:\n%s", out)
	}
	out, stderr, err = runCLI(t, append(args, "--apply")...)
	if err != nil {
		t.Fatalf("--apply: %v\n%s%s", err, out, stderr)
	}
	t.Logf("--apply:\n%s", out)
	if !regexp.MustCompile(`(?m)^tokens\s+1\s+1\s*$`).MatchString(out) || !strings.Contains(out, "copied 1 rows in one transaction") {
		t.Errorf("--apply:\n%s", out)
	}
	out, _, err = runCLI(t, append(args, "--apply")...)
	if err == nil || !strings.Contains(err.Error(), "already holds portal data") || !regexp.MustCompile(`(?m)^tokens\s+1\s+1\s*$`).MatchString(out) {
		t.Errorf("a second --apply: %v\n%s", err, out)
	}

	// The configuration moves to PostgreSQL; the token goes on working.
	conf := regexp.MustCompile(`(?m)^database: .*$`).ReplaceAllString(string(b), "database: "+db.URL+"\ndatabase_password_file: "+db.PasswordFile)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	base := servePortal(t, cfg)
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the SQLite token on the portal on PostgreSQL: %s", resp.Status)
	}
	if out, _, err := runCLI(t, "--config", cfg, "token", "list"); err != nil || !strings.Contains(out, "mem") {
		t.Errorf("token list on PostgreSQL: %v\n%s", err, out)
	}
}
