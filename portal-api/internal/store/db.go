package store

import (
	"context"

	"github.com/strata-hpc/strata/internal/pgsql"
)

// The two databases the store runs on take the same queries: written
// once with ? placeholders, the column user quoted ("user": a reserved
// word in PostgreSQL), new ids read with RETURNING id rather than
// LastInsertId (which PostgreSQL's driver does not give). dbx
// (pgsql.DB) turns the placeholders into PostgreSQL's $1, $2, ... on
// PostgreSQL.

// Dialects of the database.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

type dbx = pgsql.DB

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
	if s.db.Postgres {
		return DialectPostgres
	}
	return DialectSQLite
}
