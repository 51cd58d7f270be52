package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// worthMigration adds what the observed worth of a reclaim rests on: each
// reclaim carried out (its GPUs and time-limit end), the runs seen on the
// GPUs it freed, and the handovers worked out from them (package worth).
var worthMigration = sqlite.Migration{Name: "reclaim worth: reclaims, runs on freed GPUs, handovers", SQL: `
CREATE TABLE reclaims (
	record_id INTEGER PRIMARY KEY,
	job_id    INTEGER NOT NULL,
	tenant    TEXT NOT NULL DEFAULT '',
	account   TEXT NOT NULL DEFAULT '',
	rule      TEXT NOT NULL DEFAULT '',
	kind      TEXT NOT NULL,
	at        INTEGER NOT NULL,
	limit_end INTEGER NOT NULL DEFAULT 0,
	gpus      TEXT NOT NULL
);
CREATE INDEX reclaims_time ON reclaims(at, record_id);
CREATE INDEX reclaims_open ON reclaims(limit_end);
CREATE TABLE freed_gpu_runs (
	job_id    INTEGER NOT NULL,
	run_start INTEGER NOT NULL,
	node      TEXT NOT NULL,
	gpu       INTEGER NOT NULL,
	tenant    TEXT NOT NULL DEFAULT '',
	account   TEXT NOT NULL DEFAULT '',
	end_at    INTEGER,
	seen_at   INTEGER NOT NULL,
	PRIMARY KEY (job_id, run_start, node, gpu)
);
CREATE INDEX freed_gpu_runs_start ON freed_gpu_runs(run_start);
CREATE TABLE handovers (
	record_id  INTEGER NOT NULL,
	job_id     INTEGER NOT NULL,
	run_start  INTEGER NOT NULL,
	node       TEXT NOT NULL,
	gpu        INTEGER NOT NULL,
	tenant     TEXT NOT NULL DEFAULT '',
	account    TEXT NOT NULL DEFAULT '',
	end_at     INTEGER,
	until_at   INTEGER NOT NULL,
	seconds    REAL NOT NULL,
	start_gain REAL NOT NULL,
	PRIMARY KEY (record_id, job_id, run_start, node, gpu)
);
`, Postgres: `
CREATE TABLE reclaims (
	record_id BIGINT PRIMARY KEY,
	job_id    BIGINT NOT NULL,
	tenant    TEXT NOT NULL DEFAULT '',
	account   TEXT NOT NULL DEFAULT '',
	rule      TEXT NOT NULL DEFAULT '',
	kind      TEXT NOT NULL,
	at        BIGINT NOT NULL,
	limit_end BIGINT NOT NULL DEFAULT 0,
	gpus      TEXT NOT NULL
);
CREATE INDEX reclaims_time ON reclaims(at, record_id);
CREATE INDEX reclaims_open ON reclaims(limit_end);
CREATE TABLE freed_gpu_runs (
	job_id    BIGINT NOT NULL,
	run_start BIGINT NOT NULL,
	node      TEXT NOT NULL,
	gpu       BIGINT NOT NULL,
	tenant    TEXT NOT NULL DEFAULT '',
	account   TEXT NOT NULL DEFAULT '',
	end_at    BIGINT,
	seen_at   BIGINT NOT NULL,
	PRIMARY KEY (job_id, run_start, node, gpu)
);
CREATE INDEX freed_gpu_runs_start ON freed_gpu_runs(run_start);
CREATE TABLE handovers (
	record_id  BIGINT NOT NULL,
	job_id     BIGINT NOT NULL,
	run_start  BIGINT NOT NULL,
	node       TEXT NOT NULL,
	gpu        BIGINT NOT NULL,
	tenant     TEXT NOT NULL DEFAULT '',
	account    TEXT NOT NULL DEFAULT '',
	end_at     BIGINT,
	until_at   BIGINT NOT NULL,
	seconds    DOUBLE PRECISION NOT NULL,
	start_gain DOUBLE PRECISION NOT NULL,
	PRIMARY KEY (record_id, job_id, run_start, node, gpu)
);
`}

// Reclaim is one reclaim carried out, as the worth of it is worked out.
type Reclaim struct {
	RecordID int64
	JobID    int64
	Tenant   string
	Account  string
	Rule     string
	Kind     string
	At       time.Time
	LimitEnd time.Time // zero: no time limit
	GPUs     []GPU
}

// FreedRun is one run seen on one GPU a reclaim freed.
type FreedRun struct {
	JobID   int64
	Start   time.Time
	GPU     GPU
	Tenant  string
	Account string
	End     time.Time // zero: running when last seen
	SeenAt  time.Time // the last cycle that saw it running
}

// Handover is one beneficiary on one freed GPU, as kept.
type Handover struct {
	RecordID int64
	reclaimapi.Handover
}

// AddReclaim keeps a reclaim carried out; a second call for the same
// record changes nothing.
func (s *Store) AddReclaim(ctx context.Context, r Reclaim) error {
	gpus, err := json.Marshal(r.GPUs)
	if err != nil {
		return err
	}
	var limit int64
	if !r.LimitEnd.IsZero() {
		limit = r.LimitEnd.UnixMilli()
	}
	err = s.exec(ctx, `INSERT INTO reclaims(record_id, job_id, tenant, account, rule, kind, at, limit_end, gpus)
		VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT(record_id) DO NOTHING`,
		r.RecordID, r.JobID, r.Tenant, r.Account, r.Rule, r.Kind, r.At.UnixMilli(), limit, string(gpus))
	if err != nil {
		return fmt.Errorf("keep reclaim of job %d (record %d): %w", r.JobID, r.RecordID, err)
	}
	return nil
}

const reclaimColumns = `record_id, job_id, tenant, account, rule, kind, at, limit_end, gpus`

func scanReclaims(rows *sql.Rows) ([]Reclaim, error) {
	defer rows.Close()
	var out []Reclaim
	for rows.Next() {
		var r Reclaim
		var at, limit int64
		var gpus string
		if err := rows.Scan(&r.RecordID, &r.JobID, &r.Tenant, &r.Account, &r.Rule, &r.Kind, &at, &limit, &gpus); err != nil {
			return nil, err
		}
		r.At = time.UnixMilli(at).UTC()
		if limit != 0 {
			r.LimitEnd = time.UnixMilli(limit).UTC()
		}
		if err := json.Unmarshal([]byte(gpus), &r.GPUs); err != nil {
			return nil, fmt.Errorf("reclaim %d: gpus: %w", r.RecordID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// OpenReclaims returns the reclaims whose time-limit end is after t: those
// whose beneficiaries may still add time. A reclaim without a limit has
// none and is never open.
func (s *Store) OpenReclaims(ctx context.Context, t time.Time) ([]Reclaim, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+reclaimColumns+` FROM reclaims WHERE limit_end > ? ORDER BY at, record_id`, t.UnixMilli())
	if err != nil {
		return nil, err
	}
	return scanReclaims(rows)
}

// SaveFreedRuns adds or updates runs seen on freed GPUs.
func (s *Store) SaveFreedRuns(ctx context.Context, runs []FreedRun) error {
	if len(runs) == 0 {
		return nil
	}
	return s.write(ctx, func(tx *txx) error {
		for _, r := range runs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO freed_gpu_runs(job_id, run_start, node, gpu, tenant, account, end_at, seen_at)
			VALUES(?,?,?,?,?,?,?,?) ON CONFLICT(job_id, run_start, node, gpu) DO UPDATE SET end_at=excluded.end_at, seen_at=excluded.seen_at`,
				r.JobID, r.Start.UnixMilli(), r.GPU.Node, r.GPU.Index, r.Tenant, r.Account, nullTime(r.End), r.SeenAt.UnixMilli()); err != nil {
				return fmt.Errorf("keep run of job %d on %s:%d: %w", r.JobID, r.GPU.Node, r.GPU.Index, err)
			}
		}
		return nil
	})
}

// FreedRuns returns the runs on freed GPUs that started at or after t.
func (s *Store) FreedRuns(ctx context.Context, t time.Time) ([]FreedRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, run_start, node, gpu, tenant, account, end_at, seen_at FROM freed_gpu_runs
		WHERE run_start >= ? ORDER BY run_start, job_id, node, gpu`, t.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FreedRun
	for rows.Next() {
		var r FreedRun
		var start, seen int64
		var end sql.NullInt64
		if err := rows.Scan(&r.JobID, &start, &r.GPU.Node, &r.GPU.Index, &r.Tenant, &r.Account, &end, &seen); err != nil {
			return nil, err
		}
		r.Start, r.SeenAt = time.UnixMilli(start).UTC(), time.UnixMilli(seen).UTC()
		if end.Valid {
			r.End = time.UnixMilli(end.Int64).UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ReplaceHandovers replaces the handovers of the given reclaims with hs in
// one transaction, and returns the GPU seconds each reclaim had before.
func (s *Store) ReplaceHandovers(ctx context.Context, records []int64, hs []Handover) (map[int64]float64, error) {
	var before map[int64]float64
	err := s.write(ctx, func(tx *txx) error {
		var err error
		before, err = replaceHandovers(ctx, tx, records, hs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return before, nil
}

func replaceHandovers(ctx context.Context, tx *txx, records []int64, hs []Handover) (map[int64]float64, error) {
	before := map[int64]float64{}
	for _, id := range records {
		var sum sql.NullFloat64
		if err := tx.QueryRowContext(ctx, `SELECT SUM(seconds) FROM handovers WHERE record_id=?`, id).Scan(&sum); err != nil {
			return nil, err
		}
		before[id] = sum.Float64
		if _, err := tx.ExecContext(ctx, `DELETE FROM handovers WHERE record_id=?`, id); err != nil {
			return nil, err
		}
	}
	for _, h := range hs {
		var end any
		if h.End != nil {
			end = h.End.UnixMilli()
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO handovers(record_id, job_id, run_start, node, gpu, tenant, account, end_at, until_at, seconds, start_gain)
			VALUES(?,?,?,?,?,?,?,?,?,?,?)`, h.RecordID, h.JobID, h.Start.UnixMilli(), h.GPU.Node, h.GPU.Index, h.Tenant, h.Account, end,
			h.CountedUntil.UnixMilli(), h.GPUSeconds, h.StartGainSeconds); err != nil {
			return nil, fmt.Errorf("keep handover of record %d to job %d: %w", h.RecordID, h.JobID, err)
		}
	}
	return before, nil
}

// Worth returns up to limit reclaims carried out at or after t, oldest
// first, each with its handovers, and their totals by tenant and rule, as
// of now (a reclaim is final once its time-limit end is before now).
func (s *Store) Worth(ctx context.Context, t time.Time, limit int, now time.Time) (reclaimapi.Worth, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+reclaimColumns+` FROM reclaims WHERE at >= ? ORDER BY at, record_id LIMIT ?`, t.UnixMilli(), limit)
	if err != nil {
		return reclaimapi.Worth{}, err
	}
	recs, err := scanReclaims(rows)
	if err != nil {
		return reclaimapi.Worth{}, err
	}
	out := reclaimapi.Worth{Reclaims: []reclaimapi.ReclaimWorth{}, Totals: []reclaimapi.WorthTotal{}}
	if len(recs) == 0 {
		return out, nil
	}
	first := recs[0].RecordID
	for _, r := range recs {
		first = min(first, r.RecordID)
	}
	by := map[int64][]reclaimapi.Handover{}
	hrows, err := s.db.QueryContext(ctx, `SELECT record_id, job_id, run_start, node, gpu, tenant, account, end_at, until_at, seconds, start_gain
		FROM handovers WHERE record_id >= ? ORDER BY record_id, node, gpu, run_start, job_id`, first)
	if err != nil {
		return out, err
	}
	defer hrows.Close()
	for hrows.Next() {
		var id, start, until int64
		var end sql.NullInt64
		var h reclaimapi.Handover
		if err := hrows.Scan(&id, &h.JobID, &start, &h.GPU.Node, &h.GPU.Index, &h.Tenant, &h.Account, &end, &until, &h.GPUSeconds, &h.StartGainSeconds); err != nil {
			return out, err
		}
		h.Start, h.CountedUntil = time.UnixMilli(start).UTC(), time.UnixMilli(until).UTC()
		if end.Valid {
			e := time.UnixMilli(end.Int64).UTC()
			h.End = &e
		}
		by[id] = append(by[id], h)
	}
	if err := hrows.Err(); err != nil {
		return out, err
	}
	totals := map[[2]string]*reclaimapi.WorthTotal{}
	for _, r := range recs {
		w := reclaimapi.ReclaimWorth{RecordID: r.RecordID, JobID: r.JobID, Tenant: r.Tenant, Account: r.Account, Rule: r.Rule, Kind: r.Kind,
			At: r.At, GPUs: r.GPUs, HandedTo: by[r.RecordID]}
		if w.GPUs == nil {
			w.GPUs = []GPU{}
		}
		if w.HandedTo == nil {
			w.HandedTo = []reclaimapi.Handover{}
		}
		if !r.LimitEnd.IsZero() {
			le := r.LimitEnd
			w.LimitEnd = &le
			w.Final = !now.Before(le)
			if le.After(r.At) {
				w.BoundGPUSeconds = float64(len(r.GPUs)) * le.Sub(r.At).Seconds()
			}
		}
		gain := map[int64]float64{}
		for _, h := range w.HandedTo {
			w.ObservedGPUSeconds += h.GPUSeconds
			gain[h.JobID] = max(gain[h.JobID], h.StartGainSeconds)
		}
		out.Reclaims = append(out.Reclaims, w)
		k := [2]string{r.Tenant, r.Rule}
		tt := totals[k]
		if tt == nil {
			tt = &reclaimapi.WorthTotal{Tenant: r.Tenant, Rule: r.Rule}
			totals[k] = tt
		}
		tt.Reclaims++
		tt.BoundGPUSeconds += w.BoundGPUSeconds
		tt.ObservedGPUSeconds += w.ObservedGPUSeconds
		tt.Beneficiaries += len(gain)
		for _, g := range gain {
			tt.StartGainSeconds += g
		}
	}
	for _, tt := range totals {
		out.Totals = append(out.Totals, *tt)
	}
	slices.SortFunc(out.Totals, func(a, b reclaimapi.WorthTotal) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Rule, b.Rule))
	})
	return out, nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}
