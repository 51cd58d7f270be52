package store

import (
	"context"
	"database/sql"

	"github.com/strata-hpc/strata/internal/pgsql"
)

// The two databases the store runs on take the same queries: written
// once with ? placeholders, the column user quoted ("user": a reserved
// word in PostgreSQL), new ids read with RETURNING id rather than
// LastInsertId (which PostgreSQL's driver does not give). dbx and txx
// turn the placeholders into PostgreSQL's $1, $2, ... on PostgreSQL.

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

// insert runs an INSERT and returns the new row's id.
func (s *Store) insert(ctx context.Context, q string, args ...any) (int64, error) {
	var id int64
	err := s.retry.Do(ctx, func() error {
		return s.db.QueryRowContext(ctx, q+` RETURNING id`, args...).Scan(&id)
	})
	return id, err
}

// Dialect is the database's kind: DialectSQLite or DialectPostgres.
func (s *Store) Dialect() string {
	if s.db.pg {
		return DialectPostgres
	}
	return DialectSQLite
}
