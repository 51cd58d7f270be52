package store

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// upcomingMigration keeps each job's next step, as the acting controller's
// last cycle saw it, for a standby's API: the only part of GET
// /v1/jobs/{id}/reclaim a standby cannot read from the records.
var upcomingMigration = sqlite.Migration{Name: "upcoming: each job's next step for a standby's API", SQL: `
CREATE TABLE job_upcoming (
	job_id INTEGER PRIMARY KEY,
	action TEXT NOT NULL,
	at     INTEGER NOT NULL
);
`, Postgres: `
CREATE TABLE job_upcoming (
	job_id BIGINT PRIMARY KEY,
	action TEXT NOT NULL,
	at     BIGINT NOT NULL
);
`}

// SaveUpcoming writes the steps that changed (set) and removes those of
// the jobs in gone, in one transaction; with all, set is every step and
// what else is kept goes (a controller's first save: the steps another
// left).
func (s *Store) SaveUpcoming(ctx context.Context, set map[int64]reclaimapi.Upcoming, gone []int64, all bool) error {
	if len(set) == 0 && len(gone) == 0 && !all {
		return nil
	}
	return s.write(ctx, func(tx *txx) error {
		if all {
			if _, err := tx.ExecContext(ctx, `DELETE FROM job_upcoming`); err != nil {
				return err
			}
		}
		for id, u := range set {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_upcoming(job_id, action, at) VALUES(?,?,?)
				ON CONFLICT(job_id) DO UPDATE SET action=excluded.action, at=excluded.at`, id, u.Action, u.At.UnixMilli()); err != nil {
				return fmt.Errorf("save the next step of job %d: %w", id, err)
			}
		}
		for _, id := range gone {
			if _, err := tx.ExecContext(ctx, `DELETE FROM job_upcoming WHERE job_id=?`, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// Upcoming is job's next step as last saved; ok is false when none is.
func (s *Store) Upcoming(ctx context.Context, job int64) (u reclaimapi.Upcoming, ok bool, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT action, at FROM job_upcoming WHERE job_id=?`, job)
	if err != nil {
		return u, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return u, false, rows.Err()
	}
	var at int64
	if err := rows.Scan(&u.Action, &at); err != nil {
		return u, false, err
	}
	u.At = time.UnixMilli(at).UTC()
	return u, true, rows.Err()
}
