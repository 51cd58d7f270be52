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
//
// A write that still finds the database locked when its busy timeout ends
// (a long transaction of another process: a backup, an admin's sqlite3
// shell) is tried again by Retry, a bounded backoff, so a daemon's record
// of what it did is not lost to a lock held a few seconds too long.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3" // the SQLite driver
)

// Migration is one step of a schema. Never edit a released one: append.
// A part that can also keep its state in PostgreSQL (internal/pgsql)
// gives each step in both dialects: the two texts side by side are the
// one source of truth of the schema, and a database of either kind at
// version N has the same tables as the other.
type Migration struct {
	Name string // what it does, for errors: "records: add index on status"
	SQL  string // one or more statements, SQLite's dialect
	// Postgres is the same step in PostgreSQL's dialect; "" for a part
	// that keeps its state in SQLite only.
	Postgres string
}

// FileMode is the mode a new database file is created with.
const FileMode os.FileMode = 0o600

// BusyTimeout is how long a statement waits for another connection's lock.
const BusyTimeout = 5 * time.Second

// Options tune Open.
type Options struct {
	// BusyTimeout is how long one statement waits for another
	// connection's lock; default BusyTimeout.
	BusyTimeout time.Duration
}

// Open opens the database at path (creating it, mode FileMode, when it
// does not exist) and applies the migrations it lacks. app names the
// program in the error for a database newer than it.
func Open(ctx context.Context, path, app string, migrations []Migration) (*sql.DB, error) {
	return OpenOptions(ctx, path, app, migrations, Options{})
}

// OpenOptions is Open with options.
func OpenOptions(ctx context.Context, path, app string, migrations []Migration, o Options) (*sql.DB, error) {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = BusyTimeout
	}
	if err := create(path); err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_busy_timeout=%d&_synchronous=FULL&_foreign_keys=on&_txlock=immediate",
		path, o.BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
	if err := ping(ctx, db, o.BusyTimeout); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, explain(path, err))
	}
	if err := Migrate(ctx, db, app, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, explain(path, err))
	}
	return db, nil
}

// ReadOnlyError says the database's directory cannot be written: SQLite
// in WAL mode creates its -wal and -shm files beside the database even to
// read it, and reports only "unable to open database file: no such file
// or directory" when it cannot.
type ReadOnlyError struct {
	Path string
	Dir  string // the directory, or the database file itself, that cannot be written
	Err  error  // syscall.EROFS or syscall.EACCES (what access(2) said), and SQLite's own error
}

func (e *ReadOnlyError) Error() string {
	what := "directory " + e.Dir
	if e.Dir == e.Path {
		what = "database file " + e.Path
	}
	why := "is not writable by this user"
	if errors.Is(e.Err, syscall.EROFS) {
		why = "is on a read-only file system"
	}
	return fmt.Sprintf("%s %s: SQLite cannot create the write-ahead log (%s-wal, %s-shm) it needs beside the database, nor write it; "+
		"mount it read-write, give the service's user write access, or point the state path at a writable directory "+
		"(the unit's StateDirectory=): %v", what, why, filepath.Base(e.Path), filepath.Base(e.Path), e.Err)
}

func (e *ReadOnlyError) Unwrap() error { return e.Err }

// explain turns SQLite's "unable to open database file" or "attempt to
// write a readonly database" into a *ReadOnlyError when the directory (or
// the file) cannot be written; other errors pass through.
func explain(path string, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) || (se.Code != sqlite3.ErrCantOpen && se.Code != sqlite3.ErrReadonly) {
		return err
	}
	dir := filepath.Dir(path)
	for _, p := range []string{dir, path} {
		if aerr := syscall.Access(p, 2 /* W_OK */); errors.Is(aerr, syscall.EROFS) || errors.Is(aerr, syscall.EACCES) {
			return &ReadOnlyError{Path: path, Dir: p, Err: errors.Join(aerr, err)}
		}
	}
	return err
}

// Retry is a bounded backoff for writes that find the database locked
// (SQLITE_BUSY, SQLITE_LOCKED) after their busy timeout.
type Retry struct {
	Attempts int           // tries in all, the first included; default 5
	Wait     time.Duration // before the second try, doubled for each next one; default 250ms
	MaxWait  time.Duration // cap of one wait; default 4s
}

// DefaultRetry is the retry of Strata's stores: with BusyTimeout, a
// write waits for a lock about 30 s in all before it fails.
var DefaultRetry = Retry{Attempts: 5, Wait: 250 * time.Millisecond, MaxWait: 4 * time.Second}

// Do runs fn until it returns an error that is not Busy, or nil, or the
// attempts are spent (the last error is returned, with how many tries it
// took), or ctx ends.
func (r Retry) Do(ctx context.Context, fn func() error) error {
	if r.Attempts <= 0 {
		r.Attempts = DefaultRetry.Attempts
	}
	if r.Wait <= 0 {
		r.Wait = DefaultRetry.Wait
	}
	if r.MaxWait <= 0 {
		r.MaxWait = DefaultRetry.MaxWait
	}
	wait := r.Wait
	for i := 1; ; i++ {
		err := fn()
		if err == nil || !Busy(err) {
			return err
		}
		if i >= r.Attempts {
			return fmt.Errorf("database locked by another process after %d tries: %w", i, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, r.MaxWait)
	}
}

// ping makes the first connection, trying again for up to busy while
// SQLite answers "database is locked": turning a new, empty file to WAL
// takes its exclusive lock, and SQLite answers a second process doing
// the same at that moment at once, without waiting out busy_timeout
// (seen with three processes opening one new file together).
func ping(ctx context.Context, db *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for {
		err := db.PingContext(ctx)
		if err == nil || !Busy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// Busy says whether err is SQLite's "database is locked" (SQLITE_BUSY or
// SQLITE_LOCKED): another connection holds the lock, and a later try may
// succeed.
func Busy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
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
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("create database %s: the directory is on a read-only file system; mount it read-write "+
			"or point the state path at a writable directory: %w", path, err)
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
		done, err := Step(ctx, db, SQLiteDialect, app, migrations)
		if err != nil || done {
			return err
		}
	}
}

// Dialect is what differs between the databases a schema is migrated on:
// which text of a migration runs, and how a version's row is recorded.
type Dialect struct {
	SQL    func(Migration) string
	Record string // INSERT INTO schema_migrations(version, applied_at) with two placeholders
}

// SQLiteDialect runs each migration's SQL.
var SQLiteDialect = Dialect{
	SQL:    func(m Migration) string { return m.SQL },
	Record: `INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)`,
}

// TxBeginner is a *sql.DB or a *sql.Conn.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Step applies the next migration in its own transaction, reading the
// version inside it; done when there is none. A version newer than
// migrations knows is refused.
func Step(ctx context.Context, db TxBeginner, d Dialect, app string, migrations []Migration) (done bool, err error) {
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
	if _, err := tx.ExecContext(ctx, d.SQL(m)); err != nil {
		return false, fmt.Errorf("migration %d (%s): %w", v, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, d.Record, v, time.Now().UnixMilli()); err != nil {
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
