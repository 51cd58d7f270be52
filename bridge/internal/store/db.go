package store

import (
	"context"
	"database/sql"

	"github.com/strata-hpc/strata/internal/pgsql"
)

// The two databases the store runs on take the same queries: written
// once with ? placeholders and the column user quoted ("user": a
// reserved word in PostgreSQL); dbx and txx turn the placeholders into
// PostgreSQL's $1, $2, ... on PostgreSQL (as portal-api's store does).

// Dialects of the database.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

type dbx struct {
	*sql.DB
	pg bool
}

func (d *dbx) bind(q string) string {
	if d.pg {
		return pgsql.Rebind(q)
	}
	return q
}

func (d *dbx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, d.bind(q), args...)
}

func (d *dbx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.bind(q), args...)
}

func (d *dbx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.bind(q), args...)
}

func (d *dbx) BeginTx(ctx context.Context, o *sql.TxOptions) (*txx, error) {
	tx, err := d.DB.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &txx{Tx: tx, d: d}, nil
}

type txx struct {
	*sql.Tx
	d *dbx
}

func (t *txx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.d.bind(q), args...)
}

func (t *txx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.d.bind(q), args...)
}

// Dialect is the database's kind: DialectSQLite or DialectPostgres.
func (s *Store) Dialect() string {
	if s.db.pg {
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
