// Package lease lets one of several processes act for a thing (a cluster)
// at a time: a row in a PostgreSQL table (Table) names the holder, when
// its claim ends by the database's clock, and a generation that grows by
// one each time the claim passes to another holder, or to the same holder
// after it had lapsed.
//
// A holder renews its claim well before it ends (Keep: every TTL/3); a
// holder that stops renewing (dead, cut off from the database, paused)
// loses it TTL after its last renewal, and another takes it over. Two
// checks fence a holder that lost its claim without knowing it:
//
//   - Term.Valid, before every call with an effect outside the database:
//     the claim of the term's generation is believed held only until TTL
//     after the start of the renewal that gave it, by this host's clock
//     (monotonic and wall clock both, the earlier wins), which ends
//     before the database's record of it does.
//   - Term.Check, inside every write transaction: the row must still name
//     this holder, this generation and an end in the future; it is read
//     FOR SHARE, so a take-over waits for the write to commit, and a
//     write after the take-over is refused with ErrLost.
//
// A single-host database (SQLite) has no other holder: Always is a term
// that is always held.
package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Table is the lease table, PostgreSQL's text, for a daemon's migrations.
const Table = `CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	generation  BIGINT NOT NULL,
	acquired_at TIMESTAMPTZ NOT NULL,
	expires_at  TIMESTAMPTZ NOT NULL
);`

// SQLiteTable is the same table in SQLite's dialect: never used (a SQLite
// database has one host), kept so that both databases at one schema
// version have the same tables.
const SQLiteTable = `CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	generation  INTEGER NOT NULL,
	acquired_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
);`

// DefaultTTL is how long a claim lasts without renewal: a standby takes
// over at most this long (plus one try of its own, TTL/3) after the
// holder's last renewal.
const DefaultTTL = 15 * time.Second

// ErrLost is returned by a fenced write or check whose term has ended.
var ErrLost = errors.New("the lease was lost: another controller holds it")

// Lease is one process's claim on one name.
type Lease struct {
	DB     *sql.DB // PostgreSQL
	Name   string  // what is held: "reclaimd/cluster-a"
	Holder string  // unique to this process: host, pid and a random part
	TTL    time.Duration
	Log    *slog.Logger
	// now is time.Now, replaced in tests.
	now func() time.Time

	mu    sync.Mutex
	gen   int64
	until time.Time // monotonic and wall clock
	wall  time.Time // until without its monotonic reading
}

func (l *Lease) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

func (l *Lease) ttl() time.Duration {
	if l.TTL <= 0 {
		return DefaultTTL
	}
	return l.TTL
}

// Acquire takes the lease, or renews it when this holder has it: the
// generation held, or 0 when another holder has it. It is one statement,
// so two processes that find an ended lease at once cannot both take it.
func (l *Lease) Acquire(ctx context.Context) (int64, error) {
	start := l.clock()
	ttl := l.ttl()
	var gen int64
	err := l.DB.QueryRowContext(ctx, `INSERT INTO leases(name, holder, generation, acquired_at, expires_at)
		VALUES ($1, $2, 1, now(), now() + make_interval(secs => $3::float8 / 1000))
		ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
			generation = leases.generation + CASE WHEN leases.holder = excluded.holder AND leases.expires_at > now() THEN 0 ELSE 1 END,
			acquired_at = CASE WHEN leases.holder = excluded.holder AND leases.expires_at > now() THEN leases.acquired_at ELSE now() END
		WHERE leases.holder = excluded.holder OR leases.expires_at <= now()
		RETURNING generation`, l.Name, l.Holder, ttl.Milliseconds()).Scan(&gen)
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, sql.ErrNoRows) {
		l.gen = 0
		return 0, nil
	}
	if err != nil {
		// Not renewed: the claim runs out at the end it had.
		return 0, fmt.Errorf("lease %s: %w", l.Name, err)
	}
	l.gen, l.until, l.wall = gen, start.Add(ttl), start.Round(0).Add(ttl)
	return gen, nil
}

// Release ends the claim at once when this holder has it, so that a
// standby takes over without waiting out the TTL (a clean stop).
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	gen := l.gen
	l.gen = 0
	l.mu.Unlock()
	if gen == 0 {
		return nil
	}
	_, err := l.DB.ExecContext(ctx, `UPDATE leases SET expires_at = now() WHERE name = $1 AND holder = $2 AND generation = $3`,
		l.Name, l.Holder, gen)
	return err
}

// held is the generation held now by this host's clock, or 0.
func (l *Lease) held() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	if l.gen == 0 || !now.Before(l.until) || !now.Round(0).Before(l.wall) {
		return 0
	}
	return l.gen
}

// Generation is the generation held now, or 0.
func (l *Lease) Generation() int64 { return l.held() }

// Term is one generation of a lease, as a holder acts under it.
type Term struct {
	l   *Lease
	Gen int64
}

// Always is the term of a database only one host uses (SQLite): always held.
var Always = Term{}

// Term is the term of the generation held now (zero Gen when none).
func (l *Lease) Term() Term { return Term{l: l, Gen: l.held()} }

// Valid says whether the term is still held by this host's clock: nil,
// or ErrLost. Every call with an effect outside the database is preceded
// by it.
func (t Term) Valid() error {
	if t.l == nil {
		return nil
	}
	if t.Gen == 0 || t.l.held() != t.Gen {
		return fmt.Errorf("%w (%s, generation %d)", ErrLost, t.l.Name, t.Gen)
	}
	return nil
}

// TermOf is the term of generation gen, as an action that started under
// it carries it: it is valid only while gen is still the generation held.
func (l *Lease) TermOf(gen int64) Term { return Term{l: l, Gen: gen} }

// ValidFor is Valid with a margin: nil only while the term is held by
// this host's clock for at least margin more, so that a holder paused
// right after the check still holds it when its call lands.
func (t Term) ValidFor(margin time.Duration) error {
	if err := t.Valid(); err != nil || t.l == nil {
		return err
	}
	t.l.mu.Lock()
	until, wall := t.l.until, t.l.wall
	t.l.mu.Unlock()
	now := t.l.clock()
	if now.Add(margin).After(until) || now.Round(0).Add(margin).After(wall) {
		return fmt.Errorf("%w (%s, generation %d): less than %s of it left, not renewed in time (this process was paused or the database was slow)",
			ErrLost, t.l.Name, t.Gen, margin)
	}
	return nil
}

// Confirm asks the database whether the term is still held with at
// least margin left by the database's clock: nil; ErrLost when another
// holder has it, it ran out, or less than margin is left; another error
// when the database could not be asked. For a call outside the database
// that is to be made only while the database agrees.
func (t Term) Confirm(ctx context.Context, margin time.Duration) error {
	if t.l == nil {
		return nil
	}
	var one int
	err := t.l.DB.QueryRowContext(ctx, `SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND generation = $3
		AND expires_at > clock_timestamp() + make_interval(secs => $4::float8 / 1000)`,
		t.l.Name, t.l.Holder, t.Gen, margin.Milliseconds()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (%s, generation %d): the database says another holder has it, or it has less than %s left", ErrLost, t.l.Name, t.Gen, margin)
	}
	if err != nil {
		return fmt.Errorf("lease %s: %w", t.l.Name, err)
	}
	return nil
}

// Check fences a write transaction: nil when the database still holds the
// term, ErrLost when not. The lease row is read FOR SHARE, so a take-over
// waits until tx ends.
func (t Term) Check(ctx context.Context, tx *sql.Tx) error {
	if t.l == nil {
		return nil
	}
	if err := t.Valid(); err != nil {
		return err
	}
	// A holder paused inside the transaction (SIGSTOP, a frozen VM)
	// would hold the row FOR SHARE, and so the take-over, for as long as
	// it is paused: the server ends the session once it waits idle in
	// the transaction for a third of the TTL.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL idle_in_transaction_session_timeout = %d`, max(t.l.ttl()/3, time.Millisecond).Milliseconds())); err != nil {
		return fmt.Errorf("lease %s: %w", t.l.Name, err)
	}
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND generation = $3 AND expires_at > now() FOR SHARE`,
		t.l.Name, t.l.Holder, t.Gen).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (%s, generation %d): write refused", ErrLost, t.l.Name, t.Gen)
	}
	if err != nil {
		return fmt.Errorf("lease %s: %w", t.l.Name, err)
	}
	return nil
}

// State is what /healthz and the metrics say of a lease.
type State struct {
	Name       string `json:"name"`
	Holder     string `json:"holder"`      // this process
	Held       bool   `json:"held"`        // by this process
	Generation int64  `json:"generation"`  // held, or 0
	TTLSeconds int    `json:"ttl_seconds"` // the claim's length
}

// State is the lease as this process sees it (no database read).
func (l *Lease) State() State {
	gen := l.held()
	return State{Name: l.Name, Holder: l.Holder, Held: gen != 0, Generation: gen, TTLSeconds: int(l.ttl().Seconds())}
}

// Record is a lease's row as the database has it.
type Record struct {
	Holder     string
	Generation int64
	ExpiresAt  time.Time
	// Live: the claim has not run out by the database's clock.
	Live bool
}

// Read reads the row of the lease name: found false when nobody ever
// held it. For what a standby says of the active holder.
func Read(ctx context.Context, db *sql.DB, name string) (r Record, found bool, err error) {
	err = db.QueryRowContext(ctx, `SELECT holder, generation, expires_at, expires_at > clock_timestamp() FROM leases WHERE name = $1`, name).
		Scan(&r.Holder, &r.Generation, &r.ExpiresAt, &r.Live)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read the lease %s: %w", name, err)
	}
	return r, true, nil
}

// Keep holds the lease for as long as ctx lasts: it tries to take it
// every TTL/3 and, while it is held, runs act with a context that ends
// when the term ends (not renewed in time, or taken by another holder);
// act's term is the one to fence its calls and writes with. Once act has
// returned, Keep goes back to trying. onTry, when set, hears the
// generation held (0: none) after every try and renewal, and 0 when Keep
// returns: a watchdog's beat, a metric.
func (l *Lease) Keep(ctx context.Context, act func(ctx context.Context, t Term) error, onTry func(ctx context.Context, gen int64)) error {
	every := l.ttl() / 3
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onTry == nil {
		onTry = func(context.Context, int64) {}
	}
	defer func() {
		if err := l.Release(context.WithoutCancel(ctx)); err != nil {
			log.Warn("releasing the lease failed: the standby takes over when it ends", "lease", l.Name, "error", err)
		}
		onTry(ctx, 0)
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		actx, acancel := context.WithTimeout(ctx, every)
		gen, err := l.Acquire(actx)
		acancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("taking the lease failed", "lease", l.Name, "error", err)
		}
		onTry(ctx, gen)
		if gen != 0 {
			log.Info("lease taken: this process acts", "lease", l.Name, "generation", gen, "holder", l.Holder)
			err := l.run(ctx, gen, every, act, onTry)
			log.Info("lease term ended: this process stands by", "lease", l.Name, "generation", gen, "why", err)
			onTry(ctx, l.held())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// run runs act under the term gen, renewing it every `every`, until the
// term ends or ctx does; it returns why the term ended.
func (l *Lease) run(ctx context.Context, gen int64, every time.Duration, act func(ctx context.Context, t Term) error,
	onTry func(context.Context, int64)) error {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- act(tctx, Term{l: l, Gen: gen}) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		// The term ends on this host's clock even when renewals hang.
		l.mu.Lock()
		left := time.Until(l.until)
		l.mu.Unlock()
		expire := time.NewTimer(max(left, 0))
		select {
		case err := <-done:
			expire.Stop()
			if err == nil {
				err = errors.New("stopped")
			}
			return err
		case <-expire.C:
			cancel(ErrLost)
		case <-tick.C:
			expire.Stop()
			rctx, rcancel := context.WithTimeout(ctx, every)
			g, err := l.Acquire(rctx)
			rcancel()
			switch {
			case err != nil:
				// Kept until it runs out by this host's clock.
				onTry(ctx, l.held())
				continue
			case g != gen:
				cancel(ErrLost)
			}
			onTry(ctx, g)
		}
		if context.Cause(tctx) != nil {
			err := <-done
			if err == nil || errors.Is(err, context.Canceled) {
				err = context.Cause(tctx)
			}
			return err
		}
	}
}
