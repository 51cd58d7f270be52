package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// Bridges that share a PostgreSQL database are active/standby: one
// holds the lease and acts (polls slurmrestd, deploys, answers the API's
// writes), the others wait and take the lease over once its holder
// stops renewing it (a bridge that died, hung, or lost the database).
// Each take-over adds one to the lease's generation. Every write to the
// store carries the generation of the lease it acts under and is refused
// once that is no longer the lease's (fence), and the deployer asks
// Check before every call that changes the cluster, so a holder that
// lost the lease while it was paused neither calls the apiserver nor
// writes a record after it wakes.
//
// On SQLite there is one bridge host and one file: the lease is always
// held, at generation 1, and fences nothing.
var leaseMigration = sqlite.Migration{Name: "lease; versions.action, versions.generation, events.generation",
	SQL: `CREATE TABLE leases (
		name        TEXT PRIMARY KEY,
		holder      TEXT NOT NULL,
		generation  INTEGER NOT NULL,
		expires_at  INTEGER NOT NULL,
		acquired_at INTEGER NOT NULL
	);
	ALTER TABLE versions ADD COLUMN action TEXT NOT NULL DEFAULT 'deploy';
	ALTER TABLE versions ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE events ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;`,
	Postgres: `CREATE TABLE leases (
		name        TEXT PRIMARY KEY,
		holder      TEXT NOT NULL,
		generation  BIGINT NOT NULL,
		expires_at  BIGINT NOT NULL,
		acquired_at BIGINT NOT NULL
	);
	ALTER TABLE versions ADD COLUMN action TEXT NOT NULL DEFAULT 'deploy';
	ALTER TABLE versions ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE events ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;`}

// LeaseName names the bridge's lease: one per database.
const LeaseName = "strata-bridge"

// nowMS is the database's clock in milliseconds: every bridge reads the
// lease's expiry against the same clock, whatever its own says.
const nowMS = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`

// LostError says an action was refused because its lease generation is
// no longer the lease's: another bridge took the lease over, or this one
// stopped renewing it.
type LostError struct {
	Holder     string // this bridge
	Generation int64  // the generation the action was started under; 0: none held
	Why        string
}

func (e *LostError) Error() string {
	if e.Generation == 0 {
		return fmt.Sprintf("this bridge (%s) does not hold the lease: it is the standby, and the active bridge acts (%s)", e.Holder, e.Why)
	}
	return fmt.Sprintf("this bridge (%s) no longer holds the lease of generation %d: %s; the action was not taken", e.Holder, e.Generation, e.Why)
}

// ErrLeaseLost is what every *LostError is (errors.Is).
var ErrLeaseLost = errors.New("lease lost")

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LostError) Is(target error) bool { return target == ErrLeaseLost }

// Lease is one bridge's claim to act.
type Lease struct {
	s      *Store
	holder string
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex
	gen   int64     // the generation held; 0 when not held
	until time.Time // by this host's clock: held at most until then
}

// NewLease is the lease as holder (a name unique to this process: host,
// pid and a random part) sees it; a lease not renewed within ttl ends.
// The holder renews it (Acquire) every ttl/3.
func (s *Store) NewLease(holder string, ttl time.Duration) *Lease {
	return &Lease{s: s, holder: holder, ttl: ttl, now: time.Now}
}

// SetLease fences every write of the store by l: on PostgreSQL a write
// is refused unless it carries l's generation (or that of its context,
// WithGeneration) and that is still the lease's. On PostgreSQL a store
// without a lease refuses every write.
func (s *Store) SetLease(l *Lease) { s.lease = l }

// Holder names this bridge in the lease.
func (l *Lease) Holder() string { return l.holder }

// TTL is how long the lease lasts unrenewed.
func (l *Lease) TTL() time.Duration { return l.ttl }

// margin is the least time the lease must have left for Check to let an
// action go: a holder paused right after its check still has it.
func (l *Lease) margin() time.Duration { return l.ttl / 5 }

// Acquire takes the lease when it is free or ran out, or renews it when
// this bridge holds it: true when this bridge holds it now. One
// statement, so two bridges that find an ended lease at once cannot both
// take it. A failed renewal (the database unreachable) keeps what this
// bridge held until it runs out by its own clock.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	if !l.s.db.Postgres {
		l.set(1, l.now().Add(100*365*24*time.Hour))
		return true, nil
	}
	start := l.now()
	// One try is bounded: a renewal that waits (for a write in flight,
	// or a slow database) past a third of the lease is not one.
	ctx, cancel := context.WithTimeout(ctx, max(l.ttl/3, time.Second))
	defer cancel()
	var gen int64
	err := l.s.db.QueryRowContext(ctx, `INSERT INTO leases(name, holder, generation, expires_at, acquired_at)
		VALUES (?, ?, 1, `+nowMS+` + ?, `+nowMS+`)
		ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
			generation = leases.generation + CASE WHEN leases.holder = excluded.holder THEN 0 ELSE 1 END,
			acquired_at = CASE WHEN leases.holder = excluded.holder THEN leases.acquired_at ELSE excluded.acquired_at END
		WHERE leases.holder = excluded.holder OR leases.expires_at <= `+nowMS+`
		RETURNING generation`, LeaseName, l.holder, l.ttl.Milliseconds()).Scan(&gen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		l.set(0, time.Time{})
		return false, nil
	case err != nil:
		return l.Generation() != 0, fmt.Errorf("lease: %w", err)
	}
	l.set(gen, start.Add(l.ttl))
	return true, nil
}

func (l *Lease) set(gen int64, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen, l.until = gen, until
}

// Generation is the generation this bridge holds, 0 when it holds none
// (or its hold ran out by its own clock).
func (l *Lease) Generation() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == 0 || !l.now().Before(l.until) {
		return 0
	}
	return l.gen
}

// Check says whether an action started under gen may make its next call
// to the cluster: gen must be the generation this bridge holds, with at
// least a fifth of the lease left by its own clock and by the
// database's. A *LostError otherwise.
func (l *Lease) Check(ctx context.Context, gen int64) error {
	lost := func(why string) error { return &LostError{Holder: l.holder, Generation: gen, Why: why} }
	l.mu.Lock()
	held, until := l.gen, l.until
	l.mu.Unlock()
	switch {
	case gen == 0:
		return lost("no lease held")
	case held != gen:
		return lost(fmt.Sprintf("the lease is now of generation %d", held))
	case l.now().Add(l.margin()).After(until):
		return lost("the lease was not renewed in time (this process was paused or the database was slow)")
	case !l.s.db.Postgres:
		return nil
	}
	var ok int
	err := l.s.db.QueryRowContext(ctx, `SELECT 1 FROM leases WHERE name = ? AND holder = ? AND generation = ? AND expires_at > `+nowMS+` + ?`,
		LeaseName, l.holder, gen, l.margin().Milliseconds()).Scan(&ok)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return lost("the database says another bridge holds it, or it is about to run out")
	case err != nil:
		return lost("the database could not be asked: " + err.Error())
	}
	return nil
}

// Release ends this bridge's lease at once (a clean stop), so a standby
// takes it over at its next try rather than after the lease runs out.
func (l *Lease) Release(ctx context.Context) error {
	gen := l.Generation()
	l.set(0, time.Time{})
	if !l.s.db.Postgres || gen == 0 {
		return nil
	}
	if _, err := l.s.db.ExecContext(ctx, `UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND generation = ?`,
		LeaseName, l.holder, gen); err != nil {
		return fmt.Errorf("release the lease: %w", err)
	}
	return nil
}

// LeaseState is the lease as the database has it.
type LeaseState struct {
	// Role is this bridge's: active (it holds the lease) or standby.
	Role       string    `json:"role"`
	Holder     string    `json:"holder,omitempty"` // "" when nobody holds it
	Self       string    `json:"self"`
	Generation int64     `json:"generation"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	Database   string    `json:"database"` // sqlite or postgres
}

// Roles of a bridge.
const (
	RoleActive  = "active"
	RoleStandby = "standby"
)

// State reads the lease.
func (l *Lease) State(ctx context.Context) (LeaseState, error) {
	st := LeaseState{Self: l.holder, Database: l.s.Dialect(), Role: RoleStandby}
	if g := l.Generation(); g != 0 {
		st.Role = RoleActive
	}
	if !l.s.db.Postgres {
		st.Holder, st.Generation = l.holder, l.Generation()
		return st, nil
	}
	var exp int64
	var live bool
	err := l.s.db.QueryRowContext(ctx, `SELECT holder, generation, expires_at, expires_at > `+nowMS+` FROM leases WHERE name = ?`, LeaseName).
		Scan(&st.Holder, &st.Generation, &exp, &live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		st.Holder = ""
		return st, nil
	case err != nil:
		return st, fmt.Errorf("read the lease: %w", err)
	}
	st.ExpiresAt = fromMS(exp)
	if !live {
		st.Holder = ""
	}
	return st, nil
}

type genKey struct{}

// WithGeneration makes the store's writes under ctx carry gen, the
// generation an action started under, rather than the lease's current
// one: an action that outlived its lease writes nothing, even once this
// bridge holds the lease again.
func WithGeneration(ctx context.Context, gen int64) context.Context {
	return context.WithValue(ctx, genKey{}, gen)
}

// GenerationOf is the generation ctx carries (WithGeneration).
func GenerationOf(ctx context.Context) (int64, bool) {
	g, ok := ctx.Value(genKey{}).(int64)
	return g, ok
}

// fence returns the generation a write carries, and on PostgreSQL
// refuses it unless that is the lease's generation held by this bridge.
// The lease's row is read FOR SHARE: a take-over waits for the write to
// commit (at most a third of the lease, should this bridge be paused in
// the middle of it), and a write after the take-over sees the new
// generation.
func (s *Store) fence(ctx context.Context, tx *txx) (int64, error) {
	l := s.lease
	gen, has := GenerationOf(ctx)
	if !has && l != nil {
		gen = l.Generation()
	}
	if !s.db.Postgres {
		return gen, nil
	}
	if l == nil {
		return 0, &LostError{Holder: "(none)", Why: "this store holds no lease: on PostgreSQL only the bridge that holds it writes"}
	}
	if gen == 0 {
		return 0, &LostError{Holder: l.holder, Why: "no lease held"}
	}
	// A bridge paused inside this transaction (SIGSTOP, a frozen VM)
	// would keep its FOR SHARE lock, and so the standby waiting, for as
	// long as it is paused: the server ends the session once it has
	// been idle in the transaction a third of the lease.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL idle_in_transaction_session_timeout = %d`,
		max(l.ttl/3, time.Millisecond).Milliseconds())); err != nil {
		return 0, err
	}
	var have int64
	err := tx.QueryRowContext(ctx, `SELECT generation FROM leases WHERE name = ? AND holder = ? FOR SHARE`, LeaseName, l.holder).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, &LostError{Holder: l.holder, Generation: gen, Why: "another bridge holds the lease"}
	case err != nil:
		return 0, err
	case have != gen:
		return 0, &LostError{Holder: l.holder, Generation: gen, Why: fmt.Sprintf("the lease is now of generation %d", have)}
	}
	return gen, nil
}
