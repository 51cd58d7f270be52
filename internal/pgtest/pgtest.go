// Package pgtest gives tests a database of their own on the PostgreSQL
// test bed (test/testbed/pg/pg.sh): a fresh database per test, dropped
// when the test ends. The bed is found through the environment file that
// STRATA_PG_ENV names; without it the test is skipped, except under
// CI=true, where the bed is part of the run and its absence fails the
// test.
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// EnvVar names the bed's environment file.
const EnvVar = "STRATA_PG_ENV"

// DB is a test's database.
type DB struct {
	// URL names the database, without a password.
	URL string
	// PasswordFile holds the password (mode 0600).
	PasswordFile string
	// Name is the database's name.
	Name string
}

// Bed is the test bed as its environment file describes it.
type Bed struct {
	URL          string // of the bed's maintenance database, without a password
	PasswordFile string
}

// Find reads the bed's environment file; it skips the test (fails it
// under CI=true) when STRATA_PG_ENV is not set.
func Find(t testing.TB) Bed {
	t.Helper()
	path := os.Getenv(EnvVar)
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set under CI=true: start the PostgreSQL bed (test/testbed/pg/pg.sh up) and pass its environment file", EnvVar)
		}
		t.Skipf("%s is not set: no PostgreSQL test bed (test/testbed/pg/pg.sh up, then %s=/var/lib/strata/testbed/pg/env)", EnvVar, EnvVar)
	}
	vars, err := readEnv(path)
	if err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	b := Bed{URL: vars["STRATA_PG_URL"], PasswordFile: vars["STRATA_PG_PASSWORD_FILE"]}
	if b.URL == "" || b.PasswordFile == "" {
		t.Fatalf("%s: %s has no STRATA_PG_URL or STRATA_PG_PASSWORD_FILE: is the bed up?", EnvVar, path)
	}
	return b
}

// New makes a fresh, empty database on the bed for this test and drops it
// when the test ends.
func New(t testing.TB) DB {
	t.Helper()
	b := Find(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := b.open()
	if err != nil {
		t.Fatal(err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "t_" + strings.ToLower(sanitize(t.Name())) + "_" + hex.EncodeToString(rnd[:])
	if len(name) > 63 {
		name = name[:50] + "_" + hex.EncodeToString(rnd[:])
	}
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		admin.Close()
		t.Fatalf("create database %s on the PostgreSQL bed: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatalf("%s: STRATA_PG_URL: %v", EnvVar, err)
	}
	u.Path = "/" + name
	return DB{URL: u.String(), PasswordFile: b.PasswordFile, Name: name}
}

func (b Bed) open() (*sql.DB, error) {
	cc, err := pgx.ParseConfig(b.URL)
	if err != nil {
		return nil, fmt.Errorf("STRATA_PG_URL: %w", err)
	}
	pw, err := os.ReadFile(b.PasswordFile)
	if err != nil {
		return nil, err
	}
	cc.Password = strings.TrimSpace(string(pw))
	return stdlib.OpenDB(*cc), nil
}

func sanitize(s string) string {
	var out strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			out.WriteRune(r)
		default:
			out.WriteByte('_')
		}
	}
	return out.String()
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		vars[k] = strings.Trim(v, `"`)
	}
	return vars, sc.Err()
}
