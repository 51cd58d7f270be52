package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func migrations(sql ...string) []Migration {
	var ms []Migration
	for i, s := range sql {
		ms = append(ms, Migration{Name: "step " + string(rune('a'+i)), SQL: s})
	}
	return ms
}

// Migrations apply in order, once, each in its own transaction: a failed
// one leaves nothing behind and the version where it was; an older
// program refuses a newer database.
func TestMigrate(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "m.db")
	v1 := migrations(`CREATE TABLE a (x INTEGER)`)
	v2 := migrations(`CREATE TABLE a (x INTEGER)`, `ALTER TABLE a ADD COLUMN y TEXT NOT NULL DEFAULT 'z'`)
	bad := append(v2[:2:2], Migration{Name: "two tables", SQL: `CREATE TABLE b (x INTEGER); CREATE TABLE a (x INTEGER)`}) // the second statement fails
	db, err := Open(ctx, path, "strata-test", v1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO a(x) VALUES(1)`); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run finds nothing to do
		if err := Migrate(ctx, db, "strata-test", v2); err != nil {
			t.Fatal(err)
		}
	}
	var y string
	if err := db.QueryRowContext(ctx, `SELECT y FROM a WHERE x=1`).Scan(&y); err != nil || y != "z" {
		t.Errorf("row after migration 2: y=%q err=%v; want the default z", y, err)
	}
	if err := Migrate(ctx, db, "strata-test", bad); err == nil || !strings.Contains(err.Error(), "migration 3 (two tables): ") {
		t.Errorf("bad migration: err = %v", err)
	}
	if v, err := SchemaVersion(ctx, db); err != nil || v != 2 {
		t.Errorf("schema version after a failed migration 3 = %d, %v; want 2", v, err)
	}
	var n int
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name='b'`).Scan(&n)
	if n != 0 {
		t.Errorf("the failed migration left table b behind")
	}
	db.Close()
	_, err = Open(ctx, path, "strata-test", v1)
	if err == nil || !strings.Contains(err.Error(), "schema version 2 is newer than this strata-test knows (1): run a newer strata-test") ||
		!strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("older program on a newer database: err = %v", err)
	}
}

// The database runs in WAL mode with foreign keys, the busy timeout and
// full sync, and its files are the owner's only.
func TestOpenSettings(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(ctx, path, "strata-test", migrations(
		`CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p INTEGER NOT NULL REFERENCES p(id))`))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000", "synchronous": "2"} {
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("PRAGMA %s = %q, %v; want %q", pragma, got, err, want)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO c(p) VALUES(7)`); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Errorf("a row that breaks a foreign key: err = %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO p(id) VALUES(7)`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != FileMode {
			t.Errorf("%s has mode %v, want %v", filepath.Base(f), st.Mode().Perm(), FileMode)
		}
	}
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "missing", "s.db"), "strata-test", nil); err == nil ||
		!strings.Contains(err.Error(), "create database") {
		t.Errorf("Open in a missing directory: %v", err)
	}
}

// A database (and its -wal and -shm files) that others may read, made by
// an older release or by hand, is made private when it is opened; its
// group keeps what it had.
func TestOpenExistingLooseMode(t *testing.T) {
	for name, tc := range map[string]struct{ mode, want os.FileMode }{
		"0644": {0o644, 0o640},
		"0666": {0o666, 0o660},
		"0640": {0o640, 0o640},
		"0604": {0o604, 0o600},
		"0600": {0o600, 0o600},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "s.db")
			db, err := Open(ctx, path, "strata-test", migrations(`CREATE TABLE p (id INTEGER PRIMARY KEY)`))
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				if f != path { // a crash leaves them behind
					if err := os.WriteFile(f, nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(f, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			db, err = Open(ctx, path, "strata-test", migrations(`CREATE TABLE p (id INTEGER PRIMARY KEY)`))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				st, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != tc.want {
					t.Errorf("%s: mode %04o after Open, want %04o", filepath.Base(f), st.Mode().Perm(), tc.want)
				}
			}
		})
	}
}

// Two programs opening one new file at once (a CLI verb and the daemon)
// apply each migration once, and neither fails.
func TestOpenConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ms := migrations(`CREATE TABLE a (x INTEGER)`, `CREATE TABLE b (x INTEGER)`, `CREATE TABLE c (x INTEGER)`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			db, err := Open(context.Background(), path, "strata-test", ms)
			if err == nil {
				err = db.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Open: %v", err)
		}
	}
}
