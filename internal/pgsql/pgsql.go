// Package pgsql opens the PostgreSQL database a Strata daemon keeps its
// state in when a site runs it on more than one host, the way
// internal/sqlite opens the SQLite file it keeps by default: the same
// numbered migrations (each sqlite.Migration's Postgres text), the same
// schema_migrations table and so the same version numbers, a database of
// a newer release refused.
//
// The database is named by a URL without a password
// (postgres://strata@db.example.org/strata_portal?sslmode=verify-full);
// the password is in a secret file held to the secret-file rule
// (internal/secretfile), read again at every new connection, so that a
// rotated password is used without a restart. A URL with a password in
// it is refused: it would sit in a configuration file every admin reads.
//
// Two processes starting at once on one database (two portals behind one
// address) migrate it once: the migrations run under an advisory lock.
//
// A store writes its queries once for both databases, with SQLite's ?
// placeholders, and runs them through DB, which rebinds them for
// PostgreSQL (Rebind).
package pgsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// IsURL says whether a database setting names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// CheckURL says what is wrong with a PostgreSQL URL as a Strata daemon
// takes it: it must parse, name a host and a database, and hold no
// password (that goes in the password file).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error repeats the URL, password and all.
		return errors.New("not a URL: write postgres://user@host[:port]/database[?sslmode=...]")
	}
	if !IsURL(raw) {
		return fmt.Errorf("scheme %q: want postgres://", u.Scheme)
	}
	if _, has := u.User.Password(); has {
		return errors.New("the URL holds a password: take it out and put it in the password file (database_password_file)")
	}
	if u.Query().Has("password") {
		return errors.New("the URL's password= parameter holds a password: take it out and put it in the password file (database_password_file)")
	}
	if u.Hostname() == "" {
		return errors.New("no host: write postgres://user@host[:port]/database")
	}
	if strings.Trim(u.Path, "/") == "" {
		return errors.New("no database: write postgres://user@host[:port]/database")
	}
	if u.User.Username() == "" {
		return errors.New("no user: write postgres://user@host[:port]/database")
	}
	if _, err := pgx.ParseConfig(raw); err != nil {
		return errors.New("the driver cannot read it: check the port and the parameters (sslmode=disable|require|verify-ca|verify-full)")
	}
	return nil
}

// Config names a database.
type Config struct {
	// URL is the database's URL, without a password.
	URL string
	// PasswordFile holds the password ("": none, as for a local trust or
	// peer login); read at every new connection.
	PasswordFile string
	// Rule is the secret-file rule of the daemon's secrets.
	Rule secretfile.Rule
	// What names the settings in errors: "database".
	What string
}

// MaxConns bounds a daemon's connections: its writes are small and its
// requests short, and a site's PostgreSQL has max_connections for all.
const MaxConns = 8

// Open connects to the database, checks its schema version and applies
// the migrations it lacks. app names the program in the error for a
// database newer than it.
func Open(ctx context.Context, c Config, app string, migrations []sqlite.Migration) (*sql.DB, error) {
	db, target, err := connect(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db, app, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %s: %w", c.what(), target, err)
	}
	return db, nil
}

// Connect connects to the database as Open does, and neither checks nor
// changes its schema: for a tool that reads the version first (a copy's
// dry run) and migrates, if at all, later.
func Connect(ctx context.Context, c Config) (*sql.DB, error) {
	db, _, err := connect(ctx, c)
	return db, err
}

func (c Config) what() string {
	if c.What == "" {
		return "database"
	}
	return c.What
}

func connect(ctx context.Context, c Config) (*sql.DB, string, error) {
	what := c.what()
	if err := CheckURL(c.URL); err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	cc, err := pgx.ParseConfig(c.URL)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	var opts []stdlib.OptionOpenDB
	if c.PasswordFile != "" {
		f := &secretfile.File{Path: c.PasswordFile, What: what + "_password_file", Rule: c.Rule}
		if _, err := f.Get(); err != nil {
			return nil, "", err
		}
		opts = append(opts, stdlib.OptionBeforeConnect(func(_ context.Context, cc *pgx.ConnConfig) error {
			pw, err := f.Get()
			if err != nil {
				return err
			}
			cc.Password = string(pw)
			return nil
		}))
	}
	db := stdlib.OpenDB(*cc, opts...)
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	target := fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("%s: connect to %s: %w", what, target, err)
	}
	return db, target, nil
}

// lockKey is the advisory lock the migrations of app run under.
func lockKey(app string) int64 {
	h := fnv.New64a()
	h.Write([]byte("strata schema migrations " + app))
	return int64(h.Sum64())
}

// Migrate applies the migrations db lacks, in order, each in its own
// transaction with its row in schema_migrations, all under an advisory
// lock: a second process starting at once waits, then finds the schema
// up to date.
func Migrate(ctx context.Context, db *sql.DB, app string, migrations []sqlite.Migration) error {
	for i, m := range migrations {
		if strings.TrimSpace(m.Postgres) == "" {
			return fmt.Errorf("migration %d (%s) has no PostgreSQL text: this %s keeps its state in SQLite only", i+1, m.Name, app)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	key := lockKey(app)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return fmt.Errorf("lock the schema: %w", err)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key) }()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for {
		done, err := sqlite.Step(ctx, conn, dialect, app, migrations)
		if err != nil || done {
			return err
		}
	}
}

// dialect runs each migration's PostgreSQL text.
var dialect = sqlite.Dialect{
	SQL:    func(m sqlite.Migration) string { return m.Postgres },
	Record: `INSERT INTO schema_migrations(version, applied_at) VALUES($1, $2)`,
}

// Rebind turns a query written with ? placeholders (SQLite's, as a
// store writes it once for both) into PostgreSQL's $1, $2, ...; a ?
// inside a quoted literal or identifier stays.
func Rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
