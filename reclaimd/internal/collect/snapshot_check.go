package collect

import "fmt"

// checkSnapshot refuses a snapshot whose numbers no GPU gives: a
// utilisation or memory activity outside 0–100 % (a negative one would
// read as idle), negative memory, a sample period below zero or above a
// day. The node's GPUs then have no samples, so its jobs are judged
// stale, never idle.
func checkSnapshot(s *snapshot) error {
	if s.IntervalSeconds < 0 || s.IntervalSeconds > 86400 {
		return fmt.Errorf("agent snapshot: interval_seconds %g is not a sample period", s.IntervalSeconds)
	}
	for _, g := range s.GPUs {
		for i, p := range g.Samples {
			for _, v := range []struct {
				name string
				v    float64
				has  bool
			}{{"util", p.Util, p.hasUtil}, {"mem_activity", p.MemActivity, p.hasMemAct}} {
				if v.has && (v.v < 0 || v.v > 100) {
					return fmt.Errorf("agent snapshot: GPU %d sample %d: %s %g is not a percentage", g.Index, i, v.name, v.v)
				}
			}
			if p.MemUsedMiB < 0 {
				return fmt.Errorf("agent snapshot: GPU %d sample %d: mem_used_mib %g is negative", g.Index, i, p.MemUsedMiB)
			}
		}
	}
	return nil
}
