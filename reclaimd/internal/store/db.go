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
// written as 0 and 1. dbx and txx turn the placeholders into
// PostgreSQL's $1, $2, ... on PostgreSQL.

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

type txx struct {
	*sql.Tx
	d *dbx
}

func (t *txx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.d.bind(q), args...)
}

func (t *txx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.d.bind(q), args...)
}

func (t *txx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.d.bind(q), args...)
}

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
		if err := s.fence.Check(ctx, tx); err != nil {
			return err
		}
	}
	if err := fn(&txx{Tx: tx, d: s.db}); err != nil {
		return err
	}
	return tx.Commit()
}

// Dialect is the database's kind: DialectSQLite or DialectPostgres.
func (s *Store) Dialect() string {
	if s.db.pg {
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
