package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// A site that outgrows one portal host copies its SQLite file into the
// PostgreSQL database its portals will share, once, with the portal
// stopped: tokens, the audit log, submissions, sessions, page sessions
// and sign-in links, row for row with their ids, so that a token, a
// page's cookie and the audit log go on as they were.

// CopyTable is one table of a copy: its rows in the SQLite file and in
// the PostgreSQL database (before the copy, or after it once applied).
type CopyTable struct {
	Name           string
	Source, Target int64
	// Runtime is the state of the portals running on one database (the
	// poll leases and their snapshots, the instances): not copied.
	Runtime bool
}

// CopyPlan is what a copy finds and does.
type CopyPlan struct {
	// Want is this release's schema version; SourceVersion and
	// TargetVersion the two databases' (0: an empty PostgreSQL database).
	Want, SourceVersion, TargetVersion int
	Tables                             []CopyTable
	// Applied: the rows were copied (Target counts them).
	Applied bool
}

// Rows is the number of rows the copy takes (or took).
func (p *CopyPlan) Rows() int64 {
	var n int64
	for _, t := range p.Tables {
		if !t.Runtime {
			n += t.Source
		}
	}
	return n
}

// ErrTargetNotEmpty: the PostgreSQL database already holds the state of
// a portal; a copy into it would mix two sites' tokens and audit logs.
var ErrTargetNotEmpty = errors.New("the PostgreSQL database already holds portal data: copy only into an empty database")

// runtimeTables are the state of running portals, not of the site.
var runtimeTables = map[string]bool{"poll_leases": true, "portal_instances": true}

// CopyToPostgres copies the portal's SQLite file at from into the
// PostgreSQL database to. Both must be at this release's schema version
// (a PostgreSQL database of an earlier version, or an empty one, is
// brought up to date first, as a portal's start would); every table the
// copy fills must be empty there. Without apply it only reads both sides
// and says what it would copy; with apply it copies every row in one
// transaction, under a lock that keeps a portal already started on the
// database from writing meanwhile, and with each table's identity
// continued past the ids copied. The SQLite file is only read.
func CopyToPostgres(ctx context.Context, from string, to Database, apply bool) (*CopyPlan, error) {
	plan := &CopyPlan{Want: len(migrations)}
	src, err := openReadOnly(ctx, from)
	if err != nil {
		return nil, err
	}
	defer func() { _ = src.Close() }() // read only
	stx, err := src.BeginTx(ctx, nil)  // one snapshot of the file for counts and rows
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	defer func() { _ = stx.Rollback() }() // read only
	if err := stx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&plan.SourceVersion); err != nil {
		return nil, fmt.Errorf("%s: not a strata-portal-api database (%w)", from, err)
	}
	switch {
	case plan.SourceVersion > plan.Want:
		return nil, fmt.Errorf("%s: schema version %d is newer than this %s knows (%d): copy with the release that wrote it", from, plan.SourceVersion, App, plan.Want)
	case plan.SourceVersion < plan.Want:
		return nil, fmt.Errorf("%s: schema version %d is older than this %s's (%d): bring it up to date first by running this release once on it "+
			"(strata-portal-api --config <a configuration whose database is the file> token list)", from, plan.SourceVersion, App, plan.Want)
	}
	tables, err := sqliteTables(ctx, stx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}

	dst, err := pgsql.Connect(ctx, pgsql.Config{URL: to.Setting, PasswordFile: to.PasswordFile, Rule: to.Rule, What: "target database"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = dst.Close() }()
	if plan.TargetVersion, err = postgresVersion(ctx, dst); err != nil {
		return nil, fmt.Errorf("target database: %w", err)
	}
	if plan.TargetVersion > plan.Want {
		return nil, fmt.Errorf("target database: schema version %d is newer than this %s knows (%d)", plan.TargetVersion, App, plan.Want)
	}
	for _, t := range tables {
		ct := CopyTable{Name: t, Runtime: runtimeTables[t]}
		if err := stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+sqliteIdent(t)).Scan(&ct.Source); err != nil {
			return nil, fmt.Errorf("%s: count %s: %w", from, t, err)
		}
		if ct.Target, err = postgresCount(ctx, dst, t); err != nil {
			return nil, fmt.Errorf("target database: %w", err)
		}
		plan.Tables = append(plan.Tables, ct)
	}
	if notEmpty(plan) {
		return plan, ErrTargetNotEmpty
	}
	if !apply {
		return plan, nil
	}
	if plan.TargetVersion < plan.Want {
		if err := pgsql.Migrate(ctx, dst, App, migrations); err != nil {
			return plan, fmt.Errorf("target database: %w", err)
		}
		if plan.TargetVersion, err = postgresVersion(ctx, dst); err != nil {
			return plan, fmt.Errorf("target database: %w", err)
		}
	}
	conn, err := dst.Conn(ctx)
	if err != nil {
		return plan, fmt.Errorf("target database: %w", err)
	}
	defer func() { _ = conn.Close() }()
	err = conn.Raw(func(dc any) error {
		return copyRows(ctx, stx, dc.(*stdlib.Conn).Conn(), plan)
	})
	if err != nil {
		return plan, err
	}
	plan.Applied = true
	return plan, nil
}

func notEmpty(plan *CopyPlan) bool {
	for _, t := range plan.Tables {
		if !t.Runtime && t.Target > 0 {
			return true
		}
	}
	return false
}

// openReadOnly opens a SQLite file for reading only: it is neither
// created nor migrated nor written.
func openReadOnly(ctx context.Context, path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the SQLite file: %w", err)
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro"}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close() // never opened
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return db, nil
}

// sqliteTables lists the file's tables (but schema_migrations), each
// after the tables its foreign keys name.
func sqliteTables(ctx context.Context, tx *sql.Tx) ([]string, error) {
	names, err := strings1(ctx, tx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'
		AND name <> 'schema_migrations' ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	parents := map[string][]string{}
	for _, n := range names {
		if parents[n], err = strings1(ctx, tx, `SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)`, n); err != nil {
			return nil, err
		}
	}
	var out []string
	done := map[string]bool{}
	var visit func(n string, depth int) error
	visit = func(n string, depth int) error {
		if done[n] {
			return nil
		}
		if depth > len(names) {
			return fmt.Errorf("the foreign keys of %s go round in a circle", n)
		}
		for _, p := range parents[n] {
			if p != n && slices.Contains(names, p) {
				if err := visit(p, depth+1); err != nil {
					return err
				}
			}
		}
		done[n] = true
		out = append(out, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func strings1(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func sqliteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// postgresVersion is the database's schema version; 0 for a database
// no Strata daemon has used.
func postgresVersion(ctx context.Context, db *sql.DB) (int, error) {
	var has bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&has); err != nil {
		return 0, err
	}
	if !has {
		return 0, nil
	}
	return sqlite.SchemaVersion(ctx, db)
}

// postgresCount is the rows of a table; 0 when it does not exist yet.
func postgresCount(ctx context.Context, db *sql.DB, table string) (int64, error) {
	var has bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{table}.Sanitize()).Scan(&has); err != nil {
		return 0, fmt.Errorf("table %s: %w", table, err)
	}
	if !has {
		return 0, nil
	}
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", table, err)
	}
	return n, nil
}

// pgColumn is a column of a PostgreSQL table.
type pgColumn struct {
	text, identity bool
}

// copyRows copies every table of plan but the runtime ones in one
// transaction of the target.
func copyRows(ctx context.Context, src *sql.Tx, dst *pgx.Conn, plan *CopyPlan) error {
	tx, err := dst.Begin(ctx)
	if err != nil {
		return fmt.Errorf("target database: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit, a no-op
	var copied []string
	for _, t := range plan.Tables {
		if !t.Runtime {
			copied = append(copied, pgx.Identifier{t.Name}.Sanitize())
		}
	}
	// A portal started on the target meanwhile waits until the copy is
	// done, and the emptiness is checked again under the lock.
	if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(copied, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return fmt.Errorf("target database: lock the tables: %w", err)
	}
	for i, t := range plan.Tables {
		if t.Runtime {
			continue
		}
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM `+pgx.Identifier{t.Name}.Sanitize()).Scan(&plan.Tables[i].Target); err != nil {
			return fmt.Errorf("target database: count %s: %w", t.Name, err)
		}
	}
	if notEmpty(plan) {
		return ErrTargetNotEmpty
	}
	for i, t := range plan.Tables {
		if t.Runtime {
			continue
		}
		n, err := copyTable(ctx, src, tx, t.Name)
		if err != nil {
			return fmt.Errorf("copy %s: %w", t.Name, err)
		}
		if n != t.Source {
			return fmt.Errorf("copy %s: %d rows copied, %d counted", t.Name, n, t.Source)
		}
		plan.Tables[i].Target = n
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("target database: commit the copy: %w", err)
	}
	return nil
}

// copyTable copies one table's rows, ids included, and continues its
// identity past the largest id.
func copyTable(ctx context.Context, src *sql.Tx, dst pgx.Tx, table string) (int64, error) {
	cols, err := strings1(ctx, src, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		return 0, err
	}
	pg := map[string]pgColumn{}
	rows, err := dst.Query(ctx, `SELECT column_name, data_type, is_identity FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, table)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var name, typ, ident string
		if err := rows.Scan(&name, &typ, &ident); err != nil {
			rows.Close()
			return 0, err
		}
		pg[name] = pgColumn{text: typ == "text", identity: ident == "YES"}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	// The two dialects of one schema version have the same columns; a
	// difference is a fault of the migrations, and nothing is copied.
	for _, c := range cols {
		if _, ok := pg[c]; !ok {
			return 0, fmt.Errorf("column %s is in the SQLite file and not in PostgreSQL", c)
		}
	}
	if len(pg) != len(cols) {
		return 0, fmt.Errorf("PostgreSQL has %d columns, the SQLite file %d", len(pg), len(cols))
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = sqliteIdent(c)
	}
	srows, err := src.QueryContext(ctx, `SELECT `+strings.Join(quoted, ", ")+` FROM `+sqliteIdent(table))
	if err != nil {
		return 0, err
	}
	defer srows.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n, err := dst.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
		if !srows.Next() {
			return nil, srows.Err()
		}
		if err := srows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(cols))
		for i, v := range vals {
			if b, ok := v.([]byte); ok && pg[cols[i]].text {
				v = string(b)
			}
			row[i] = v
		}
		return row, nil
	}))
	if err != nil {
		return n, err
	}
	for _, c := range cols {
		if !pg[c].identity {
			continue
		}
		// The next id the portal makes follows the largest copied.
		if _, err := dst.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(MAX(`+pgx.Identifier{c}.Sanitize()+`), 1), MAX(`+
			pgx.Identifier{c}.Sanitize()+`) IS NOT NULL) FROM `+pgx.Identifier{table}.Sanitize(), pgx.Identifier{table}.Sanitize(), c); err != nil {
			return n, fmt.Errorf("continue the ids of %s: %w", table, err)
		}
	}
	return n, nil
}
