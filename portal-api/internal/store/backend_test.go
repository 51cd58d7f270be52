package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// The store's tests run on every database it keeps its state in: SQLite
// always, PostgreSQL where the tests are built with the integration tag
// (postgres_integration_test.go) and the PostgreSQL bed is up.

// backend is one database for one test: open it, open it again (a
// restart), and read what it holds as bytes (what a thief of the
// database would see).
type backend struct {
	open   func(t *testing.T) *Store
	reopen func(t *testing.T) (*Store, error)
	raw    func(t *testing.T) ([]byte, error)
	// partial makes the database as a release that knew only the first
	// n migrations left it.
	partial func(t *testing.T, n int) error
}

// backendMakers name and make the databases the tests run on.
var backendMakers = []struct {
	name string
	make func(t *testing.T) *backend
}{{DialectSQLite, sqliteBackend}}

func eachDB(t *testing.T, test func(t *testing.T, b *backend)) {
	for _, m := range backendMakers {
		t.Run(m.name, func(t *testing.T) { test(t, m.make(t)) })
	}
}

func sqliteBackend(t *testing.T) *backend {
	path := filepath.Join(t.TempDir(), "portal.db")
	reopen := func(t *testing.T) (*Store, error) { return Open(t.Context(), path) }
	return &backend{
		reopen: reopen,
		open:   mustOpen(reopen),
		raw:    func(*testing.T) ([]byte, error) { return os.ReadFile(path) },
		partial: func(t *testing.T, n int) error {
			db, err := sqlite.Open(t.Context(), path, App, migrations[:n])
			if err == nil {
				db.Close()
			}
			return err
		},
	}
}

// mustOpen opens a store closed when the test ends.
func mustOpen(reopen func(t *testing.T) (*Store, error)) func(t *testing.T) *Store {
	return func(t *testing.T) *Store {
		t.Helper()
		s, err := reopen(t)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func contextCanceled(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// TestSchema: a database of an earlier release is brought up to date, one
// of a newer release is refused (and left as it is), and two processes
// opening one new database at once (two portals starting together)
// migrate it once.
func TestSchema(t *testing.T) { eachDB(t, testSchema) }

func testSchema(t *testing.T, b *backend) {
	ctx := t.Context()
	// An earlier release: the first three steps only.
	if err := b.partial(t, 3); err != nil {
		t.Fatal(err)
	}
	s := b.open(t)
	if v, err := s.SchemaVersion(ctx); err != nil || v != Migrations() {
		t.Fatalf("after opening a database at version 3: version %d, %v; want %d", v, err, Migrations())
	}
	if _, _, err := s.CreateToken(ctx, "alice", "", time.Hour); err != nil {
		t.Fatalf("a table of a later step: %v", err)
	}
	// Concurrent opens of the up-to-date database change nothing.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := b.reopen(t)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d at once: %v", i, err)
		}
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != Migrations() {
		t.Errorf("schema_migrations has %d rows, %v; want one per step, %d", n, err, Migrations())
	}
	// A newer release wrote it.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, Migrations()+1, 0); err != nil {
		t.Fatal(err)
	}
	_, err := b.reopen(t)
	if err == nil || !strings.Contains(err.Error(), "newer than this strata-portal-api knows") {
		t.Errorf("a database of a newer release: %v", err)
	}
}

// TestSchemaConcurrentFirstOpen: processes that open a new, empty
// database at once apply each step once and all start.
func TestSchemaConcurrentFirstOpen(t *testing.T) { eachDB(t, testSchemaConcurrentFirstOpen) }

func testSchemaConcurrentFirstOpen(t *testing.T, b *backend) {
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			s, err := b.reopen(t)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d at once: %v", i, err)
		}
	}
	s := b.open(t)
	var n int
	if err := s.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != Migrations() {
		t.Errorf("schema_migrations has %d rows, %v; want %d", n, err, Migrations())
	}
}

// TestPollLease: one holder at a time; the holder renews, the other
// takes over only once the lease ran out, and a holder that lost the
// lease publishes nothing.
func TestPollLease(t *testing.T) { eachDB(t, testPollLease) }

func testPollLease(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	a, o := s.PollLease("gpu1", "portal-a", 3*time.Second), s.PollLease("gpu1", "portal-b", 3*time.Second)
	if data, _, err := o.Latest(ctx); err != nil || data != nil {
		t.Errorf("Latest before any poll: %q, %v", data, err)
	}
	if ok, err := a.Acquire(ctx); !ok || err != nil {
		t.Fatalf("a takes a free lease: %v, %v", ok, err)
	}
	if ok, err := o.Acquire(ctx); ok || err != nil {
		t.Fatalf("b takes a held lease: %v, %v", ok, err)
	}
	if ok, err := a.Publish(ctx, []byte("snap-1"), now); !ok || err != nil {
		t.Fatalf("a publishes: %v, %v", ok, err)
	}
	if data, at, err := o.Latest(ctx); err != nil || string(data) != "snap-1" || !at.Equal(now) {
		t.Errorf("b reads %q at %v, %v", data, at, err)
	}
	now = now.Add(2 * time.Second)
	if ok, _ := a.Acquire(ctx); !ok {
		t.Fatal("a cannot renew its lease")
	}
	now = now.Add(2 * time.Second) // within a's renewed lease
	if ok, _ := o.Acquire(ctx); ok {
		t.Fatal("b took a lease a renewed")
	}
	if h, _ := o.Holder(ctx); h != "portal-a" {
		t.Errorf("holder %q", h)
	}
	now = now.Add(2 * time.Second) // a stopped renewing: the lease ran out
	if h, _ := o.Holder(ctx); h != "" {
		t.Errorf("holder of a lease that ran out: %q", h)
	}
	if ok, err := o.Acquire(ctx); !ok || err != nil {
		t.Fatalf("b takes the lease a let run out: %v, %v", ok, err)
	}
	if ok, err := a.Publish(ctx, []byte("snap-stale"), now); ok || err != nil {
		t.Errorf("a publishes after losing the lease: %v, %v", ok, err)
	}
	if ok, _ := a.Acquire(ctx); ok {
		t.Error("a takes b's lease back")
	}
	if data, _, _ := a.Latest(ctx); string(data) != "snap-1" {
		t.Errorf("the snapshot is %q", data)
	}
	var gen int
	if err := s.db.QueryRowContext(ctx, `SELECT generation FROM poll_leases WHERE cluster = ?`, "gpu1").Scan(&gen); err != nil || gen != 2 {
		t.Errorf("generation %d, %v; want 2 (a, then b)", gen, err)
	}
}
