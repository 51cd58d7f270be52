package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// Bridges that share a PostgreSQL database are active/standby: one
// holds the lease (internal/lease, as reclaimd's controllers hold
// theirs) and acts (polls slurmrestd, deploys, answers the API's
// writes), the others wait and take the lease over once its holder
// stops renewing it (a bridge that died, hung, or lost the database).
// Each take-over, and each re-take by a holder whose lease had run out,
// adds one to the lease's generation. Every write to the store carries
// the generation of the lease it acts under and is refused once that is
// no longer the lease's (fence), and the deployer asks Check before
// every call that changes the cluster, so a holder that lost the lease
// while it was paused neither calls the apiserver nor writes a record
// after it wakes.
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

// leaseTimesMigration moves the lease table to internal/lease's: times
// as timestamps rather than milliseconds. A lease held at the upgrade is
// kept, with the same holder, generation and expiry, so a bridge of
// this release waits for it to run out like any standby (a bridge of
// the release before, still running, cannot renew it on the new table
// and stops acting when it runs out by its own clock). On SQLite the
// table was never written (one host): it is made again as
// internal/lease's.
var leaseTimesMigration = sqlite.Migration{Name: "leases: the times as timestamps (internal/lease)",
	SQL: `DROP TABLE leases;
	` + lease.SQLiteTable,
	Postgres: `ALTER TABLE leases
		ALTER COLUMN expires_at TYPE TIMESTAMPTZ USING to_timestamp(expires_at / 1000.0),
		ALTER COLUMN acquired_at TYPE TIMESTAMPTZ USING to_timestamp(acquired_at / 1000.0);`}

// LeaseName names the bridge's lease: one per database.
const LeaseName = "strata-bridge"

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

// Lease is one bridge's claim to act: internal/lease's on PostgreSQL,
// always held at generation 1 on SQLite.
type Lease struct {
	s  *Store
	l  *lease.Lease // nil on SQLite
	ho string
	tt time.Duration
}

// NewLease is the lease as holder (a name unique to this process: host,
// pid and a random part) sees it; a lease not renewed within ttl ends.
// The holder renews it (Acquire) every ttl/3.
func (s *Store) NewLease(holder string, ttl time.Duration) *Lease {
	l := &Lease{s: s, ho: holder, tt: ttl}
	if s.db.Postgres {
		l.l = &lease.Lease{DB: s.db.DB, Name: LeaseName, Holder: holder, TTL: ttl}
	}
	return l
}

// SetLease fences every write of the store by l: on PostgreSQL a write
// is refused unless it carries l's generation (or that of its context,
// WithGeneration) and that is still the lease's. On PostgreSQL a store
// without a lease refuses every write.
func (s *Store) SetLease(l *Lease) { s.lease = l }

// Holder names this bridge in the lease.
func (l *Lease) Holder() string { return l.ho }

// TTL is how long the lease lasts unrenewed.
func (l *Lease) TTL() time.Duration { return l.tt }

// margin is the least time the lease must have left for Check to let an
// action go: a holder paused right after its check still has it.
func (l *Lease) margin() time.Duration { return l.tt / 5 }

// Acquire takes the lease when it is free or ran out, or renews it when
// this bridge holds it: true when this bridge holds it now. A failed
// renewal (the database unreachable) keeps what this bridge held until
// it runs out by its own clock.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	if l.l == nil {
		return true, nil
	}
	// One try is bounded: a renewal that waits (for a write in flight,
	// or a slow database) past a third of the lease is not one.
	ctx, cancel := context.WithTimeout(ctx, max(l.tt/3, time.Second))
	defer cancel()
	gen, err := l.l.Acquire(ctx)
	if err != nil {
		return l.Generation() != 0, err
	}
	return gen != 0, nil
}

// Generation is the generation this bridge holds, 0 when it holds none
// (or its hold ran out by its own clock).
func (l *Lease) Generation() int64 {
	if l.l == nil {
		return 1
	}
	return l.l.Generation()
}

// Check says whether an action started under gen may make its next call
// to the cluster: gen must be the generation this bridge holds, with at
// least a fifth of the lease left by its own clock and by the
// database's. A *LostError otherwise.
func (l *Lease) Check(ctx context.Context, gen int64) error {
	lost := func(why string) error { return &LostError{Holder: l.ho, Generation: gen, Why: why} }
	if gen == 0 {
		return lost("no lease held")
	}
	if l.l == nil {
		if gen != 1 {
			return lost(fmt.Sprintf("the lease is now of generation %d", 1))
		}
		return nil
	}
	if held := l.l.Generation(); held != gen {
		return lost(fmt.Sprintf("the lease is now of generation %d", held))
	}
	t := l.l.TermOf(gen)
	if err := t.ValidFor(l.margin()); err != nil {
		return lost("the lease was not renewed in time (this process was paused or the database was slow)")
	}
	switch err := t.Confirm(ctx, l.margin()); {
	case errors.Is(err, lease.ErrLost):
		return lost("the database says another bridge holds it, or it is about to run out")
	case err != nil:
		return lost("the database could not be asked: " + err.Error())
	}
	return nil
}

// Release ends this bridge's lease at once (a clean stop), so a standby
// takes it over at its next try rather than after the lease runs out.
func (l *Lease) Release(ctx context.Context) error {
	if l.l == nil {
		return nil
	}
	if err := l.l.Release(ctx); err != nil {
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
	st := LeaseState{Self: l.ho, Database: l.s.Dialect(), Role: RoleStandby}
	if g := l.Generation(); g != 0 {
		st.Role = RoleActive
	}
	if l.l == nil {
		st.Holder, st.Generation = l.ho, l.Generation()
		return st, nil
	}
	r, found, err := lease.Read(ctx, l.s.db.DB, LeaseName)
	if err != nil || !found {
		return st, err
	}
	st.Generation, st.ExpiresAt = r.Generation, r.ExpiresAt.UTC()
	if r.Live {
		st.Holder = r.Holder
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
// refuses it unless that is the lease's generation held by this bridge
// (internal/lease's Term.Check: the lease's row is read FOR SHARE, so a
// take-over waits for the write to commit, at most a third of the lease
// should this bridge be paused in the middle of it, and a write after
// the take-over sees the new generation).
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
		return 0, &LostError{Holder: l.ho, Why: "no lease held"}
	}
	switch err := l.l.TermOf(gen).Check(ctx, tx.Tx); {
	case errors.Is(err, lease.ErrLost):
		if held := l.l.Generation(); held != 0 && held != gen {
			return 0, &LostError{Holder: l.ho, Generation: gen, Why: fmt.Sprintf("the lease is now of generation %d", held)}
		}
		return 0, &LostError{Holder: l.ho, Generation: gen, Why: "another bridge holds the lease, or it ran out"}
	case err != nil:
		return 0, err
	}
	return gen, nil
}
