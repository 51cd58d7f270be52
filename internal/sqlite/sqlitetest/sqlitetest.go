// Package sqlitetest writes, in tests, the database an earlier release of
// a store left behind, from a SQL file made of that release's CREATE
// statements and some rows, so the store's tests can open and migrate it;
// and locks a database from another connection, as another process would.
package sqlitetest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver
)

// Seed runs the SQL in file on a new database at path, as the release
// that file describes would have written it (without internal/sqlite).
func Seed(t testing.TB, path, file string) {
	t.Helper()
	script, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), string(script)); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// Schemas lists the earlier schemas a store's testdata holds
// (testdata/schema-N.sql); it fails the test when there are none.
func Schemas(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/schema-*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no earlier schemas in testdata: %v", err)
	}
	return files
}

// Lock takes the write lock of the database at path from a connection of
// its own (BEGIN IMMEDIATE, as another process would: a backup, an
// admin's sqlite3 shell), so the store under test finds it locked; readers
// go on. The returned func releases it; the test's end releases it too.
func Lock(t testing.TB, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("lock %s: %v", path, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
			_ = conn.Close()
			_ = db.Close()
		})
	}
	t.Cleanup(release)
	return release
}
