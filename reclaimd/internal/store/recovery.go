package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// recoveryMigration adds what recovery keeps: the runs the controller saw
// (where each ran, since a job Slurm requeued shows no nodes), and one
// failure per ended run, classified once (UNIQUE), with its evidence, the
// decision, and the record of the retry or hold it led to.
var recoveryMigration = sqlite.Migration{Name: "recovery: runs and failures", SQL: `
CREATE TABLE recovery_runs (
	job_id     INTEGER NOT NULL,
	start      INTEGER NOT NULL,
	restarts   INTEGER NOT NULL,
	nodes      TEXT NOT NULL,
	gpus       TEXT NOT NULL,
	seen_at    INTEGER NOT NULL,
	PRIMARY KEY (job_id, start)
);
CREATE TABLE failures (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id        INTEGER NOT NULL,
	start         INTEGER NOT NULL,
	tenant        TEXT NOT NULL DEFAULT '',
	account       TEXT NOT NULL DEFAULT '',
	user          TEXT NOT NULL DEFAULT '',
	class         TEXT NOT NULL,
	evidence      TEXT NOT NULL,
	decision      TEXT NOT NULL,
	action        TEXT NOT NULL,
	reason        TEXT NOT NULL,
	record_id     INTEGER,
	failed_at     INTEGER NOT NULL,
	classified_at INTEGER NOT NULL,
	running_again INTEGER,
	UNIQUE (job_id, start)
);
CREATE INDEX failures_time ON failures(classified_at, id);
CREATE INDEX failures_open ON failures(running_again) WHERE running_again IS NULL;
`}

// Run is a job's run as the controller saw it running.
type Run struct {
	JobID    int64     `json:"job_id"`
	Start    time.Time `json:"start"`
	Restarts int       `json:"restarts"`
	Nodes    []string  `json:"nodes"`
	GPUs     []GPU     `json:"gpus"`
}

// Failure is one classified ended run, as GET /v1/failures serves it
// (reclaimd's API contract).
type Failure = reclaimapi.Failure

// SaveRuns records runs seen running (the same run again: nothing), in
// one transaction, and marks the failures they end (the job's failures
// of earlier runs that led to a retry or hold) as over at `at`; it
// returns those.
func (s *Store) SaveRuns(ctx context.Context, runs []Run, at time.Time) ([]Failure, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var again []Failure
	for _, r := range runs {
		nodes, _ := json.Marshal(r.Nodes)
		gpus, _ := json.Marshal(r.GPUs)
		if _, err := tx.ExecContext(ctx, `INSERT INTO recovery_runs(job_id, start, restarts, nodes, gpus, seen_at) VALUES(?,?,?,?,?,?)
			ON CONFLICT(job_id, start) DO NOTHING`, r.JobID, r.Start.Unix(), r.Restarts, string(nodes), string(gpus), at.UnixMilli()); err != nil {
			return nil, fmt.Errorf("save run of job %d: %w", r.JobID, err)
		}
		rows, err := tx.QueryContext(ctx, `UPDATE failures SET running_again=? WHERE job_id=? AND start<? AND running_again IS NULL
			AND action IN ('retry', 'hold') RETURNING `+failureColumns, at.UnixMilli(), r.JobID, r.Start.Unix())
		if err != nil {
			return nil, err
		}
		fs, err := scanFailures(rows)
		if err != nil {
			return nil, err
		}
		again = append(again, fs...)
	}
	return again, tx.Commit()
}

// Runs returns the runs seen since t (by when they were first seen),
// the newest of each job last.
func (s *Store) Runs(ctx context.Context, since time.Time) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, start, restarts, nodes, gpus FROM recovery_runs WHERE seen_at>=? ORDER BY job_id, start`,
		since.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var start int64
		var nodes, gpus string
		if err := rows.Scan(&r.JobID, &start, &r.Restarts, &nodes, &gpus); err != nil {
			return nil, err
		}
		r.Start = time.Unix(start, 0).UTC()
		if err := json.Unmarshal([]byte(nodes), &r.Nodes); err != nil {
			return nil, fmt.Errorf("run of job %d: nodes: %w", r.JobID, err)
		}
		if err := json.Unmarshal([]byte(gpus), &r.GPUs); err != nil {
			return nil, fmt.Errorf("run of job %d: gpus: %w", r.JobID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PruneRuns removes the runs first seen before t.
func (s *Store) PruneRuns(ctx context.Context, before time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM recovery_runs WHERE seen_at<?`, before.UnixMilli())
	return err
}

// AddFailure records a classified failure; it reports false when the run
// was already classified (a failure is classified once).
func (s *Store) AddFailure(ctx context.Context, f Failure) (int64, bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO failures(job_id, start, tenant, account, user, class, evidence, decision, action, reason,
		record_id, failed_at, classified_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(job_id, start) DO NOTHING`,
		f.JobID, f.Start.Unix(), f.Tenant, f.Account, f.User, f.Class, string(orNull(f.Evidence)), string(orNull(f.Decision)), f.Action,
		f.Reason, f.RecordID, f.FailedAt.UnixMilli(), f.ClassifiedAt.UnixMilli())
	if err != nil {
		return 0, false, fmt.Errorf("record failure of job %d: %w", f.JobID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, false, nil
	}
	id, err := res.LastInsertId()
	return id, true, err
}

// SetFailureRecord links a failure to the record of its retry or hold.
func (s *Store) SetFailureRecord(ctx context.Context, id, recordID int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE failures SET record_id=? WHERE id=?`, recordID, id)
	return err
}

// Classified reports which of the given runs (job id → run start) have a
// failure recorded.
func (s *Store) Classified(ctx context.Context, jobID int64, start time.Time) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM failures WHERE job_id=? AND start=?`, jobID, start.Unix()).Scan(&n)
	return n > 0, err
}

// JobFailures returns the failures of one job, oldest first.
func (s *Store) JobFailures(ctx context.Context, jobID int64) ([]Failure, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+failureColumns+` FROM failures WHERE job_id=? ORDER BY id`, jobID)
	if err != nil {
		return nil, err
	}
	return scanFailures(rows)
}

// FailuresSince returns up to limit failures classified at or after t.
func (s *Store) FailuresSince(ctx context.Context, t time.Time, limit int) ([]Failure, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+failureColumns+` FROM failures WHERE classified_at>=? ORDER BY classified_at, id LIMIT ?`,
		t.UnixMilli(), limit)
	if err != nil {
		return nil, err
	}
	return scanFailures(rows)
}

// Record returns one record by id.
func (s *Store) Record(ctx context.Context, id int64) (Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM records WHERE id=?`, id)
	if err != nil {
		return Record{}, err
	}
	recs, err := scan(rows)
	if err != nil {
		return Record{}, err
	}
	if len(recs) == 0 {
		return Record{}, fmt.Errorf("record %d: %w", id, sql.ErrNoRows)
	}
	return recs[0], nil
}

const failureColumns = `id, job_id, start, tenant, account, user, class, evidence, decision, action, reason, record_id, failed_at, classified_at,
	running_again`

func scanFailures(rows *sql.Rows) ([]Failure, error) {
	defer rows.Close()
	var out []Failure
	for rows.Next() {
		var f Failure
		var start, failed, classified int64
		var ev, dec string
		var rec, again sql.NullInt64
		if err := rows.Scan(&f.ID, &f.JobID, &start, &f.Tenant, &f.Account, &f.User, &f.Class, &ev, &dec, &f.Action, &f.Reason,
			&rec, &failed, &classified, &again); err != nil {
			return nil, err
		}
		f.Start, f.FailedAt, f.ClassifiedAt = time.Unix(start, 0).UTC(), time.UnixMilli(failed).UTC(), time.UnixMilli(classified).UTC()
		f.Evidence, f.Decision = json.RawMessage(ev), json.RawMessage(dec)
		if rec.Valid {
			f.RecordID = &rec.Int64
		}
		if again.Valid {
			t := time.UnixMilli(again.Int64).UTC()
			f.RunningAgain = &t
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
