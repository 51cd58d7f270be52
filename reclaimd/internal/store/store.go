// Package store keeps reclaimd's state in SQLite: the state machine of
// every job it watches (as the decide package's JSON), and one record per
// decision with its evidence, written as an intent before the action runs
// and finished after, so a crash between the two is found at the next
// start and the action is finished or abandoned exactly once.
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

// Status of a record.
const (
	StatusIntent    = "intent"    // decided and about to run; a crash leaves it here
	StatusDone      = "done"      // ran, or its effect was found done after a crash
	StatusFailed    = "failed"    // ran and failed
	StatusAbandoned = "abandoned" // not run: the job changed before it could be
	StatusDryRun    = "dry-run"   // decided in dry-run mode; never runs
)

// GPU is one GPU of a job at decision time (reclaimd's API contract).
type GPU = reclaimapi.GPU

// Record is one decision about one job, as GET /v1/jobs/{id}/reclaim and
// /v1/decisions serve it (reclaimd's API contract).
type Record = reclaimapi.Record

// Store is the SQLite database.
type Store struct{ db *sql.DB }

// migrations create and upgrade the schema; entry i is version i+1. Never
// edit a released entry: append a new one, and add the schema it leaves
// behind to testdata (see TestOpenEarlierSchemas).
var migrations = []sqlite.Migration{
	// The first release created these itself and kept its version in
	// meta; IF NOT EXISTS lets its databases take this step unchanged.
	{Name: "job states and decision records", SQL: `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS job_state (
	job_id     INTEGER PRIMARY KEY,
	state      TEXT NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id     INTEGER NOT NULL,
	tenant     TEXT NOT NULL DEFAULT '',
	account    TEXT NOT NULL DEFAULT '',
	user       TEXT NOT NULL DEFAULT '',
	kind       TEXT NOT NULL,
	rule       TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL,
	evidence   TEXT NOT NULL DEFAULT 'null',
	gpus       TEXT NOT NULL DEFAULT '[]',
	status     TEXT NOT NULL,
	error      TEXT NOT NULL DEFAULT '',
	decided_at INTEGER NOT NULL,
	done_at    INTEGER
);
CREATE INDEX IF NOT EXISTS records_job ON records(job_id, id);
CREATE INDEX IF NOT EXISTS records_time ON records(decided_at, id);
CREATE INDEX IF NOT EXISTS records_status ON records(status);
`},
	// A reclaimd of the first release reads no schema_migrations and would
	// take any later schema for its own; it refuses a meta schema other
	// than 1.
	{Name: "meta: the schema is versioned by schema_migrations", SQL: `
INSERT INTO meta(key, value) VALUES('schema', 'see schema_migrations')
	ON CONFLICT(key) DO UPDATE SET value=excluded.value;
`},
	// Node health: a record names the node it drains or resumes (job_id
	// 0); the GPU faults the agents report, each kept once; and what
	// Strata did to each node.
	{Name: "node health: drains and resumes, GPU faults", SQL: `
ALTER TABLE records ADD COLUMN node TEXT NOT NULL DEFAULT '';
CREATE INDEX records_node ON records(node, id) WHERE node != '';
CREATE TABLE gpu_faults (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	node        TEXT NOT NULL,
	gpu         INTEGER NOT NULL,
	uuid        TEXT NOT NULL DEFAULT '',
	kind        TEXT NOT NULL,
	code        INTEGER NOT NULL,
	at          INTEGER NOT NULL,
	received_at INTEGER NOT NULL,
	UNIQUE(node, gpu, kind, code, at)
);
CREATE INDEX gpu_faults_time ON gpu_faults(at, id);
CREATE TABLE node_health (
	node         TEXT PRIMARY KEY,
	drained      INTEGER NOT NULL DEFAULT 0,
	reason       TEXT NOT NULL DEFAULT '',
	fault_id     INTEGER NOT NULL DEFAULT 0,
	drained_at   INTEGER,
	resumed_at   INTEGER,
	check_at     INTEGER,
	check_ok     INTEGER,
	check_output TEXT NOT NULL DEFAULT '',
	held_fault   INTEGER NOT NULL DEFAULT 0
);
`},
	recoveryMigration,
	worthMigration,
}

// Open opens (and creates or upgrades) the database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sqlite.Open(ctx, path, "reclaimd", migrations)
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Intent records a decision before it runs and returns its id. A dry-run
// decision is recorded as finished at once.
func (s *Store) Intent(ctx context.Context, r Record) (int64, error) {
	ev := r.Evidence
	if len(ev) == 0 {
		ev = json.RawMessage("null")
	}
	gpus, err := json.Marshal(r.GPUs)
	if err != nil {
		return 0, err
	}
	if r.Status == "" {
		r.Status = StatusIntent
	}
	var done any
	if r.Status != StatusIntent {
		done = r.DecidedAt.UnixMilli()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO records(job_id, node, tenant, account, user, kind, rule, reason, evidence, gpus, status, decided_at, done_at)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)`, r.JobID, r.Node, r.Tenant, r.Account, r.User, r.Kind, r.Rule, r.Reason, string(ev), string(gpus),
		r.Status, r.DecidedAt.UnixMilli(), done)
	if err != nil {
		return 0, fmt.Errorf("record intent for job %d: %w", r.JobID, err)
	}
	return res.LastInsertId()
}

// Finish sets the outcome of a record that is still an intent. It fails
// when the record was already finished, so no action is finished twice.
func (s *Store) Finish(ctx context.Context, id int64, status, errText string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE records SET status=?, error=?, done_at=? WHERE id=? AND status=?`,
		status, errText, at.UnixMilli(), id, StatusIntent)
	if err != nil {
		return fmt.Errorf("finish record %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("finish record %d: it is not an open intent", id)
	}
	return nil
}

const columns = `id, job_id, node, tenant, account, user, kind, rule, reason, evidence, gpus, status, error, decided_at, done_at`

func scan(rows *sql.Rows) ([]Record, error) {
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var ev, gpus string
		var decided int64
		var done sql.NullInt64
		if err := rows.Scan(&r.ID, &r.JobID, &r.Node, &r.Tenant, &r.Account, &r.User, &r.Kind, &r.Rule, &r.Reason, &ev, &gpus,
			&r.Status, &r.Error, &decided, &done); err != nil {
			return nil, err
		}
		r.Evidence = json.RawMessage(ev)
		if err := json.Unmarshal([]byte(gpus), &r.GPUs); err != nil {
			return nil, fmt.Errorf("record %d: gpus: %w", r.ID, err)
		}
		r.DecidedAt = time.UnixMilli(decided).UTC()
		if done.Valid {
			t := time.UnixMilli(done.Int64).UTC()
			r.DoneAt = &t
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Pending returns the intents a crash left open, oldest first.
func (s *Store) Pending(ctx context.Context) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM records WHERE status=? ORDER BY id`, StatusIntent)
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

// Job returns the records of one job, oldest first.
func (s *Store) Job(ctx context.Context, jobID int64) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM records WHERE job_id=? AND node='' ORDER BY id`, jobID)
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

// Since returns up to limit records decided at or after t, oldest first.
func (s *Store) Since(ctx context.Context, t time.Time, limit int) ([]Record, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM records WHERE decided_at>=? ORDER BY decided_at, id LIMIT ?`, t.UnixMilli(), limit)
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

// SaveStates replaces the stored state of the given jobs and removes the
// state of jobs not in keep (finished jobs), in one transaction.
func (s *Store) SaveStates(ctx context.Context, states map[int64]json.RawMessage, keep map[int64]bool, at time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for id, st := range states {
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_state(job_id, state, updated_at) VALUES(?,?,?)
			ON CONFLICT(job_id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at`, id, string(st), at.UnixMilli()); err != nil {
			return fmt.Errorf("save state of job %d: %w", id, err)
		}
	}
	if keep != nil {
		rows, err := tx.QueryContext(ctx, `SELECT job_id FROM job_state`)
		if err != nil {
			return err
		}
		var gone []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			if !keep[id] {
				gone = append(gone, id)
			}
		}
		rows.Close()
		for _, id := range gone {
			if _, err := tx.ExecContext(ctx, `DELETE FROM job_state WHERE job_id=?`, id); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// States returns every stored job state.
func (s *Store) States(ctx context.Context) (map[int64]json.RawMessage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, state FROM job_state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]json.RawMessage{}
	for rows.Next() {
		var id int64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		out[id] = json.RawMessage(st)
	}
	return out, rows.Err()
}
