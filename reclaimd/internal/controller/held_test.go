package controller_test

import (
	"strings"
	"testing"
	"time"
)

// TestHeldRowsAcrossARestart: the first save of a start writes every
// node's row (a tenth of the nodes in each transaction); a restart that
// resumed every node drops the rows another configuration left and its
// first save is then a cycle's, not every node at once.
func TestHeldRowsAcrossARestart(t *testing.T) {
	for _, mode := range []string{"agents", "prometheus"} {
		t.Run(mode, func(t *testing.T) {
			s := newScaleBedWith(t, 20, mode, 20*time.Minute, 10*time.Minute, time.Minute)
			ctx := t.Context()
			db := s.store.DB()
			// savedAt gives each node's row's save time (ms), and counts
			// the rows of another kind.
			savedAt := func() (map[string]int64, int) {
				t.Helper()
				rows, err := db.QueryContext(ctx, `SELECT node, kind, saved_at FROM held_windows`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				out, other := map[string]int64{}, 0
				for rows.Next() {
					var node, kind string
					var at int64
					if err := rows.Scan(&node, &kind, &at); err != nil {
						t.Fatal(err)
					}
					if !strings.HasPrefix(kind, mode+"/") {
						other++
						continue
					}
					out[node] = at
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return out, other
			}
			s.advance()
			if _, err := s.ctl.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
			first, _ := savedAt()
			t1 := s.clock().UnixMilli()
			if len(first) != s.nodes {
				t.Fatalf("%d rows after the first cycle, want one for each of %d nodes", len(first), s.nodes)
			}
			for n, at := range first {
				if at != t1 {
					t.Errorf("node %s's row saved at %d, want the first cycle's %d", n, at, t1)
				}
			}
			// A row another configuration left (another source's kind).
			if _, err := db.ExecContext(ctx, `INSERT INTO held_windows(node, kind, state, saved_at) VALUES('gpu-9999', 'other/v1', x'00', 1)`); err != nil {
				t.Fatal(err)
			}
			log := s.restart(t, mode)
			s.advance()
			if _, err := s.ctl.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), "nodes=20 kept=20") {
				t.Fatalf("the restart did not resume every node:\n%s", log)
			}
			after, other := savedAt()
			if other != 0 {
				t.Errorf("%d rows of another kind after a restart that resumed, want none", other)
			}
			if len(after) != s.nodes {
				t.Fatalf("%d rows after the restart's first cycle, want %d", len(after), s.nodes)
			}
			t2, written := s.clock().UnixMilli(), 0
			for n, at := range after {
				switch at {
				case t2:
					written++
				case t1:
				default:
					t.Errorf("node %s's row saved at %d, want %d or %d", n, at, t1, t2)
				}
			}
			if written == s.nodes {
				t.Errorf("the restart's first save wrote every node's row again; want a cycle's share (a tenth of the nodes)")
			}
			// Ten cycles on, every row has been written again.
			for range 10 {
				s.advance()
				if _, err := s.ctl.Cycle(ctx); err != nil {
					t.Fatal(err)
				}
			}
			last, _ := savedAt()
			for n, at := range last {
				if at <= t1 {
					t.Errorf("node %s's row not written again in 10 cycles after the restart (saved at %d)", n, at)
				}
			}
		})
	}
}
