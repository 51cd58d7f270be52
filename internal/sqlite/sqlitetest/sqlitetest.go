// Package sqlitetest writes, in tests, the database an earlier release of
// a store left behind, from a SQL file made of that release's CREATE
// statements and some rows, so the store's tests can open and migrate it.
package sqlitetest

import (
	"database/sql"
	"os"
	"path/filepath"
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
