package pgsql

import (
	"context"
	"database/sql"
)

// DB is a store's database, SQLite or PostgreSQL, for queries written
// once for both: with ? placeholders (SQLite's), which DB turns into
// PostgreSQL's $1, $2, ... when Postgres is set (Rebind). Only the
// methods that take a context rebind; a store calls no other.
type DB struct {
	*sql.DB
	// Postgres: the database is PostgreSQL.
	Postgres bool
}

// Bind is q as the database takes it.
func (d *DB) Bind(q string) string {
	if d.Postgres {
		return Rebind(q)
	}
	return q
}

// ExecContext is sql.DB's, with q rebound.
func (d *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, d.Bind(q), args...)
}

// QueryContext is sql.DB's, with q rebound.
func (d *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.Bind(q), args...)
}

// QueryRowContext is sql.DB's, with q rebound.
func (d *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.Bind(q), args...)
}

// BeginTx starts a transaction whose queries are rebound as d's.
func (d *DB) BeginTx(ctx context.Context, o *sql.TxOptions) (*Tx, error) {
	tx, err := d.DB.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, d: d}, nil
}

// Tx is a transaction on a DB, its queries rebound as the DB's.
type Tx struct {
	*sql.Tx
	d *DB
}

// ExecContext is sql.Tx's, with q rebound.
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.d.Bind(q), args...)
}

// QueryContext is sql.Tx's, with q rebound.
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.d.Bind(q), args...)
}

// QueryRowContext is sql.Tx's, with q rebound.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.d.Bind(q), args...)
}
