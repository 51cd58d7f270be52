package pgsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"sync"
	"testing"
)

// recorder is a database/sql driver that keeps the text of every query
// it is given and answers each with no rows: it shows what text reaches
// the database through DB and Tx.
type recorder struct {
	mu      sync.Mutex
	queries []string
}

func (r *recorder) Open(string) (driver.Conn, error) { return recConn{r}, nil }

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

type recConn struct{ r *recorder }

func (c recConn) Prepare(q string) (driver.Stmt, error) {
	c.r.mu.Lock()
	c.r.queries = append(c.r.queries, q)
	c.r.mu.Unlock()
	return recStmt{}, nil
}
func (recConn) Close() error              { return nil }
func (recConn) Begin() (driver.Tx, error) { return recTx{}, nil }

type recStmt struct{}

func (recStmt) Close() error                               { return nil }
func (recStmt) NumInput() int                              { return -1 }
func (recStmt) Exec([]driver.Value) (driver.Result, error) { return driver.RowsAffected(0), nil }
func (recStmt) Query([]driver.Value) (driver.Rows, error)  { return recRows{}, nil }
func (recTx) Commit() error                                { return nil }
func (recTx) Rollback() error                              { return nil }
func (recRows) Columns() []string                          { return []string{"x"} }
func (recRows) Close() error                               { return nil }
func (recRows) Next([]driver.Value) error                  { return io.EOF }

type (
	recTx   struct{}
	recRows struct{}
)

var registerRecorder sync.Once

func TestDBRebinds(t *testing.T) {
	rec := &recorder{}
	registerRecorder.Do(func() { sql.Register("pgsql-recorder", rec) })
	raw, err := sql.Open("pgsql-recorder", "")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	const q = `SELECT "who?" FROM t WHERE a = ? AND b = '?' AND c IN (?, ?)`
	for _, tc := range []struct {
		name     string
		postgres bool
		want     string
	}{
		{"sqlite", false, q},
		{"postgres", true, `SELECT "who?" FROM t WHERE a = $1 AND b = '?' AND c IN ($2, $3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &DB{DB: raw, Postgres: tc.postgres}
			if got := d.Bind(q); got != tc.want {
				t.Errorf("Bind = %q, want %q", got, tc.want)
			}
			rec.take()
			args := []any{1, 2, 3}
			// Every method a store calls, on the database and in a
			// transaction.
			calls := map[string]func() error{
				"DB.ExecContext":     func() error { _, err := d.ExecContext(ctx, q, args...); return err },
				"DB.QueryContext":    func() error { return closeRows(d.QueryContext(ctx, q, args...)) },
				"DB.QueryRowContext": func() error { return noRows(d.QueryRowContext(ctx, q, args...)) },
				"Tx.ExecContext": inTx(d, func(tx *Tx) error {
					_, err := tx.ExecContext(ctx, q, args...)
					return err
				}),
				"Tx.QueryContext":    inTx(d, func(tx *Tx) error { return closeRows(tx.QueryContext(ctx, q, args...)) }),
				"Tx.QueryRowContext": inTx(d, func(tx *Tx) error { return noRows(tx.QueryRowContext(ctx, q, args...)) }),
			}
			for name, call := range calls {
				if err := call(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := rec.take()
				if len(got) != 1 || got[0] != tc.want {
					t.Errorf("%s sent %q, want [%q]", name, got, tc.want)
				}
			}
		})
	}
}

func inTx(d *DB, fn func(*Tx) error) func() error {
	return func() error {
		tx, err := d.BeginTx(context.Background(), nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		return fn(tx)
	}
}

func closeRows(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	return rows.Close()
}

func noRows(row *sql.Row) error {
	var x any
	if err := row.Scan(&x); err != sql.ErrNoRows {
		return err
	}
	return nil
}
