package controller_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// The collectors keep the windows and read only what is new each cycle;
// two controllers over the same agents (or Prometheus) and the same
// clock, one reading that way and one reading the whole windows every
// cycle as before, decide the same, cycle after cycle: through warnings,
// signals, requeues and recoveries, an agent that restarts with an empty
// window, an agent that fails for two cycles and comes back before its cursor is
// forgotten. Twice the controller reading by increments restarts: a new
// controller and collector over its store resume the windows the last
// one kept there and go on by increments, deciding as before.
func TestIncrementalSameDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("80 cycles, half of them reading whole windows")
	}
	for _, mode := range []string{"agents", "prometheus"} {
		t.Run(mode, func(t *testing.T) {
			s := newScaleBedWith(t, 4, mode, 280*time.Minute, 40*time.Minute, time.Minute)
			var wholeColl, incrColl controller.Collector
			if mode == "agents" {
				wholeColl, incrColl = s.agentsCollector(true), s.agentsCollector(false)
			} else {
				wholeColl, incrColl = s.prometheus(true), s.prometheus(false)
				// Its whole windows (the first cycle's) in pieces of a few
				// steps, each taken in before the next.
				s.coll.(*collect.Prometheus).PieceBytes = 20 << 10
				incrColl.(*collect.Prometheus).PieceBytes = 20 << 10
			}
			whole := s.controller(wholeColl)
			var nodes []string
			for n := range s.nodes {
				nodes = append(nodes, scaleNode(n))
			}
			kinds := map[decide.Kind]int{}
			for cycle := range 80 { // 80 minutes
				switch {
				case mode != "agents":
				case cycle == 25:
					s.newAgent(3) // restarted: its window starts empty
				case cycle == 35:
					s.setDown(2, true)
				case cycle == 37:
					s.setDown(2, false)
				}
				var restarted *bytes.Buffer
				if cycle == 30 || cycle == 61 {
					restarted = s.restart(t, mode)
				}
				s.advance()
				got, err1 := s.ctl.Cycle(t.Context())
				if restarted != nil {
					// Every node resumed from the store, none read whole.
					if want := fmt.Sprintf("nodes=%d kept=%d", s.nodes, s.nodes); !strings.Contains(restarted.String(), want) {
						t.Fatalf("cycle %d: the restarted controller did not resume every node (%s):\n%s", cycle, want, restarted)
					}
				}
				want, err2 := whole.Cycle(t.Context())
				if (err1 == nil) != (err2 == nil) {
					t.Fatalf("cycle %d: errors %v and %v", cycle, err1, err2)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("cycle %d: decision (-whole windows +increments):\n%s", cycle, diff)
				}
				for _, a := range got.Actions {
					kinds[a.Kind]++
				}
				// What the collectors give, beyond what decides: the same
				// samples, failures and interval, whole or by increments
				// (every fourth cycle: a difference in what is kept lasts).
				if cycle%4 != 3 {
					continue
				}
				r1, err1 := incrColl.Collect(t.Context(), nodes)
				r2, err2 := wholeColl.Collect(t.Context(), nodes)
				if (err1 == nil) != (err2 == nil) {
					t.Fatalf("cycle %d: collect errors %v and %v", cycle, err1, err2)
				}
				if diff := cmp.Diff(r2, r1, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("cycle %d: collected (-whole windows +increments):\n%s", cycle, diff)
				}
			}
			t.Logf("actions: %v", kinds)
			for _, k := range []decide.Kind{decide.Warn, decide.Signal, decide.Requeue, decide.Recover} {
				if kinds[k] == 0 {
					t.Errorf("no %s in 80 minutes: the test does not exercise the ladder", k)
				}
			}
		})
	}
}

// restart replaces the bed's controller with a new one over its store
// and a new collector, after checking that the windows its collector
// would keep read back as they were; it returns the new controller's log.
func (s *scaleBed) restart(t *testing.T, mode string) *bytes.Buffer {
	t.Helper()
	fresh := func() controller.Collector {
		if mode == "agents" {
			return s.agentsCollector(false)
		}
		p := s.prometheus(false)
		p.PieceBytes = 20 << 10
		return p
	}
	old := s.coll.(collect.Resumable).Held(nil)
	if len(old) != s.nodes {
		t.Fatalf("the collector keeps %d nodes' windows, want %d", len(old), s.nodes)
	}
	probe := fresh().(collect.Resumable)
	if n := probe.Resume(old, s.clock()); n != s.nodes {
		t.Fatalf("%d nodes resumed, want %d", n, s.nodes)
	}
	if diff := cmp.Diff(old, probe.Held(nil)); diff != "" {
		t.Fatalf("the windows read back differ (-kept +read back):\n%s", diff)
	}
	// Read back an hour later, every window is older than the source's:
	// none is resumed.
	if n := fresh().(collect.Resumable).Resume(old, s.clock().Add(time.Hour)); n != 0 {
		t.Fatalf("%d nodes resumed from windows an hour old, want none", n)
	}
	var log bytes.Buffer
	s.coll = fresh()
	s.ctl = s.controllerOn(s.coll, s.store, slog.New(slog.NewTextHandler(&log, nil)))
	return &log
}
