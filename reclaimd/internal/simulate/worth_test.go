package simulate

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/worth"
)

// bruteObserved recomputes, apart from package worth, the GPU-hours the
// trace's later runs ran on the GPUs each reclaim freed: minute by minute
// over each freed GPU, from the action to the reclaimed run's recorded
// end, the minute counts when a run that started at or after the action
// holds the GPU, the GPU was never free longer than gap before that run
// took it, no later reclaim on the GPU came first, and the reclaimed job
// has not come back to it. Every time in the traces it runs over is whole
// minutes, so minutes are exact.
func bruteObserved(t *testing.T, tr Trace, rep Report, gap time.Duration) (total float64, byTenant map[string]float64) {
	t.Helper()
	byTenant = map[string]float64{}
	// A reclaimed run's trace row, for its GPUs.
	gpusOf := func(id int64, start time.Time) []decide.GPUKey {
		for _, j := range tr.Jobs {
			if j.ID == id && j.Start.Equal(start) {
				return j.GPUs
			}
		}
		t.Fatalf("job %d from %s: not in the trace", id, start)
		return nil
	}
	// The end of each run as the simulation left it: at its reclaim, if
	// reclaimed; else as recorded, clipped to To.
	endOf := func(j Job) time.Time {
		for _, tl := range rep.Jobs {
			if tl.JobID == j.ID && tl.Start.Equal(j.Start) && !tl.ReclaimedAt.IsZero() {
				return tl.ReclaimedAt
			}
		}
		if j.End.After(rep.To) {
			return rep.To
		}
		return j.End
	}
	reclaimsOn := map[decide.GPUKey][]time.Time{}
	for _, tl := range rep.Jobs {
		if tl.ReclaimedAt.IsZero() {
			continue
		}
		for _, g := range gpusOf(tl.JobID, tl.Start) {
			reclaimsOn[g] = append(reclaimsOn[g], tl.ReclaimedAt)
		}
	}
	for _, tl := range rep.Jobs {
		if tl.ReclaimedAt.IsZero() {
			continue
		}
		limitEnd := tl.End
		if limitEnd.After(rep.To) {
			limitEnd = rep.To
		}
		for _, g := range gpusOf(tl.JobID, tl.Start) {
			freeFor := time.Duration(0)
			var holder *Job
			seen := map[int64]bool{}
		minutes:
			for m := tl.ReclaimedAt; m.Before(limitEnd); m = m.Add(time.Minute) {
				for _, other := range reclaimsOn[g] {
					if other.After(tl.ReclaimedAt) && !m.Before(other) {
						break minutes // a later reclaim takes the GPU's later starts
					}
				}
				holder = nil
				for i := range tr.Jobs {
					j := &tr.Jobs[i]
					if !j.Start.Before(tl.ReclaimedAt) && !m.Before(j.Start) && m.Before(endOf(*j)) && strings.Contains(gpuList(j.GPUs), ";"+g.String()+";") {
						holder = j
						break
					}
				}
				if holder == nil {
					freeFor += time.Minute
					continue
				}
				if holder.ID == tl.JobID {
					break // the reclaimed job is back on its GPU
				}
				if !seen[holder.ID] && freeFor > gap {
					break // the GPU sat unused too long: this start is not the reclaim's doing
				}
				seen[holder.ID] = true
				freeFor = 0
				total += 1.0 / 60
				byTenant[tl.Tenant] += 1.0 / 60
			}
		}
	}
	return total, byTenant
}

func gpuList(gs []decide.GPUKey) string {
	var b strings.Builder
	b.WriteString(";")
	for _, g := range gs {
		b.WriteString(g.String() + ";")
	}
	return b.String()
}

// TestObservedAgainstBruteForce: simulate's observed reclaimed GPU-hours,
// on the recorded traces of testdata and on the example trace with later
// runs on the freed GPUs, equal an independent minute-by-minute
// recomputation, in all and by tenant.
func TestObservedAgainstBruteForce(t *testing.T) {
	example := func(t *testing.T) Trace {
		tr, err := LoadTrace(filepath.Join("testdata", "example.jobs.csv"), filepath.Join("testdata", "example.samples.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, "2026-11-29T"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	g0, g1 := decide.GPUKey{Node: "gpu-001", Index: 0}, decide.GPUKey{Node: "gpu-001", Index: 1}
	tests := map[string]struct {
		trace      func(t *testing.T) Trace
		rules      string
		step       time.Duration
		wantNonNil bool // the figure must be above zero
	}{
		"example": {trace: example, rules: "example-rules.json", step: time.Minute},
		"example with later runs on the freed GPUs": {
			trace: func(t *testing.T) Trace {
				tr := example(t)
				// 1001 is requeued at 13:25 (recorded end 14:00): 2004 (another
				// tenant) takes GPU 0 two minutes later and 2005 follows it;
				// 2006 takes GPU 1 after the gap; 2007 started before the
				// action on GPU 1 (not a beneficiary).
				tr.Jobs = append(tr.Jobs,
					Job{ID: 2004, Tenant: "vision", Account: "cv", Start: at("13:27:00"), End: at("13:41:00"), GPUs: []decide.GPUKey{g0}},
					Job{ID: 2005, Tenant: "research", Account: "ml-lab", Start: at("13:44:00"), End: at("14:00:00"), GPUs: []decide.GPUKey{g0}},
					Job{ID: 2006, Tenant: "vision", Account: "cv", Start: at("13:33:00"), End: at("13:50:00"), GPUs: []decide.GPUKey{g1}},
				)
				sortJobs(tr.Jobs)
				return tr
			},
			rules: "example-rules.json", step: time.Minute, wantNonNil: true,
		},
		"alex": {
			trace: func(t *testing.T) Trace {
				tr, err := LoadClusterCockpit(filepath.Join("testdata", "alex_gpu_jobs.csv"), filepath.Join("testdata", "alex_cluster.json"), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				return tr
			},
			rules: "alex-rules.json", step: time.Minute,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := tc.trace(t)
			rep := Run(tr, loadRules(t, filepath.Join("testdata", tc.rules)), Options{Step: tc.step})
			if rep.JobsReclaimed == 0 {
				t.Fatal("no reclaims in the trace: nothing to check")
			}
			total, byTenant := bruteObserved(t, tr, rep, worth.DefaultGap)
			if math.Abs(total-rep.ReclaimedGPUHoursObserved) > 1e-9 {
				t.Errorf("observed reclaimed GPU-hours %v, brute force %v", rep.ReclaimedGPUHoursObserved, total)
			}
			for tenant, tt := range rep.ByTenant {
				if math.Abs(byTenant[tenant]-tt.ReclaimedGPUHoursObserved) > 1e-9 {
					t.Errorf("tenant %q: observed %v, brute force %v", tenant, tt.ReclaimedGPUHoursObserved, byTenant[tenant])
				}
			}
			if tc.wantNonNil && total <= 0 {
				t.Errorf("brute force finds no observed hours: the case does not test the figure")
			}
			if rep.ReclaimedGPUHoursObserved > rep.ReclaimedGPUHours+1e-9 {
				t.Errorf("observed %v above the bound %v", rep.ReclaimedGPUHoursObserved, rep.ReclaimedGPUHours)
			}
			t.Logf("bound %.2f GPU-hours, observed %.2f, beneficiaries %d", rep.ReclaimedGPUHours, rep.ReclaimedGPUHoursObserved, rep.Beneficiaries)
		})
	}
}
