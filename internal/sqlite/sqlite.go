// Package sqlite opens the SQLite databases Strata's daemons keep their
// state in, all the same way: WAL (readers never wait for the writer), a
// busy timeout and write transactions that take the lock when they begin
// (so a CLI verb and the daemon sharing a file wait for each other rather
// than fail), foreign keys on, full fsync, one connection (one writer; a
// daemon's writes are small), and the file created mode 0600 (SQLite
// gives its -wal and -shm files the same mode); an existing file others
// may read is made private.
//
// The schema is made by numbered migrations, each applied in one
// transaction together with its row in schema_migrations, so a database
// of any earlier release opens and is brought up to date, and a database
// written by a newer release is refused rather than guessed at. A part
// lists its migrations once and only ever appends to the list:
//
//	var migrations = []sqlite.Migration{
//		{Name: "deployments, versions, events, seen", SQL: `CREATE TABLE ...`},
//		{Name: "versions: add a column", SQL: `ALTER TABLE versions ADD COLUMN ...`},
//	}
//	db, err := sqlite.Open(ctx, path, "strata-bridge", migrations)
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver
)

// Migration is one step of a schema. Never edit a released one: append.
type Migration struct {
	Name string // what it does, for errors: "records: add index on status"
	SQL  string // one or more statements
}

// FileMode is the mode a new database file is created with.
const FileMode os.FileMode = 0o600

// BusyTimeout is how long a statement waits for another connection's lock.
const BusyTimeout = 5 * time.Second

// Open opens the database at path (creating it, mode FileMode, when it
// does not exist) and applies the migrations it lacks. app names the
// program in the error for a database newer than it.
func Open(ctx context.Context, path, app string, migrations []Migration) (*sql.DB, error) {
	if err := create(path); err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_busy_timeout=%d&_synchronous=FULL&_foreign_keys=on&_txlock=immediate",
		path, BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := Migrate(ctx, db, app, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return db, nil
}

// create makes an empty database file with FileMode unless one exists:
// SQLite itself would create it 0644 (less the umask), readable by all.
// An existing database others may read or write (one made before, or by
// hand) is made private: its group keeps what it had (0640 is a site's
// choice), others lose everything.
func create(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	switch {
	case errors.Is(err, os.ErrExist):
		return private(path)
	case err != nil:
		return fmt.Errorf("create database: %w", err)
	}
	return f.Close()
}

// private takes every permission of others from the database and its
// -wal and -shm files (SQLite gives them the database's mode when it
// makes them, but not when they exist). A file this process may not
// change (another user's, or on a read-only mount) is left to the open
// that follows, which reports what matters.
func private(path string) error {
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Lstat(f)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o007 == 0 {
			continue
		}
		if err := os.Chmod(f, st.Mode().Perm()&^0o007); err != nil && !errors.Is(err, os.ErrPermission) && !errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("database %s (mode %04o) is open to every user and could not be made private: %w", f, st.Mode().Perm(), err)
		}
	}
	return nil
}

// Migrate applies the migrations db lacks, in order, each in its own
// transaction with its row in schema_migrations. The version is read
// inside each transaction, so two processes opening one file at once
// apply each step once.
func Migrate(ctx context.Context, db *sql.DB, app string, migrations []Migration) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for {
		done, err := step(ctx, db, app, migrations)
		if err != nil || done {
			return err
		}
	}
}

// step applies the next migration; done when there is none.
func step(ctx context.Context, db *sql.DB, app string, migrations []Migration) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case have > len(migrations):
		return false, fmt.Errorf("schema version %d is newer than this %s knows (%d): run a newer %s, or restore the backup of the database",
			have, app, len(migrations), app)
	case have == len(migrations):
		return true, nil
	}
	v := have + 1
	m := migrations[v-1]
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %d (%s): %w", v, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)`, v, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration %d (%s): %w", v, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %d (%s): %w", v, m.Name, err)
	}
	return false, nil
}

// SchemaVersion is the number of migrations db has had.
func SchemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
