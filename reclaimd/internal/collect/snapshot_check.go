package collect

import (
	"fmt"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
)

// checkSnapshot refuses a snapshot whose numbers no GPU gives: a
// utilisation or memory activity outside 0–100 % (a negative one would
// read as idle), negative memory, a sample period below zero or above a
// day. The node's GPUs then have no samples, so its jobs are judged
// stale, never idle.
func checkSnapshot(s *agent.Snapshot) error {
	if s.IntervalSeconds < 0 || s.IntervalSeconds > 86400 {
		return fmt.Errorf("agent snapshot: interval_seconds %g is not a sample period", s.IntervalSeconds)
	}
	for _, g := range s.GPUs {
		for i, p := range g.Samples {
			for name, v := range map[string]*float64{"util": p.Util, "mem_activity": p.MemActivity} {
				if v != nil && (*v < 0 || *v > 100) {
					return fmt.Errorf("agent snapshot: GPU %d sample %d: %s %g is not a percentage", g.Index, i, name, *v)
				}
			}
			if p.MemUsedMiB < 0 {
				return fmt.Errorf("agent snapshot: GPU %d sample %d: mem_used_mib %g is negative", g.Index, i, p.MemUsedMiB)
			}
		}
	}
	return nil
}
