//go:build integration

package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/internal/secretfile"
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
		return OpenDatabase(t.Context(), Database{Setting: db.URL, PasswordFile: db.PasswordFile, Rule: secretfile.Rule{}})
	}
	return &backend{reopen: reopen, open: mustOpen(reopen), raw: func(t *testing.T) ([]byte, error) { return dumpPostgres(t.Context(), db) },
		partial: func(t *testing.T, n int) error {
			sdb, err := pgsql.Open(t.Context(), pgsql.Config{URL: db.URL, PasswordFile: db.PasswordFile}, App, migrations[:n])
			if err == nil {
				sdb.Close()
			}
			return err
		}}
}

// dumpPostgres is every row of every table of the database as text.
func dumpPostgres(ctx context.Context, d pgtest.DB) ([]byte, error) {
	s, err := OpenDatabase(ctx, Database{Setting: d.URL, PasswordFile: d.PasswordFile})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	tables, err := names(ctx, s.db.DB, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for _, tb := range tables {
		rows, err := names(ctx, s.db.DB, fmt.Sprintf(`SELECT t::text FROM %s t`, pgx.Identifier{tb}.Sanitize()))
		if err != nil {
			return nil, err
		}
		out.WriteString(tb + ": " + strings.Join(rows, "\n") + "\n")
	}
	return []byte(out.String()), nil
}

func names(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
