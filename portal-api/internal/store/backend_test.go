package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// The store's tests run on every database it keeps its state in: SQLite
// always, PostgreSQL where the tests are built with the integration tag
// (postgres_integration_test.go) and the PostgreSQL bed is up.

// backend is one database for one test: open it, open it again (a
// restart), and read what it holds as bytes (what a thief of the
// database would see).
type backend struct {
	open   func(t *testing.T) *Store
	reopen func(t *testing.T) (*Store, error)
	raw    func(t *testing.T) ([]byte, error)
	// partial makes the database as a release that knew only the first
	// n migrations left it.
	partial func(t *testing.T, n int) error
}

// backendMakers name and make the databases the tests run on.
var backendMakers = []struct {
	name string
	make func(t *testing.T) *backend
}{{DialectSQLite, sqliteBackend}}

func eachDB(t *testing.T, test func(t *testing.T, b *backend)) {
	for _, m := range backendMakers {
		t.Run(m.name, func(t *testing.T) { test(t, m.make(t)) })
	}
}

func sqliteBackend(t *testing.T) *backend {
	path := filepath.Join(t.TempDir(), "portal.db")
	reopen := func(t *testing.T) (*Store, error) { return Open(t.Context(), path) }
	return &backend{
		reopen: reopen,
		open:   mustOpen(reopen),
		raw:    func(*testing.T) ([]byte, error) { return os.ReadFile(path) },
		partial: func(t *testing.T, n int) error {
			db, err := sqlite.Open(t.Context(), path, App, migrations[:n])
			if err == nil {
				db.Close()
			}
			return err
		},
	}
}

// mustOpen opens a store closed when the test ends.
func mustOpen(reopen func(t *testing.T) (*Store, error)) func(t *testing.T) *Store {
	return func(t *testing.T) *Store {
		t.Helper()
		s, err := reopen(t)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func contextCanceled(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// TestSchema: a database of an earlier release is brought up to date, one
// of a newer release is refused (and left as it is), and two processes
// opening one new database at once (two portals starting together)
// migrate it once.
func TestSchema(t *testing.T) { eachDB(t, testSchema) }

func testSchema(t *testing.T, b *backend) {
	ctx := t.Context()
	// An earlier release: the first three steps only.
	if err := b.partial(t, 3); err != nil {
		t.Fatal(err)
	}
	s := b.open(t)
	if v, err := s.SchemaVersion(ctx); err != nil || v != Migrations() {
		t.Fatalf("after opening a database at version 3: version %d, %v; want %d", v, err, Migrations())
	}
	if _, _, err := s.CreateToken(ctx, "alice", "", time.Hour); err != nil {
		t.Fatalf("a table of a later step: %v", err)
	}
	// Concurrent opens of the up-to-date database change nothing.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := b.reopen(t)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d at once: %v", i, err)
		}
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != Migrations() {
		t.Errorf("schema_migrations has %d rows, %v; want one per step, %d", n, err, Migrations())
	}
	// A newer release wrote it.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, Migrations()+1, 0); err != nil {
		t.Fatal(err)
	}
	_, err := b.reopen(t)
	if err == nil || !strings.Contains(err.Error(), "newer than this strata-portal-api knows") {
		t.Errorf("a database of a newer release: %v", err)
	}
}

// TestSchemaConcurrentFirstOpen: processes that open a new, empty
// database at once apply each step once and all start.
func TestSchemaConcurrentFirstOpen(t *testing.T) { eachDB(t, testSchemaConcurrentFirstOpen) }

func testSchemaConcurrentFirstOpen(t *testing.T, b *backend) {
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			s, err := b.reopen(t)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d at once: %v", i, err)
		}
	}
	s := b.open(t)
	var n int
	if err := s.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != Migrations() {
		t.Errorf("schema_migrations has %d rows, %v; want %d", n, err, Migrations())
	}
}
