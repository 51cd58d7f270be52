package store

import (
	"context"
	"database/sql"

	"github.com/strata-hpc/strata/internal/pgsql"
)

// The two databases the store runs on take the same queries: written
// once with ? placeholders, the column user quoted ("user": a reserved
// word in PostgreSQL), new ids read with RETURNING id rather than
// LastInsertId (which PostgreSQL's driver does not give), booleans
// written as 0 and 1. pgsql.DB and pgsql.Tx (dbx and txx here) turn the
// placeholders into PostgreSQL's $1, $2, ... on PostgreSQL.

// Dialects of the database.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

type (
	dbx = pgsql.DB
	txx = pgsql.Tx
)

// Fence is checked inside every write's transaction before it writes: a
// controller that lost its lease (internal/lease) writes nothing.
type Fence interface {
	Check(ctx context.Context, tx *sql.Tx) error
}

// write runs fn in one transaction, fenced.
func (s *Store) write(ctx context.Context, fn func(tx *txx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if s.fence != nil {
		if err := s.fence.Check(ctx, tx.Tx); err != nil {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Dialect is the database's kind: DialectSQLite or DialectPostgres.
func (s *Store) Dialect() string {
	if s.db.Postgres {
		return DialectPostgres
	}
	return DialectSQLite
}

// DB is the database itself (for the lease, which shares it).
func (s *Store) DB() *sql.DB { return s.db.DB }

// Fenced is the store with every write fenced by f; it shares the
// database (closing either closes both).
func (s *Store) Fenced(f Fence) *Store {
	c := *s
	c.fence = f
	return &c
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
