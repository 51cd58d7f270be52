package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// Fault is one GPU fault event an agent reported, as kept and served
// (reclaimd's API contract).
type Fault = reclaimapi.Fault

// AddFaults keeps the faults not kept yet (the same node, GPU, kind, code
// and time, to the millisecond, is the same fault: an agent's whole
// snapshot repeats what it keeps) and returns those that were new, with
// their ids.
func (s *Store) AddFaults(ctx context.Context, faults []Fault, at time.Time) ([]Fault, error) {
	if len(faults) == 0 {
		return nil, nil
	}
	var added []Fault
	err := s.write(ctx, func(tx *txx) error {
		added = nil
		for _, f := range faults {
			var id int64
			err := tx.QueryRowContext(ctx, `INSERT INTO gpu_faults(node, gpu, uuid, kind, code, at, received_at) VALUES(?,?,?,?,?,?,?)
			ON CONFLICT(node, gpu, kind, code, at) DO NOTHING RETURNING id`, f.Node, f.GPU, f.UUID, f.Kind, f.Code, f.At.UnixMilli(), at.UnixMilli()).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				continue // kept already
			}
			if err != nil {
				return fmt.Errorf("keep fault of %s GPU %d: %w", f.Node, f.GPU, err)
			}
			f.ID = id
			f.At, f.ReceivedAt = time.UnixMilli(f.At.UnixMilli()).UTC(), time.UnixMilli(at.UnixMilli()).UTC()
			added = append(added, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// FaultsBetween returns the faults of node (every node when node is "")
// that happened in [from, to), oldest first: what the failure classifier
// asks of a job's run.
func (s *Store) FaultsBetween(ctx context.Context, node string, from, to time.Time) ([]Fault, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, node, gpu, uuid, kind, code, at, received_at FROM gpu_faults
		WHERE (CAST(? AS TEXT)='' OR node=?) AND at>=? AND at<? ORDER BY at, id`, node, node, from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Fault
	for rows.Next() {
		var f Fault
		var at, received int64
		if err := rows.Scan(&f.ID, &f.Node, &f.GPU, &f.UUID, &f.Kind, &f.Code, &at, &received); err != nil {
			return nil, err
		}
		f.At, f.ReceivedAt = time.UnixMilli(at).UTC(), time.UnixMilli(received).UTC()
		out = append(out, f)
	}
	return out, rows.Err()
}

// NodeHealth is what Strata did to one node and knows of its health.
type NodeHealth struct {
	Node string `json:"node"`
	// Drained is true while the node is drained by Strata (and not yet
	// resumed, by Strata or an admin).
	Drained   bool       `json:"drained_by_strata"`
	Reason    string     `json:"reason,omitempty"`
	FaultID   int64      `json:"fault_id,omitempty"` // the fault that drained it
	DrainedAt *time.Time `json:"drained_at,omitempty"`
	ResumedAt *time.Time `json:"resumed_at,omitempty"`
	// The last health check: when it ended, whether it passed, the tail
	// of its output.
	CheckAt     *time.Time `json:"last_check_at,omitempty"`
	CheckOK     *bool      `json:"last_check_ok,omitempty"`
	CheckOutput string     `json:"last_check_output,omitempty"`
	// HeldFault is the fault whose drain the blast-radius cap held back
	// (its notice went out once); 0 when none.
	HeldFault int64 `json:"held_fault,omitempty"`
}

// NodeHealth returns what is kept of every node Strata has acted on or
// checked, by node.
func (s *Store) NodeHealth(ctx context.Context) (map[string]NodeHealth, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT node, drained, reason, fault_id, drained_at, resumed_at, check_at, check_ok, check_output, held_fault
		FROM node_health`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]NodeHealth{}
	for rows.Next() {
		var h NodeHealth
		var drainedAt, resumedAt, checkAt, checkOK sql.NullInt64
		if err := rows.Scan(&h.Node, &h.Drained, &h.Reason, &h.FaultID, &drainedAt, &resumedAt, &checkAt, &checkOK, &h.CheckOutput,
			&h.HeldFault); err != nil {
			return nil, err
		}
		h.DrainedAt, h.ResumedAt, h.CheckAt = msTime(drainedAt), msTime(resumedAt), msTime(checkAt)
		if checkOK.Valid {
			ok := checkOK.Int64 != 0
			h.CheckOK = &ok
		}
		out[h.Node] = h
	}
	return out, rows.Err()
}

// SaveNodeHealth replaces what is kept of h.Node.
func (s *Store) SaveNodeHealth(ctx context.Context, h NodeHealth) error {
	var checkOK any
	if h.CheckOK != nil {
		checkOK = b2i(*h.CheckOK)
	}
	err := s.exec(ctx, `INSERT INTO node_health(node, drained, reason, fault_id, drained_at, resumed_at, check_at, check_ok, check_output, held_fault)
		VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(node) DO UPDATE SET drained=excluded.drained, reason=excluded.reason,
		fault_id=excluded.fault_id, drained_at=excluded.drained_at, resumed_at=excluded.resumed_at, check_at=excluded.check_at,
		check_ok=excluded.check_ok, check_output=excluded.check_output, held_fault=excluded.held_fault`,
		h.Node, b2i(h.Drained), h.Reason, h.FaultID, msOf(h.DrainedAt), msOf(h.ResumedAt), msOf(h.CheckAt), checkOK, h.CheckOutput, h.HeldFault)
	if err != nil {
		return fmt.Errorf("save health of node %s: %w", h.Node, err)
	}
	return nil
}

// NodeRecords returns the drains and resumes of one node, oldest first.
func (s *Store) NodeRecords(ctx context.Context, node string) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM records WHERE node=? ORDER BY id`, node)
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

func msTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMilli(v.Int64).UTC()
	return &t
}

func msOf(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// SaveCheck keeps the result of a node's health check, and nothing else
// of the node (a check ends while a cycle may change the rest).
func (s *Store) SaveCheck(ctx context.Context, node string, at time.Time, ok bool, output string) error {
	err := s.exec(ctx, `INSERT INTO node_health(node, check_at, check_ok, check_output) VALUES(?,?,?,?)
		ON CONFLICT(node) DO UPDATE SET check_at=excluded.check_at, check_ok=excluded.check_ok, check_output=excluded.check_output`,
		node, at.UnixMilli(), b2i(ok), output)
	if err != nil {
		return fmt.Errorf("save health check of node %s: %w", node, err)
	}
	return nil
}

// exec runs one fenced write.
func (s *Store) exec(ctx context.Context, q string, args ...any) error {
	return s.write(ctx, func(tx *txx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}
