//go:build integration

package store

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/pgtest"
)

// twoBridges opens one PostgreSQL database twice, as two bridges do, each
// with its own lease of ttl.
func twoBridges(t *testing.T, ttl time.Duration) (a, b *Store, la, lb *Lease) {
	t.Helper()
	db := pgtest.New(t)
	d := Database{URL: db.URL, PasswordFile: db.PasswordFile}
	openOne := func(holder string) (*Store, *Lease) {
		s, err := OpenDatabase(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		l := s.NewLease(holder, ttl)
		s.SetLease(l)
		return s, l
	}
	a, la = openOne("bridge-a")
	b, lb = openOne("bridge-b")
	return a, b, la, lb
}

func acquire(t *testing.T, l *Lease, want bool) {
	t.Helper()
	ok, err := l.Acquire(t.Context())
	if err != nil || ok != want {
		t.Fatalf("%s Acquire = %v, %v; want %v", l.Holder(), ok, err, want)
	}
}

// TestLeaseTakeOver: one holder at a time; the holder renews; the other
// takes over only once the lease ran out, with the next generation, and
// the first cannot take it back while the second renews.
func TestLeaseTakeOver(t *testing.T) {
	ctx := t.Context()
	_, _, la, lb := twoBridges(t, 1500*time.Millisecond)
	acquire(t, la, true)
	acquire(t, lb, false)
	if la.Generation() != 1 || lb.Generation() != 0 {
		t.Fatalf("generations a=%d b=%d; want 1, 0", la.Generation(), lb.Generation())
	}
	st, err := lb.State(ctx)
	if err != nil || st.Holder != "bridge-a" || st.Role != RoleStandby || st.Generation != 1 || st.Database != DialectPostgres {
		t.Errorf("b's view: %+v, %v", st, err)
	}
	// a renews within the lease: b still cannot take it.
	for range 3 {
		time.Sleep(700 * time.Millisecond)
		acquire(t, la, true)
		acquire(t, lb, false)
	}
	// a stops renewing (it died): b takes over once the lease ran out.
	start := time.Now()
	for {
		ok, err := lb.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("b did not take over a lease a stopped renewing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("b took over after %s, before a's lease (1.5s from its last renewal) ran out", took)
	}
	if lb.Generation() != 2 {
		t.Errorf("b holds generation %d; want 2", lb.Generation())
	}
	acquire(t, la, false)
	if st, _ := la.State(ctx); st.Holder != "bridge-b" || st.Role != RoleStandby {
		t.Errorf("a's view after the take-over: %+v", st)
	}
}

// TestLeaseStaleGenerationRefused: a write of the generation that lost
// the lease is refused by the store, even once its bridge holds the
// lease again; the holder's writes carry its generation.
func TestLeaseStaleGenerationRefused(t *testing.T) {
	ctx := t.Context()
	a, b, la, lb := twoBridges(t, time.Second)
	acquire(t, la, true)
	if err := a.StartVersion(ctx, version(1, "m", "acme", 1, 1, t0), "deploy"); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	if err := b.AddEvent(ctx, Event{Name: "m", Action: "deploy", Outcome: "refused", At: t0}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the standby's write: %v; want refused (ErrLeaseLost)", err)
	}
	time.Sleep(1100 * time.Millisecond) // a paused past its lease
	acquire(t, lb, true)
	// a wakes and records the outcome of the apply it started at
	// generation 1: refused.
	stale := WithGeneration(ctx, 1)
	err := a.FinishVersion(stale, Finish{Name: "m", JobID: 1, Action: "deploy", Outcome: OutcomeReady, Applied: true, At: t0})
	var lost *LostError
	if !errors.As(err, &lost) || lost.Generation != 1 {
		t.Fatalf("a's stale write: %v; want a *LostError of generation 1", err)
	}
	if _, err := a.MarkSeen(stale, 1, OutcomeReady, "", true, t0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a's stale verdict: %v", err)
	}
	// b finishes it, at generation 2.
	if err := b.FinishVersion(ctx, Finish{Name: "m", JobID: 1, Action: "deploy", Outcome: OutcomeReady, Applied: true, At: t0}); err != nil {
		t.Fatal(err)
	}
	// b stops cleanly; a holds the lease again (generation 3), and still
	// its write of generation 1 is refused.
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	acquire(t, la, true)
	if la.Generation() != 3 {
		t.Errorf("a holds generation %d after b released; want 3", la.Generation())
	}
	if err := a.AddEvent(stale, Event{Name: "m", Action: "deploy", Outcome: "ready", At: t0}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a's write of generation 1 under generation 3: %v", err)
	}
	ev, err := a.Events(ctx, "m")
	if err != nil || len(ev) != 1 {
		t.Fatalf("events %+v, %v; want b's one", ev, err)
	}
	var gen int64
	if err := a.db.QueryRowContext(ctx, `SELECT generation FROM events WHERE name = ?`, "m").Scan(&gen); err != nil || gen != 2 {
		t.Errorf("the event's generation %d, %v; want 2 (b's)", gen, err)
	}
	if err := a.db.QueryRowContext(ctx, `SELECT generation FROM versions WHERE job_id = 1`).Scan(&gen); err != nil || gen != 2 {
		t.Errorf("the version's generation %d, %v; want 2 (b finished it)", gen, err)
	}
}

// TestLeasePausedHolderMakesNoCall: a holder paused past its lease is told
// no by Check before its next call to the cluster, by its own clock
// before it even asks the database, and by the database once the other
// bridge took over; Check also refuses when the lease has less than a
// fifth left.
func TestLeasePausedHolderMakesNoCall(t *testing.T) {
	ctx := t.Context()
	_, _, la, lb := twoBridges(t, time.Second)
	acquire(t, la, true)
	gen := la.Generation()
	if err := la.Check(ctx, gen); err != nil {
		t.Fatalf("the holder's check: %v", err)
	}
	if err := lb.Check(ctx, lb.Generation()); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the standby's check: %v", err)
	}
	time.Sleep(850 * time.Millisecond) // less than a fifth left
	if err := la.Check(ctx, gen); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("check with less than a fifth of the lease left: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // ran out: b takes over
	acquire(t, lb, true)
	if err := la.Check(ctx, gen); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("check after the take-over: %v", err)
	}
	// a's renewal fails, and its own view drops the lease.
	acquire(t, la, false)
	if err := la.Check(ctx, gen); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("check after a learnt it lost: %v", err)
	}
}

// TestLeaseCheckAsksTheDatabase: even when the holder's own clock says
// its lease is good, Check asks the database, and refuses once the
// database names another holder (as after a take-over this host has not
// seen yet).
func TestLeaseCheckAsksTheDatabase(t *testing.T) {
	ctx := t.Context()
	a, _, la, _ := twoBridges(t, 20*time.Second)
	acquire(t, la, true)
	gen := la.Generation()
	if err := la.Check(ctx, gen); err != nil {
		t.Fatalf("the holder's check: %v", err)
	}
	if _, err := a.db.ExecContext(ctx, `UPDATE leases SET holder = 'bridge-b', generation = generation + 1 WHERE name = ?`, LeaseName); err != nil {
		t.Fatal(err)
	}
	if la.Generation() != gen {
		t.Fatalf("a's own view: generation %d; want %d still", la.Generation(), gen)
	}
	err := la.Check(ctx, gen)
	var lost *LostError
	if !errors.As(err, &lost) || lost.Why != "the database says another bridge holds it, or it is about to run out" {
		t.Errorf("check against the database: %v", err)
	}
	if err := a.AddEvent(ctx, Event{Name: "m", Action: "deploy", Outcome: "ready", At: t0}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a's write: %v; want refused", err)
	}
}

// TestLeaseUpgradeFromMilliseconds: a PostgreSQL database of the schema
// before (the lease's times in milliseconds) is upgraded with its lease
// kept: a lease held at the upgrade still holds off another bridge until
// it runs out, and the next holder's generation follows the old one, so
// the rows of the old generations stay fenced off.
func TestLeaseUpgradeFromMilliseconds(t *testing.T) {
	ctx := t.Context()
	db := pgtest.New(t)
	cfg := pgsql.Config{URL: db.URL, PasswordFile: db.PasswordFile}
	old, err := pgsql.Open(ctx, cfg, App, migrations[:len(migrations)-1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `INSERT INTO leases(name, holder, generation, expires_at, acquired_at)
		VALUES ($1, 'old-bridge', 7, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + 30000, 1764417600000)`, LeaseName); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `INSERT INTO events(name, job_id, action, outcome, message, at, generation)
		VALUES ('llama', 101, 'deploy', 'ready', '1/1 ready', 1764417660000, 7)`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := OpenDatabase(ctx, Database{URL: db.URL, PasswordFile: db.PasswordFile})
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(migrations))
	}
	l := s.NewLease("new-bridge", 5*time.Second)
	s.SetLease(l)
	acquire(t, l, false)
	st, err := l.State(ctx)
	if err != nil || st.Holder != "old-bridge" || st.Generation != 7 || st.Role != RoleStandby {
		t.Errorf("the lease after the upgrade: %+v, %v; want old-bridge's, generation 7", st, err)
	}
	if left := time.Until(st.ExpiresAt); left < 20*time.Second || left > 31*time.Second {
		t.Errorf("the lease's expiry after the upgrade is %s away; want about 30s", left)
	}
	var acquired time.Time
	if err := s.db.QueryRowContext(ctx, `SELECT acquired_at FROM leases WHERE name = ?`, LeaseName).Scan(&acquired); err != nil ||
		!acquired.Equal(time.UnixMilli(1764417600000)) {
		t.Errorf("acquired_at after the upgrade: %v, %v", acquired, err)
	}
	// The old bridge's lease runs out (here: at once): the new one takes
	// it, at the next generation.
	if _, err := s.db.ExecContext(ctx, `UPDATE leases SET expires_at = clock_timestamp() WHERE name = ?`, LeaseName); err != nil {
		t.Fatal(err)
	}
	acquire(t, l, true)
	if l.Generation() != 8 {
		t.Errorf("generation after the take-over: %d; want 8", l.Generation())
	}
	if err := s.AddEvent(WithGeneration(ctx, 7), Event{Name: "llama", Action: "deploy", Outcome: "ready", At: t0}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a write of the old generation: %v; want refused", err)
	}
	if err := s.AddEvent(ctx, Event{Name: "llama", Action: "deploy", Outcome: "ready", At: t0}); err != nil {
		t.Errorf("the new holder's write: %v", err)
	}
	if ev, err := s.Events(ctx, "llama"); err != nil || len(ev) != 2 {
		t.Errorf("events: %+v, %v; want the old one and the new one", ev, err)
	}
}

// TestLeasePausedInsideAWrite: a bridge paused in the middle of a fenced
// write (its transaction open, the lease row locked FOR SHARE) holds the
// take-over back no longer than a third of the lease: the server ends
// its session, the standby takes over once the lease ran out, and the
// paused write, woken, cannot commit.
func TestLeasePausedInsideAWrite(t *testing.T) {
	ctx := t.Context()
	const ttl = 1500 * time.Millisecond
	a, _, la, lb := twoBridges(t, ttl)
	acquire(t, la, true)
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := a.fence(ctx, tx); err != nil {
		t.Fatalf("the holder's fence: %v", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events(name, job_id, action, outcome, message, at, generation) VALUES(?,?,?,?,?,?,?)`,
		"m", 1, "deploy", "ready", "", 0, 1); err != nil {
		t.Fatal(err)
	}
	// a is paused here, its transaction open.
	start := time.Now()
	for {
		ok, err := lb.Acquire(ctx)
		if err != nil {
			t.Logf("b's try: %v", err)
		}
		if ok {
			break
		}
		if time.Since(start) > 3*ttl {
			t.Fatalf("b did not take over within %s of a pausing inside a write", 3*ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("b took over %s after a paused inside a write", time.Since(start).Round(time.Millisecond))
	if err := tx.Commit(); err == nil {
		t.Error("a's write, woken after the take-over, committed")
	}
	if ev, err := a.Events(ctx, "m"); err != nil || len(ev) != 0 {
		t.Errorf("events: %+v, %v; want none", ev, err)
	}
}
