//go:build integration

package lease

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/strata-hpc/strata/internal/pgtest"
)

// bedDB is a fresh database on the PostgreSQL bed with the lease table;
// each call opens another connection pool to it (another host).
func bedDB(t *testing.T) func() *sql.DB {
	t.Helper()
	d := pgtest.New(t)
	open := func() *sql.DB {
		cc, err := pgx.ParseConfig(d.URL)
		if err != nil {
			t.Fatal(err)
		}
		pw, err := os.ReadFile(d.PasswordFile)
		if err != nil {
			t.Fatal(err)
		}
		cc.Password = strings.TrimSpace(string(pw))
		db := stdlib.OpenDB(*cc)
		t.Cleanup(func() { db.Close() })
		// Connected before the test's clock matters: a first connection
		// (password exchange) takes a while on a loaded machine.
		if err := db.PingContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		return db
	}
	if _, err := open().ExecContext(t.Context(), Table); err != nil {
		t.Fatal(err)
	}
	return open
}

// fencedWrite is a write as a store makes it: fenced by t, then one row.
func fencedWrite(ctx context.Context, db *sql.DB, t Term, what string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := t.Check(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO actions(what) VALUES ($1)`, what); err != nil {
		return err
	}
	return tx.Commit()
}

func actionsTable(t *testing.T, db *sql.DB) {
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE actions (what TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

func actions(t *testing.T, db *sql.DB) []string {
	rows, err := db.QueryContext(t.Context(), `SELECT what FROM actions ORDER BY what`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestTakeOverAfterExpiry: one holder at a time; the holder renews and
// keeps its generation; another takes the lease only once it ran out,
// with the next generation; the first cannot take it back.
func TestTakeOverAfterExpiry(t *testing.T) {
	ctx := t.Context()
	open := bedDB(t)
	ttl := 2 * time.Second
	a := &Lease{DB: open(), Name: "reclaimd/test", Holder: "a", TTL: ttl}
	b := &Lease{DB: open(), Name: "reclaimd/test", Holder: "b", TTL: ttl}
	if g, err := a.Acquire(ctx); g != 1 || err != nil {
		t.Fatalf("a takes a free lease: generation %d, %v; want 1", g, err)
	}
	if g, err := b.Acquire(ctx); g != 0 || err != nil {
		t.Fatalf("b takes a held lease: generation %d, %v; want 0", g, err)
	}
	time.Sleep(ttl / 2)
	if g, err := a.Acquire(ctx); g != 1 || err != nil {
		t.Fatalf("a renews: generation %d, %v; want 1", g, err)
	}
	time.Sleep(ttl / 2) // past a's first claim, within its renewal
	if g, _ := b.Acquire(ctx); g != 0 {
		t.Fatalf("b took a lease a renewed: generation %d", g)
	}
	if !a.State().Held || a.State().Generation != 1 {
		t.Errorf("a's state %+v", a.State())
	}
	time.Sleep(ttl) // a stopped renewing
	if a.State().Held || a.Term().Valid() == nil {
		t.Errorf("a believes it holds a lease that ran out: %+v", a.State())
	}
	if g, err := b.Acquire(ctx); g != 2 || err != nil {
		t.Fatalf("b takes the lease a let run out: generation %d, %v; want 2", g, err)
	}
	if g, _ := a.Acquire(ctx); g != 0 {
		t.Errorf("a takes b's lease back: generation %d", g)
	}
	// b stops cleanly: the lease ends at once, and a takes it.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if g, err := a.Acquire(ctx); g != 3 || err != nil {
		t.Errorf("a after b released: generation %d, %v; want 3", g, err)
	}
}

// TestFencingRefusesStaleGeneration: a write fenced by a term another
// holder has since taken over is refused, and writes nothing; the new
// holder's write goes through. A take-over waits for a fenced write in
// flight to commit.
func TestFencingRefusesStaleGeneration(t *testing.T) {
	ctx := t.Context()
	open := bedDB(t)
	db := open()
	actionsTable(t, db)
	ttl := 500 * time.Millisecond
	a := &Lease{DB: open(), Name: "reclaimd/test", Holder: "a", TTL: ttl}
	// b's own claim is long: it is renewed below after the checks of a's
	// stale writes, which on a loaded machine take longer than a's TTL,
	// and a claim that ran out is taken again at a new generation.
	b := &Lease{DB: open(), Name: "reclaimd/test", Holder: "b", TTL: 30 * time.Second}
	if g, _ := a.Acquire(ctx); g != 1 {
		t.Fatal("a does not hold the lease")
	}
	ta := a.Term()
	if err := fencedWrite(ctx, db, ta, "a-1"); err != nil {
		t.Fatalf("a's write under its term: %v", err)
	}
	// A fenced write in flight (a slow one: the session is busy, not
	// idle) holds the take-over back until it commits, though the claim
	// runs out meanwhile.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.Check(ctx, tx); err != nil {
		t.Fatal(err)
	}
	type took struct {
		gen int64
		at  time.Time
	}
	tookc := make(chan took, 1)
	go func() {
		time.Sleep(ttl + 100*time.Millisecond) // the claim ran out
		g, _ := b.Acquire(ctx)
		tookc <- took{g, time.Now()}
	}()
	if _, err := tx.ExecContext(ctx, `SELECT pg_sleep($1)`, (ttl + 600*time.Millisecond).Seconds()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO actions(what) VALUES ('a-in-flight')`); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tk := <-tookc
	if tk.gen != 2 {
		t.Fatalf("b after a's write committed: generation %d; want 2", tk.gen)
	}
	if tk.at.Before(committed) {
		t.Errorf("b took the lease %v before a's fenced write in flight committed", committed.Sub(tk.at))
	}
	// The check against the database itself, without a's own clock.
	stale := Term{l: &Lease{Name: a.Name, Holder: a.Holder, TTL: time.Hour}, Gen: 1}
	stale.l.gen, stale.l.until, stale.l.wall = 1, time.Now().Add(time.Hour), time.Now().Round(0).Add(time.Hour)
	if err := fencedWrite(ctx, db, stale, "a-stale-db"); !errors.Is(err, ErrLost) {
		t.Errorf("a's write after the take-over, its clock fooled: %v; want ErrLost", err)
	}
	if err := fencedWrite(ctx, db, ta, "a-stale"); !errors.Is(err, ErrLost) {
		t.Errorf("a's write after the take-over: %v; want ErrLost", err)
	}
	// b's claim counted from when it asked, and it waited for a's write:
	// it renews, as its keeper does every TTL/3, before it writes.
	if g, _ := b.Acquire(ctx); g != 2 {
		t.Fatalf("b renews: generation %d", g)
	}
	if err := fencedWrite(ctx, db, b.Term(), "b-1"); err != nil {
		t.Errorf("b's write: %v", err)
	}
	got := actions(t, db)
	if strings.Join(got, ",") != "a-1,a-in-flight,b-1" {
		t.Errorf("actions %v; want a-1, a-in-flight, b-1", got)
	}
}

// TestPausedHolderMakesNoCall: a holder paused past its claim (as by
// SIGSTOP) that resumes where it was, about to call, makes no call and
// writes nothing, though nothing told it of the take-over.
func TestPausedHolderMakesNoCall(t *testing.T) {
	ctx := t.Context()
	open := bedDB(t)
	db := open()
	actionsTable(t, db)
	ttl := 500 * time.Millisecond
	a := &Lease{DB: open(), Name: "reclaimd/test", Holder: "a", TTL: ttl}
	b := &Lease{DB: open(), Name: "reclaimd/test", Holder: "b", TTL: ttl}
	var calls atomic.Int32
	call := func(t Term) error { // a call to slurmrestd, fenced as the controller fences it
		if err := t.Valid(); err != nil {
			return err
		}
		calls.Add(1)
		return nil
	}
	if g, _ := a.Acquire(ctx); g != 1 {
		t.Fatal("a does not hold the lease")
	}
	ta := a.Term()
	if err := call(ta); err != nil || calls.Load() != 1 {
		t.Fatalf("a's call under its term: %v", err)
	}
	time.Sleep(ttl + 50*time.Millisecond) // paused
	if g, _ := b.Acquire(ctx); g != 2 {
		t.Fatal("b did not take the lease over")
	}
	// a resumes.
	if err := call(ta); !errors.Is(err, ErrLost) || calls.Load() != 1 {
		t.Errorf("a's call after it resumed: %v, %d calls; want ErrLost and 1", err, calls.Load())
	}
	if err := fencedWrite(ctx, db, ta, "a-after-pause"); !errors.Is(err, ErrLost) {
		t.Errorf("a's write after it resumed: %v", err)
	}
	if len(actions(t, db)) != 0 {
		t.Errorf("actions %v", actions(t, db))
	}
}

// TestConfirmAndRead: the database confirms a term only while it names
// that holder and generation with at least the margin left, whatever the
// holder's own clock says; Read says who holds it.
func TestConfirmAndRead(t *testing.T) {
	ctx := t.Context()
	open := bedDB(t)
	ttl := 2 * time.Second
	a := &Lease{DB: open(), Name: "strata-bridge", Holder: "a", TTL: ttl}
	b := &Lease{DB: open(), Name: "strata-bridge", Holder: "b", TTL: ttl}
	if _, found, err := Read(ctx, a.DB, a.Name); found || err != nil {
		t.Fatalf("Read before anyone held it: found %v, %v", found, err)
	}
	if g, err := a.Acquire(ctx); g != 1 || err != nil {
		t.Fatalf("a: %d, %v", g, err)
	}
	ta := a.Term()
	if err := ta.Confirm(ctx, ttl/5); err != nil {
		t.Errorf("the holder's term: %v", err)
	}
	if err := ta.Confirm(ctx, ttl+time.Second); !errors.Is(err, ErrLost) {
		t.Errorf("a margin longer than the claim: %v", err)
	}
	if err := b.TermOf(1).Confirm(ctx, 0); !errors.Is(err, ErrLost) {
		t.Errorf("another holder's term of the same generation: %v", err)
	}
	r, found, err := Read(ctx, b.DB, b.Name)
	if err != nil || !found || r.Holder != "a" || r.Generation != 1 || !r.Live || time.Until(r.ExpiresAt) > ttl+time.Second {
		t.Errorf("b reads %+v, %v, %v", r, found, err)
	}
	// The database hands the lease on (as after a take-over this host's
	// clock has not seen yet): a's clock still says held, the database no.
	if _, err := a.DB.ExecContext(ctx, `UPDATE leases SET holder = 'b', generation = 2 WHERE name = $1`, a.Name); err != nil {
		t.Fatal(err)
	}
	if err := ta.Valid(); err != nil {
		t.Fatalf("a's own clock: %v", err)
	}
	if err := ta.Confirm(ctx, 0); !errors.Is(err, ErrLost) {
		t.Errorf("a's term after the database handed it on: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := Read(ctx, a.DB, a.Name); r.Holder != "b" || !r.Live {
		t.Errorf("a's release ended b's claim: %+v", r)
	}
}

// TestKeep: two processes keep one lease; exactly one acts at a time; the
// one that acts stops (its context ends, as in a clean stop) and the other
// acts within a TTL and a try; the one whose database goes away (a host
// cut off) stops acting when its claim runs out.
func TestKeep(t *testing.T) {
	open := bedDB(t)
	ttl := 900 * time.Millisecond
	var acting atomic.Int32
	var mu sync.Mutex
	var terms []string
	act := func(who string) func(ctx context.Context, tm Term) error {
		return func(ctx context.Context, tm Term) error {
			if n := acting.Add(1); n != 1 {
				t.Errorf("%d processes act at once", n)
			}
			mu.Lock()
			terms = append(terms, who)
			mu.Unlock()
			<-ctx.Done()
			acting.Add(-1)
			return ctx.Err()
		}
	}
	ctxA, stopA := context.WithCancel(t.Context())
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopB()
	a := &Lease{DB: open(), Name: "reclaimd/test", Holder: "a", TTL: ttl}
	dbB := open()
	b := &Lease{DB: dbB, Name: "reclaimd/test", Holder: "b", TTL: ttl}
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Keep(ctxA, act("a"), nil) })
	waitFor(t, 2*time.Second, func() bool { return a.State().Held })
	wg.Go(func() { _ = b.Keep(ctxB, act("b"), nil) })
	time.Sleep(2 * ttl)
	if b.State().Held || !a.State().Held {
		t.Fatalf("b took a lease a keeps: a %+v, b %+v", a.State(), b.State())
	}
	stopped := time.Now()
	stopA()
	waitFor(t, ttl+ttl/3+time.Second, func() bool { return b.State().Held })
	if d := time.Since(stopped); d > ttl+ttl/3+500*time.Millisecond {
		t.Errorf("b took over %v after a stopped; want within %v", d, ttl+ttl/3)
	}
	// b's host loses the database: b stops acting when its claim ends.
	_ = dbB.Close()
	waitFor(t, 2*ttl, func() bool { return acting.Load() == 0 })
	stopB()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(terms, ",") != "a,b" {
		t.Errorf("terms %v; want a, then b", terms)
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
