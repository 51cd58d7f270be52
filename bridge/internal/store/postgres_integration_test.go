//go:build integration

package store

import (
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/pgtest"
)

func init() {
	backendMakers = append(backendMakers, struct {
		name string
		make func(t *testing.T) *backend
	}{DialectPostgres, postgresBackend})
}

// postgresBackend is a fresh database on the PostgreSQL bed. Every open
// holds the lease as one holder, so that a reopened store (a restart)
// writes as the one before.
func postgresBackend(t *testing.T) *backend {
	db := pgtest.New(t)
	d := Database{URL: db.URL, PasswordFile: db.PasswordFile}
	reopen := func(t *testing.T) (*Store, error) {
		s, err := OpenDatabase(t.Context(), d)
		if err != nil {
			return nil, err
		}
		l := s.NewLease("store-test", time.Minute)
		if ok, err := l.Acquire(t.Context()); !ok || err != nil {
			s.Close()
			t.Fatalf("take the lease: %v, %v", ok, err)
		}
		s.SetLease(l)
		return s, nil
	}
	return &backend{reopen: reopen, open: func(t *testing.T) *Store {
		t.Helper()
		s, err := reopen(t)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}}
}
