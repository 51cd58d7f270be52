package controller_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// The collectors keep the windows and read only what is new each cycle;
// two controllers over the same agents (or Prometheus) and the same
// clock, one reading that way and one reading the whole windows every
// cycle as before, decide the same, cycle after cycle: through warnings,
// signals, requeues and recoveries, an agent that restarts with an empty
// window, an agent that fails for a few cycles and one that comes back
// before its cursor is forgotten.
func TestIncrementalSameDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("80 minutes of cycles, half of them reading whole windows")
	}
	for _, mode := range []string{"agents", "prometheus"} {
		t.Run(mode, func(t *testing.T) {
			s := newScaleBed(t, 6, mode, 280*time.Minute)
			var whole *controller.Controller
			if mode == "agents" {
				whole = s.controller(s.agentsCollector(true))
			} else {
				whole = s.controller(s.prometheus(true))
			}
			kinds := map[decide.Kind]int{}
			for cycle := range 160 { // 80 minutes
				switch {
				case mode != "agents":
				case cycle == 50:
					s.newAgent(3) // restarted: its window starts empty
				case cycle == 70:
					s.setDown(5, true)
				case cycle == 74:
					s.setDown(5, false)
				}
				s.advance()
				got, err1 := s.ctl.Cycle(t.Context())
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
