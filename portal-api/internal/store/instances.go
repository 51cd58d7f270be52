package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// Every running portal is an instance with a name of its own (host, PID
// and a random part): it writes its name on each audit record it opens,
// and beats in portal_instances while it runs. A record left open by an
// instance that stopped beating (it died, or lost the database for
// longer than InstanceTimeout) or that said it stopped is settled by any
// live portal on the database, at its start and periodically after; the
// open records of a live instance are actions under way and are left to
// it.
var instancesMigration = sqlite.Migration{Name: "portal instances", SQL: `CREATE TABLE portal_instances (
		name TEXT PRIMARY KEY,
		started_at INTEGER NOT NULL,
		beat_at INTEGER NOT NULL,
		stopped_at INTEGER
	);
	ALTER TABLE audit ADD COLUMN instance TEXT NOT NULL DEFAULT '';
	CREATE INDEX audit_open ON audit(instance) WHERE result IS NULL;`,
	Postgres: `CREATE TABLE portal_instances (
		name TEXT PRIMARY KEY,
		started_at BIGINT NOT NULL,
		beat_at BIGINT NOT NULL,
		stopped_at BIGINT
	);
	ALTER TABLE audit ADD COLUMN instance TEXT NOT NULL DEFAULT '';
	CREATE INDEX audit_open ON audit(instance) WHERE result IS NULL;`}

// InstanceBeat is how often a running portal beats; InstanceTimeout how
// long after its last beat an instance counts as stopped. Six beats: a
// database that does not answer for a minute does not make a live
// portal's actions look abandoned. Hosts' clocks must agree to within a
// fraction of it (they do where munge works: it refuses skewed
// credentials).
const (
	InstanceBeat    = 10 * time.Second
	InstanceTimeout = time.Minute
)

// ErrNoInstance is returned by Beat before Register.
var ErrNoInstance = errors.New("this portal is not registered as an instance")

// Register names this process (name unique to it) in the records it opens
// from now on, and records it as a running instance. Call it once, before
// the store is shared by goroutines.
func (s *Store) Register(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("register the portal instance: no name")
	}
	if err := s.record(ctx, name); err != nil {
		return err
	}
	s.instance = name
	return nil
}

// record writes the row of instance name, running and beaten now.
func (s *Store) record(ctx context.Context, name string) error {
	now := s.now().UnixMilli()
	if _, err := s.exec(ctx, `INSERT INTO portal_instances(name, started_at, beat_at) VALUES (?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET beat_at = excluded.beat_at, stopped_at = NULL`, name, now, now); err != nil {
		return fmt.Errorf("register the portal instance %s: %w", name, err)
	}
	return nil
}

// Instance is the name Register gave; "" before.
func (s *Store) Instance() string { return s.instance }

// Beat records that this instance still runs.
func (s *Store) Beat(ctx context.Context) error {
	if s.instance == "" {
		return ErrNoInstance
	}
	res, err := s.exec(ctx, `UPDATE portal_instances SET beat_at = ? WHERE name = ? AND stopped_at IS NULL`, s.now().UnixMilli(), s.instance)
	if err != nil {
		return fmt.Errorf("beat of the portal instance %s: %w", s.instance, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Its row was pruned or marked stopped while it could not beat:
		// take it again, so that its records are its own once more.
		return s.record(ctx, s.instance)
	}
	return nil
}

// Deregister records that this instance stopped, once it has finished
// every request: a record it left open (there should be none) is settled
// by the next live portal without waiting for InstanceTimeout.
func (s *Store) Deregister(ctx context.Context) error {
	if s.instance == "" {
		return nil
	}
	if _, err := s.exec(context.WithoutCancel(ctx), `UPDATE portal_instances SET stopped_at = ? WHERE name = ?`,
		s.now().UnixMilli(), s.instance); err != nil {
		return fmt.Errorf("deregister the portal instance %s: %w", s.instance, err)
	}
	return nil
}

// PortalInstance is one portal process as the database knows it.
type PortalInstance struct {
	Name      string
	StartedAt time.Time
	BeatAt    time.Time
	StoppedAt time.Time // zero while it runs
}

// Instances lists the instances the database knows, by name.
func (s *Store) Instances(ctx context.Context) ([]PortalInstance, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, started_at, beat_at, stopped_at FROM portal_instances ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("portal instances: %w", err)
	}
	defer rows.Close()
	var out []PortalInstance
	for rows.Next() {
		var p PortalInstance
		var started, beat int64
		var stopped *int64
		if err := rows.Scan(&p.Name, &started, &beat, &stopped); err != nil {
			return nil, fmt.Errorf("portal instances: %w", err)
		}
		p.StartedAt, p.BeatAt = time.UnixMilli(started).UTC(), time.UnixMilli(beat).UTC()
		if stopped != nil {
			p.StoppedAt = time.UnixMilli(*stopped).UTC()
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// KeepInstances is how long the row of a stopped instance is kept once
// none of its records is open.
const KeepInstances = 7 * 24 * time.Hour

// PruneInstances deletes the rows of instances stopped (or silent) for
// longer than KeepInstances that left no record open, and returns how
// many.
func (s *Store) PruneInstances(ctx context.Context) (int64, error) {
	cut := s.now().Add(-KeepInstances).UnixMilli()
	res, err := s.exec(ctx, `DELETE FROM portal_instances WHERE beat_at < ? AND (stopped_at IS NULL OR stopped_at < ?)
		AND NOT EXISTS (SELECT 1 FROM audit WHERE audit.result IS NULL AND audit.instance = portal_instances.name)`, cut, cut)
	if err != nil {
		return 0, fmt.Errorf("prune portal instances: %w", err)
	}
	return res.RowsAffected()
}
