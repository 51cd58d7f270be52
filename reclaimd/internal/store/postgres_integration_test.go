//go:build integration

package store

import (
	"testing"

	"github.com/strata-hpc/strata/internal/pgtest"
)

func init() {
	backendMakers = append(backendMakers, struct {
		name string
		make func(t *testing.T) *backend
	}{DialectPostgres, postgresBackend})
}

// postgresBackend is a fresh database on the PostgreSQL bed.
func postgresBackend(t *testing.T) *backend {
	db := pgtest.New(t)
	reopen := func(t *testing.T) (*Store, error) {
		return OpenDatabase(t.Context(), Database{Setting: db.URL, PasswordFile: db.PasswordFile})
	}
	return &backend{reopen: reopen, open: mustOpen(reopen)}
}
