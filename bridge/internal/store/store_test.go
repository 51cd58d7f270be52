package store

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/sqlite"
	"github.com/strata-hpc/strata/internal/sqlite/sqlitetest"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The store's tests run on every database it keeps its state in: SQLite
// always, PostgreSQL where the tests are built with the integration tag
// (postgres_integration_test.go) and the PostgreSQL bed is up.

// backend is one database for one test; open opens it (again: a
// restart), holding the lease, and closes it when the test ends.
type backend struct {
	open   func(t *testing.T) *Store
	reopen func(t *testing.T) (*Store, error)
}

// backendMakers name and make the databases the tests run on.
var backendMakers = []struct {
	name string
	make func(t *testing.T) *backend
}{{DialectSQLite, sqliteBackend}}

// eachDB runs test once per database; mk makes a fresh database.
func eachDB(t *testing.T, test func(t *testing.T, mk func(t *testing.T) *backend)) {
	for _, m := range backendMakers {
		t.Run(m.name, func(t *testing.T) { test(t, m.make) })
	}
}

func sqliteBackend(t *testing.T) *backend {
	path := filepath.Join(t.TempDir(), "bridge.db")
	return &backend{open: func(t *testing.T) *Store { return open(t, path) },
		reopen: func(t *testing.T) (*Store, error) { return Open(t.Context(), path) }}
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func version(job int64, name, tenant string, gpus, replicas int, at time.Time) Version {
	return Version{JobID: job, Name: name, Namespace: "strata-" + tenant, Tenant: tenant, Project: "p", Account: tenant + "-p", User: "alice",
		GPUs: gpus, Tier: "dedicated", MaxReplicas: replicas, ModelPath: "/shared/models/" + name, Spec: json.RawMessage(`{"name":"` + name + `"}`),
		Objects: json.RawMessage(`[{"kind":"Deployment"}]`), CreatedAt: at}
}

// A version goes applying → ready and becomes current; a second version
// replaces it as current; both stay readable, the events say what
// happened, and a new process reads the same.
func TestVersionLifecycle(t *testing.T) { eachDB(t, testVersionLifecycle) }

func testVersionLifecycle(t *testing.T, mk func(t *testing.T) *backend) {
	ctx := t.Context()
	b := mk(t)
	s := b.open(t)
	v1 := version(101, "llama", "acme", 2, 1, t0)
	if err := s.StartVersion(ctx, v1, "deploy"); err != nil {
		t.Fatal(err)
	}
	d, err := s.Deployment(ctx, "llama")
	if err != nil {
		t.Fatal(err)
	}
	if d.State != StateActive || d.Current != 0 {
		t.Errorf("before the apply finished: state %s current %d, want active and no current version", d.State, d.Current)
	}
	if err := s.FinishVersion(ctx, Finish{Name: "llama", JobID: 101, Action: "deploy", Outcome: OutcomeReady, Message: "1/1 ready",
		Applied: true, At: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	v2 := version(102, "llama", "acme", 4, 2, t0.Add(time.Hour))
	if err := s.StartVersion(ctx, v2, "deploy"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishVersion(ctx, Finish{Name: "llama", JobID: 102, Action: "deploy", Outcome: OutcomeTimeout, Message: "0/2 available",
		Applied: true, At: t0.Add(61 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = b.open(t)
	d, err = s.Deployment(ctx, "llama")
	if err != nil {
		t.Fatal(err)
	}
	wantD := Deployment{Name: "llama", Namespace: "strata-acme", Tenant: "acme", Project: "p", State: StateActive, Current: 102,
		CreatedAt: t0, UpdatedAt: t0.Add(61 * time.Minute)}
	if diff := cmp.Diff(wantD, d); diff != "" {
		t.Errorf("deployment (-want +got):\n%s", diff)
	}
	vs, err := s.Versions(ctx, "llama")
	if err != nil {
		t.Fatal(err)
	}
	f1, f2 := t0.Add(time.Minute), t0.Add(61*time.Minute)
	v1.Outcome, v1.Message, v1.FinishedAt = OutcomeReady, "1/1 ready", &f1
	v2.Outcome, v2.Message, v2.FinishedAt = OutcomeTimeout, "0/2 available", &f2
	if diff := cmp.Diff([]Version{v1, v2}, vs); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	ev, err := s.Events(ctx, "llama")
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 2 || ev[0].Outcome != OutcomeReady || ev[1].Outcome != OutcomeTimeout || ev[1].JobID != 102 {
		t.Errorf("events = %+v, want ready for 101 then timeout for 102", ev)
	}
	if _, err := s.Version(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Version(999): err = %v, want ErrNotFound", err)
	}
}

// A failed apply does not move the current version.
func TestFailedApplyKeepsCurrent(t *testing.T) { eachDB(t, testFailedApplyKeepsCurrent) }

func testFailedApplyKeepsCurrent(t *testing.T, mk func(t *testing.T) *backend) {
	ctx := t.Context()
	s := mk(t).open(t)
	for _, f := range []struct {
		job     int64
		outcome string
		applied bool
	}{{1, OutcomeReady, true}, {2, OutcomeFailed, false}} {
		if err := s.StartVersion(ctx, version(f.job, "m", "acme", 1, 1, t0.Add(time.Duration(f.job)*time.Minute)), "deploy"); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishVersion(ctx, Finish{Name: "m", JobID: f.job, Action: "deploy", Outcome: f.outcome, Applied: f.applied, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := s.Deployment(ctx, "m")
	if d.Current != 1 {
		t.Errorf("current = %d after a failed apply of job 2, want 1", d.Current)
	}
	if err := s.FinishVersion(ctx, Finish{Name: "other", JobID: 1, Outcome: OutcomeReady, At: t0}); !errors.Is(err, ErrNotFound) {
		t.Errorf("finishing job 1 under another name: err = %v, want ErrNotFound", err)
	}
}

// Who may use a name: the same tenant always; another tenant only once the
// name is deleted; one job never serves under two names.
func TestStartVersionOwnership(t *testing.T) { eachDB(t, testStartVersionOwnership) }

func testStartVersionOwnership(t *testing.T, mk func(t *testing.T) *backend) {
	tests := map[string]struct {
		deleteFirst bool
		next        Version
		wantErr     string
	}{
		"same tenant, new job":            {next: version(2, "m", "acme", 1, 1, t0), wantErr: ""},
		"same job again":                  {next: version(1, "m", "acme", 1, 1, t0), wantErr: ""},
		"other tenant, active name":       {next: version(2, "m", "globex", 1, 1, t0), wantErr: `deployment name "m" is in use by tenant acme (namespace strata-acme)`},
		"other tenant, deleted name":      {deleteFirst: true, next: version(2, "m", "globex", 1, 1, t0), wantErr: ""},
		"same job under another name":     {next: version(1, "n", "acme", 1, 1, t0), wantErr: "job 1 is already version of deployment m"},
		"same job, other name, after del": {deleteFirst: true, next: version(1, "n", "acme", 1, 1, t0), wantErr: "job 1 is already version of deployment m"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := mk(t).open(t)
			if err := s.StartVersion(ctx, version(1, "m", "acme", 1, 1, t0), "deploy"); err != nil {
				t.Fatal(err)
			}
			if tc.deleteFirst {
				if err := s.MarkDeleted(ctx, "m", "test", t0); err != nil {
					t.Fatal(err)
				}
			}
			err := s.StartVersion(ctx, tc.next, "deploy")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("StartVersion: %v", err)
				}
				d, _ := s.Deployment(ctx, tc.next.Name)
				if d.Tenant != tc.next.Tenant || d.State != StateActive {
					t.Errorf("deployment = %+v, want active for %s", d, tc.next.Tenant)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("StartVersion: err = %v, want %q", err, tc.wantErr)
			}
			var taken *NameTakenError
			if strings.Contains(tc.wantErr, "in use") && !errors.As(err, &taken) {
				t.Errorf("err %v is not a *NameTakenError", err)
			}
		})
	}
}

// Usage counts the current version of each active deployment of the
// tenant: not other tenants, not deleted deployments, not versions that
// are no longer current.
func TestUsage(t *testing.T) { eachDB(t, testUsage) }

func testUsage(t *testing.T, mk func(t *testing.T) *backend) {
	ctx := t.Context()
	s := mk(t).open(t)
	steps := []struct {
		v       Version
		applied bool
	}{
		{version(1, "a", "acme", 1, 1, t0), true},
		{version(2, "a", "acme", 2, 3, t0.Add(time.Minute)), true}, // replaces job 1 as a's current
		{version(3, "b", "acme", 4, 1, t0), true},
		{version(4, "c", "acme", 8, 1, t0), true},  // deleted below
		{version(5, "d", "acme", 8, 8, t0), false}, // never applied: no current
		{version(6, "x", "globex", 8, 1, t0), true},
	}
	for _, st := range steps {
		if err := s.StartVersion(ctx, st.v, "deploy"); err != nil {
			t.Fatal(err)
		}
		outcome := OutcomeReady
		if !st.applied {
			outcome = OutcomeFailed
		}
		if err := s.FinishVersion(ctx, Finish{Name: st.v.Name, JobID: st.v.JobID, Action: "deploy", Outcome: outcome, Applied: st.applied, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkDeleted(ctx, "c", "", t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Usage(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	want := []Usage{{Name: "a", Tenant: "acme", JobID: 2, GPUs: 2, Tier: "dedicated", MaxReplicas: 3}, {Name: "b", Tenant: "acme", JobID: 3, GPUs: 4, Tier: "dedicated", MaxReplicas: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if err := s.MarkDeleted(ctx, "nope", "", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkDeleted(nope): err = %v, want ErrNotFound", err)
	}
}

// The watcher's verdicts: attempts count up, only settled jobs are in
// the settled set, and old verdicts are pruned.
func TestSeen(t *testing.T) { eachDB(t, testSeen) }

func testSeen(t *testing.T, mk func(t *testing.T) *backend) {
	ctx := t.Context()
	s := mk(t).open(t)
	marks := []struct {
		job     int64
		outcome string
		done    bool
		at      time.Time
	}{
		{10, "error", false, t0},
		{10, "deployed", true, t0.Add(time.Minute)},
		{11, "not-requested", true, t0.Add(-48 * time.Hour)},
		{12, "error", false, t0},
	}
	for _, m := range marks {
		if _, err := s.MarkSeen(ctx, m.job, m.outcome, "", m.done, m.at); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Seen(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Seen{JobID: 10, Outcome: "deployed", Attempts: 2, Done: true, At: t0.Add(time.Minute)}, got); diff != "" {
		t.Errorf("seen job 10 (-want +got):\n%s", diff)
	}
	settled, err := s.Settled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]bool{10: true, 11: true}, settled); diff != "" {
		t.Errorf("settled (-want +got):\n%s", diff)
	}
	n, err := s.PruneSeen(ctx, t0.Add(-24*time.Hour))
	if err != nil || n != 1 {
		t.Errorf("PruneSeen = %d, %v; want job 11 pruned", n, err)
	}
	if _, err := s.Seen(ctx, 11); !errors.Is(err, ErrNotFound) {
		t.Errorf("job 11 after prune: err = %v", err)
	}
}

// Open creates the current schema, and refuses a database from a newer
// strata-bridge.
func TestOpenSchemaVersion(t *testing.T) { eachDB(t, testOpenSchemaVersion) }

func testOpenSchemaVersion(t *testing.T, mk func(t *testing.T) *backend) {
	ctx := context.Background()
	b := mk(t)
	s := b.open(t)
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != len(migrations) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES(99, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := b.reopen(t); err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		if err == nil {
			s.Close()
		}
		t.Errorf("open of a newer schema: err = %v", err)
	}
}

// A database of every earlier schema (testdata/schema-N.sql, made from
// the CREATE statements of the release that wrote it) opens, migrates to
// the current schema, and keeps its rows.
func TestOpenEarlierSchemas(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	for _, file := range sqlitetest.Schemas(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "bridge.db")
			sqlitetest.Seed(t, path, file)
			s := open(t, path)
			if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
				t.Errorf("schema version %d, %v; want %d", v, err, len(migrations))
			}
			d, err := s.Deployment(ctx, "llama")
			if err != nil {
				t.Fatal(err)
			}
			wantD := Deployment{Name: "llama", Namespace: "strata-acme", Tenant: "acme", Project: "p", State: StateActive, Current: 101,
				CreatedAt: at(1764417600000), UpdatedAt: at(1764417660000)}
			if diff := cmp.Diff(wantD, d); diff != "" {
				t.Errorf("deployment (-want +got):\n%s", diff)
			}
			v, err := s.Version(ctx, 101)
			if err != nil {
				t.Fatal(err)
			}
			fin := at(1764417660000)
			wantV := Version{JobID: 101, Name: "llama", Namespace: "strata-acme", Tenant: "acme", Project: "p", Account: "acme-p", User: "alice",
				GPUs: 2, Tier: "dedicated", MaxReplicas: 1, ModelPath: "/shared/models/llama", Spec: json.RawMessage(`{"name":"llama"}`),
				Objects: json.RawMessage(`[{"kind":"Deployment"}]`), Outcome: OutcomeReady, Message: "1/1 ready",
				CreatedAt: at(1764417600000), FinishedAt: &fin}
			if diff := cmp.Diff(wantV, v); diff != "" {
				t.Errorf("version (-want +got):\n%s", diff)
			}
			if ev, err := s.Events(ctx, "llama"); err != nil || len(ev) != 1 || ev[0].Action != "deploy" {
				t.Errorf("events: %v, %v", ev, err)
			}
			if settled, err := s.Settled(ctx); err != nil || !settled[101] {
				t.Errorf("settled: %v, %v; want job 101", settled, err)
			}
			// And the migrated database takes new rows.
			if err := s.StartVersion(ctx, version(102, "llama", "acme", 2, 1, t0), "deploy"); err != nil {
				t.Errorf("StartVersion on the migrated database: %v", err)
			}
		})
	}
}

// Every write outlasts another process's lock that lets go within the
// retries, and fails, saying so, against one that does not; reads go on
// under the lock (WAL).
func TestWritesUnderALock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "bridge.db")
	s, err := OpenOptions(ctx, path, Options{BusyTimeout: 20 * time.Millisecond,
		Retry: sqlite.Retry{Attempts: 30, Wait: 10 * time.Millisecond, MaxWait: 40 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	writes := map[string]func() error{
		"start version": func() error { return s.StartVersion(ctx, version(7, "llama", "acme", 1, 1, t0), "deploy") },
		"finish version": func() error {
			return s.FinishVersion(ctx, Finish{Name: "llama", JobID: 7, Action: "deploy", Outcome: OutcomeReady, Applied: true, At: t0})
		},
		"event": func() error {
			return s.AddEvent(ctx, Event{Name: "llama", Action: "deploy", Outcome: "refused", At: t0})
		},
		"seen":   func() error { _, err := s.MarkSeen(ctx, 7, "ready", "", true, t0); return err },
		"delete": func() error { return s.MarkDeleted(ctx, "llama", "deleted 0 objects", t0) },
		"prune":  func() error { _, err := s.PruneSeen(ctx, t0.Add(-time.Hour)); return err },
	}
	for _, name := range []string{"start version", "finish version", "event", "seen", "delete", "prune"} {
		release := sqlitetest.Lock(t, path)
		go func() {
			time.Sleep(100 * time.Millisecond)
			release()
		}()
		if err := writes[name](); err != nil {
			t.Errorf("%s under a short lock: %v", name, err)
		}
	}
	sqlitetest.Lock(t, path)
	if _, err := s.Deployment(ctx, "llama"); err != nil {
		t.Errorf("read under the lock: %v", err)
	}
	if err := writes["event"](); !sqlite.Busy(err) || !strings.Contains(err.Error(), "database locked by another process after 30 tries") {
		t.Errorf("event under a lasting lock: %v", err)
	}
}

// On SQLite the lease is always held, at generation 1, by every store of
// the file (one host, one file), and fences nothing.
func TestLeaseSQLiteAlwaysHeld(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "bridge.db")
	a, b := open(t, path), open(t, path)
	la, lb := a.NewLease("a", time.Second), b.NewLease("b", time.Second)
	a.SetLease(la)
	b.SetLease(lb)
	for _, l := range []*Lease{la, lb} {
		if ok, err := l.Acquire(ctx); !ok || err != nil || l.Generation() != 1 {
			t.Errorf("%s: Acquire %v, %v, generation %d; want held at 1", l.Holder(), ok, err, l.Generation())
		}
		if err := l.Check(ctx, 1); err != nil {
			t.Errorf("%s: Check: %v", l.Holder(), err)
		}
		if st, err := l.State(ctx); err != nil || st.Role != RoleActive || st.Database != DialectSQLite {
			t.Errorf("%s: state %+v, %v", l.Holder(), st, err)
		}
	}
	if err := b.StartVersion(ctx, version(1, "m", "acme", 1, 1, t0), "deploy"); err != nil {
		t.Errorf("write: %v", err)
	}
	if err := la.Check(ctx, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Check of no generation: %v", err)
	}
}
