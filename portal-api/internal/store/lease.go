package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// Portals that share a PostgreSQL database poll each cluster once between
// them: the portal that holds a cluster's poll lease reads slurmrestd and
// writes what it read (the snapshot) beside the lease; the others read
// that. A lease ends when its holder stops renewing it (a portal that
// died or lost the database), and another portal takes it over.
var pollLeaseMigration = sqlite.Migration{Name: "poll leases", SQL: `CREATE TABLE poll_leases (
		cluster TEXT PRIMARY KEY,
		holder TEXT NOT NULL,
		expires_at INTEGER NOT NULL,
		generation INTEGER NOT NULL DEFAULT 1,
		snapshot BLOB,
		snapshot_at INTEGER
	);`,
	Postgres: `CREATE TABLE poll_leases (
		cluster TEXT PRIMARY KEY,
		holder TEXT NOT NULL,
		expires_at BIGINT NOT NULL,
		generation BIGINT NOT NULL DEFAULT 1,
		snapshot BYTEA,
		snapshot_at BIGINT
	);`}

// PollLease is one portal's claim to poll one cluster.
type PollLease struct {
	s       *Store
	cluster string
	holder  string
	ttl     time.Duration
}

// PollLease is the lease of cluster as holder (a name unique to this
// portal process) sees it; a lease not renewed within ttl ends.
func (s *Store) PollLease(cluster, holder string, ttl time.Duration) *PollLease {
	return &PollLease{s: s, cluster: cluster, holder: holder, ttl: ttl}
}

// Acquire takes the lease, or renews it when this holder has it: true
// when this holder may poll until ttl from now. It is one statement, so
// two portals that find an ended lease at once cannot both take it.
func (l *PollLease) Acquire(ctx context.Context) (bool, error) {
	now := l.s.now()
	var holder string
	err := l.s.retry.Do(ctx, func() error {
		return l.s.db.QueryRowContext(ctx, `INSERT INTO poll_leases(cluster, holder, expires_at) VALUES (?, ?, ?)
			ON CONFLICT(cluster) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
				generation = poll_leases.generation + CASE WHEN poll_leases.holder = excluded.holder THEN 0 ELSE 1 END
			WHERE poll_leases.holder = excluded.holder OR poll_leases.expires_at <= ?
			RETURNING holder`, l.cluster, l.holder, now.Add(l.ttl).UnixMilli(), now.UnixMilli()).Scan(&holder)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("poll lease of %s: %w", l.cluster, err)
	}
	return holder == l.holder, nil
}

// Publish keeps the snapshot the holder read; a portal that lost the
// lease meanwhile writes nothing (false).
func (l *PollLease) Publish(ctx context.Context, snapshot []byte, at time.Time) (bool, error) {
	res, err := l.s.exec(ctx, `UPDATE poll_leases SET snapshot = ?, snapshot_at = ? WHERE cluster = ? AND holder = ?`,
		snapshot, at.UnixMilli(), l.cluster, l.holder)
	if err != nil {
		return false, fmt.Errorf("publish the snapshot of %s: %w", l.cluster, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Latest is the last snapshot the holder of the lease published and when
// it was read; nil when there is none yet.
func (l *PollLease) Latest(ctx context.Context) ([]byte, time.Time, error) {
	var data []byte
	var at sql.NullInt64
	err := l.s.db.QueryRowContext(ctx, `SELECT snapshot, snapshot_at FROM poll_leases WHERE cluster = ?`, l.cluster).Scan(&data, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("the snapshot of %s: %w", l.cluster, err)
	}
	if !at.Valid {
		return nil, time.Time{}, nil
	}
	return data, time.UnixMilli(at.Int64).UTC(), nil
}

// Holder is the portal that holds the lease now ("" when none does).
func (l *PollLease) Holder(ctx context.Context) (string, error) {
	var holder string
	var exp int64
	err := l.s.db.QueryRowContext(ctx, `SELECT holder, expires_at FROM poll_leases WHERE cluster = ?`, l.cluster).Scan(&holder, &exp)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && exp <= l.s.now().UnixMilli()) {
		return "", nil
	}
	return holder, err
}
