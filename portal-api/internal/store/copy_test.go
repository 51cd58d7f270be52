package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// TestCopySourceRefused: a copy reads the SQLite file before it reaches
// for PostgreSQL, and refuses a file that is missing, not a portal's, or
// of another schema version, with what to do; the file is left as it was.
func TestCopySourceRefused(t *testing.T) {
	dir := t.TempDir()
	older := filepath.Join(dir, "older.db")
	db, err := sqlite.Open(t.Context(), older, App, migrations[:3])
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	newer := filepath.Join(dir, "newer.db")
	s, err := Open(t.Context(), newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `INSERT INTO schema_migrations(version, applied_at) VALUES (?, 0)`, Migrations()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(older)
	// The target is never reached: its URL is not even valid.
	to := Database{Setting: "postgres://nobody@invalid.invalid/none"}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.db"), "no such file"},
		{other, "not a strata-portal-api database"},
		{older, "schema version 3 is older than this strata-portal-api's"},
		{newer, "is newer than this strata-portal-api knows"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := CopyToPostgres(ctx, c.path, to, true)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", filepath.Base(c.path), err, c.want)
		}
	}
	if after, _ := os.ReadFile(older); string(after) != string(before) {
		t.Error("the copy changed the SQLite file")
	}
}
