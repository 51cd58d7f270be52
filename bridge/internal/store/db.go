package store

import (
	"context"

	"github.com/strata-hpc/strata/internal/pgsql"
)

// The two databases the store runs on take the same queries: written
// once with ? placeholders and the column user quoted ("user": a
// reserved word in PostgreSQL); pgsql.DB and pgsql.Tx (dbx and txx here) turn the
// placeholders into PostgreSQL's $1, $2, ... on PostgreSQL (as portal-api's store does).

// Dialects of the database.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

type (
	dbx = pgsql.DB
	txx = pgsql.Tx
)

// Dialect is the database's kind: DialectSQLite or DialectPostgres.
func (s *Store) Dialect() string {
	if s.db.Postgres {
		return DialectPostgres
	}
	return DialectSQLite
}

// writeTx runs fn in one write transaction, fenced by the lease
// (fence), and commits; again while a SQLite database is locked
// (bounded). fn gets the generation the write carries, for its rows.
func (s *Store) writeTx(ctx context.Context, fn func(tx *txx, gen int64) error) error {
	return s.retry.Do(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		gen, err := s.fence(ctx, tx)
		if err != nil {
			return err
		}
		if err := fn(tx, gen); err != nil {
			return err
		}
		return tx.Commit()
	})
}
