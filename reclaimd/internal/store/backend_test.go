package store

import (
	"path/filepath"
	"testing"
)

// The store's tests run on every database it keeps its state in: SQLite
// always, PostgreSQL where the tests are built with the integration tag
// (postgres_integration_test.go) and the PostgreSQL bed is up.

// backend is one database for one test: open it, and open it again (a
// restart).
type backend struct {
	open   func(t *testing.T) *Store
	reopen func(t *testing.T) (*Store, error)
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
	path := filepath.Join(t.TempDir(), "reclaimd.db")
	reopen := func(t *testing.T) (*Store, error) { return Open(t.Context(), path) }
	return &backend{reopen: reopen, open: mustOpen(reopen)}
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
