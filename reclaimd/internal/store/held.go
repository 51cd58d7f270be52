package store

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// heldMigration keeps the collector's windows, reduced, one row a node,
// so that a restarted controller resumes from them and asks its sources
// only for what is newer (collect.Resumable) instead of reading every
// node's whole window.
var heldMigration = sqlite.Migration{Name: "held windows: each node's reduced windows, for a restart", SQL: `
CREATE TABLE held_windows (
	node     TEXT PRIMARY KEY,
	kind     TEXT NOT NULL,
	state    BLOB NOT NULL,
	saved_at INTEGER NOT NULL
);
`, Postgres: `
CREATE TABLE held_windows (
	node     TEXT PRIMARY KEY,
	kind     TEXT NOT NULL,
	state    BYTEA NOT NULL,
	saved_at BIGINT NOT NULL
);
`}

// SaveHeld writes the nodes' states (set) under kind and removes those of
// the nodes in gone, in one transaction; with all, every other row goes
// (a controller's first save: what another release, source or rule set
// left).
func (s *Store) SaveHeld(ctx context.Context, kind string, set map[string][]byte, gone []string, all bool, at time.Time) error {
	if len(set) == 0 && len(gone) == 0 && !all {
		return nil
	}
	return s.write(ctx, func(tx *txx) error {
		if all {
			if _, err := tx.ExecContext(ctx, `DELETE FROM held_windows`); err != nil {
				return err
			}
		}
		for node, b := range set {
			if _, err := tx.ExecContext(ctx, `INSERT INTO held_windows(node, kind, state, saved_at) VALUES(?,?,?,?)
				ON CONFLICT(node) DO UPDATE SET kind=excluded.kind, state=excluded.state, saved_at=excluded.saved_at`,
				node, kind, b, at.UnixMilli()); err != nil {
				return fmt.Errorf("save the windows of node %s: %w", node, err)
			}
		}
		for _, node := range gone {
			if _, err := tx.ExecContext(ctx, `DELETE FROM held_windows WHERE node=?`, node); err != nil {
				return err
			}
		}
		return nil
	})
}

// Held returns the nodes' states saved under kind; rows of another kind
// are left out.
func (s *Store) Held(ctx context.Context, kind string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.EachHeld(ctx, kind, func(node string, state []byte) error {
		out[node] = state
		return nil
	})
	return out, err
}

// EachHeld calls fn with each node's state saved under kind, one row at a
// time, so that a restart never holds every node's bytes at once; an
// error of fn ends the read and is returned.
func (s *Store) EachHeld(ctx context.Context, kind string, fn func(node string, state []byte) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT node, state FROM held_windows WHERE kind=?`, kind)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var node string
		var b []byte
		if err := rows.Scan(&node, &b); err != nil {
			return err
		}
		if err := fn(node, b); err != nil {
			return err
		}
	}
	return rows.Err()
}

// DropHeldOtherThan removes the states saved under any kind but kind:
// what another release, source or rule set left, once a restart resumed
// from those of kind (a first save that writes every node drops them
// too).
func (s *Store) DropHeldOtherThan(ctx context.Context, kind string) error {
	return s.write(ctx, func(tx *txx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM held_windows WHERE kind <> ?`, kind)
		return err
	})
}
