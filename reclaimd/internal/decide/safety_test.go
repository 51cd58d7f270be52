package decide_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// randomCycle makes a small cluster in an arbitrary state: overlapping
// allocations, gaps, stale and future samples, NaN, states from any phase
// and any run, sources up or down, rules of any shape.
func randomCycle(rng *rand.Rand) (decide.Snapshot, time.Time, reclaimrules.Rules) {
	pick := func(p float64) bool { return rng.Float64() < p }
	s := decide.Snapshot{
		Taken: now, SampleInterval: interval, SourceOK: !pick(0.05), SlurmOK: !pick(0.05),
		Samples: map[decide.GPUKey][]decide.Sample{}, States: map[int64]decide.JobState{},
	}
	var all []decide.GPUKey
	for n := range 1 + rng.IntN(4) {
		all = append(all, gpus(fmt.Sprintf("gpu-%03d", n), 4)...)
	}
	for _, g := range all {
		stop := now
		if pick(0.03) {
			stop = now.Add(-time.Duration(rng.IntN(600)) * time.Second)
		}
		level := []float64{0, 0, 0.3, 0.3, 3, 6, 50, 99}[rng.IntN(8)]
		for at := now.Add(-2 * time.Hour); !at.After(stop.Add(time.Minute)); at = at.Add(interval) {
			if pick(0.02) {
				continue // a lost sample
			}
			u, m := level, level/2
			switch {
			case pick(0.0005):
				u = math.NaN()
			case pick(0.002):
				u = 90 // a burst
			case pick(0.005):
				m = 40
			}
			s.Samples[g] = append(s.Samples[g], decide.Sample{At: at, UtilPercent: u, MemActivityPercent: m})
		}
	}
	phases := []decide.Phase{"", decide.Observed, decide.Warned, decide.Signalled, decide.Requeued, decide.Cancelled, decide.Recovered, decide.Notified}
	for id := range int64(1 + rng.IntN(8)) {
		first := rng.IntN(len(all))
		j := job(id+1, all[first:min(len(all), first+1+rng.IntN(4))])
		j.Start = now.Add(-time.Duration(rng.IntN(180)) * time.Minute)
		j.Requeues = rng.IntN(4)
		j.Tenant = []string{"llm", "llm", "llm", "llm", "vision", "bio"}[rng.IntN(6)]
		if pick(0.1) {
			j.Account = "ops"
		}
		s.Jobs = append(s.Jobs, j)
		if pick(0.6) {
			ago := func() time.Time { return now.Add(-time.Duration(rng.IntN(60)) * time.Minute) }
			st := decide.JobState{Phase: phases[rng.IntN(len(phases))], Since: ago(), WarnedAt: ago(), Rule: "llm", RunStart: j.Start}
			if (st.Phase == decide.Requeued || st.Phase == decide.Cancelled) && pick(0.7) {
				st.Phase = decide.Warned // rare in life: Slurm lists a job it requeued for a cycle at most
			}
			if st.Phase == decide.Signalled || pick(0.2) {
				st.SignalledAt = ago()
			}
			if pick(0.2) {
				st.RunStart = j.Start.Add(-time.Hour) // an earlier run
			}
			s.States[j.ID] = st
		}
	}
	if pick(0.05) {
		s.Taken = now.Add(-5 * time.Minute)
	}
	actions := []reclaimrules.Action{"", reclaimrules.ActionNotify, reclaimrules.ActionRequeue, reclaimrules.ActionRequeueHold, reclaimrules.ActionCancel}
	r := llmRules(func(r *reclaimrules.Rules) {
		llm := &r.Rules[0]
		llm.Action = actions[1+rng.IntN(len(actions)-1)]
		llm.PartialIdle.Enabled = pick(0.5)
		if llm.PartialIdle.Enabled {
			llm.PartialIdle.Action = actions[rng.IntN(len(actions))]
			llm.PartialIdle.MinIdleGPUs = rng.IntN(3)
		} else {
			llm.PartialIdle = reclaimrules.PartialIdle{}
		}
		if !llm.Action.Destructive() && !llm.PartialIdle.Action.Destructive() || pick(0.3) {
			llm.Signal = reclaimrules.Signal{}
		}
		if pick(0.3) {
			llm.FirstWindow = reclaimrules.Duration(time.Duration(1+rng.IntN(29)) * time.Minute)
		}
		llm.MaxRequeues = rng.IntN(3)
		if !llm.Action.Requeues() && !llm.PartialIdle.Action.Requeues() {
			llm.MaxRequeues = 0
		}
		r.DryRun = pick(0.3)
		r.Limits.MaxActionsPerCycle = rng.IntN(4)
	})
	return s, now, r
}

// FuzzDecideSafety: whatever the cycle, Decide keeps its promises. Run
// with -fuzz to search further than the seeds.
func FuzzDecideSafety(f *testing.F) {
	for seed := range uint64(300) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		s, n, raw := randomCycle(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		if errs := raw.Validate(); len(errs) > 0 {
			t.Fatalf("the generator made invalid rules: %v", errs)
		}
		r := raw.WithDefaults()
		d := decide.Decide(s, n, raw)

		if diff := cmp.Diff(d, decide.Decide(s, n, raw), cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("Decide is not deterministic:\n%s", diff)
		}
		if len(d.Actions)+len(d.Skipped) != len(s.Jobs) {
			t.Fatalf("%d actions and %d skips for %d jobs", len(d.Actions), len(d.Skipped), len(s.Jobs))
		}
		jobs := map[int64]decide.Job{}
		for _, j := range s.Jobs {
			jobs[j.ID] = j
			if _, ok := d.States[j.ID]; !ok {
				t.Fatalf("job %d has no next state", j.ID)
			}
		}
		gated := !s.SourceOK || !s.SlurmOK || n.Sub(s.Taken) > 2*interval
		// The next step if the GPUs stay idle: of a job judged this
		// cycle, never in the past, and none while a gate holds.
		for id, u := range d.Upcoming {
			if _, ok := jobs[id]; !ok || u.Kind == "" || u.At.Before(n) || gated {
				t.Fatalf("upcoming %+v of job %d (in the snapshot: %v; gated: %v) at %s", u, id, ok, gated, n)
			}
		}
		destructive := 0
		for _, a := range d.Actions {
			j := jobs[a.JobID]
			if gated {
				t.Fatalf("action %+v while a source failed or the snapshot is old", a)
			}
			if _, exempt := r.Exempt.Exempts(j.Info()); exempt {
				t.Fatalf("action %s for exempt job %d", a.Kind, j.ID)
			}
			if a.DryRun != r.DryRun {
				t.Fatalf("action DryRun %v, rules %v", a.DryRun, r.DryRun)
			}
			if err := a.StillApplies(j); err != nil {
				t.Fatalf("an action for another run: %v", err)
			}
			// Every action rests on fresh data for every GPU, but for
			// abandoning a signalled job's ladder, which lack of data does.
			rule, _ := r.For(j.Info())
			if len(a.Evidence.GPUs) != len(j.GPUs) {
				t.Fatalf("evidence for %d of %d GPUs", len(a.Evidence.GPUs), len(j.GPUs))
			}
			prev := decide.Observed
			st, known := s.States[j.ID]
			if known && st.Phase != "" && (st.RunStart.IsZero() || st.RunStart.Equal(j.Start)) {
				prev = st.Phase
			}
			// After a signal, the next step reads only samples after its
			// wait.
			if prev == decide.Signalled && a.Kind != decide.Recover {
				if due := st.SignalledAt.Add(rule.Signal.Wait.Std()); a.Evidence.WindowStart.Before(due) {
					t.Fatalf("job %d: %s after a signal on samples from %s, before the wait ended at %s", j.ID, a.Kind, a.Evidence.WindowStart, due)
				}
			}
			for _, g := range a.Evidence.GPUs {
				if a.Kind == decide.Recover && prev == decide.Signalled {
					break
				}
				if g.Samples == 0 || g.Coverage < rule.Idle.MinCoverage || n.Sub(g.Newest) > 2*interval {
					t.Fatalf("job %d: %s on stale data: %+v", j.ID, a.Kind, g)
				}
				if g.Idle && (g.MaxUtilPercent > rule.Idle.MaxUtilPercent || g.MaxMemActivityPercent > rule.Idle.MaxMemActivityPercent) {
					t.Fatalf("job %d: a busy GPU counted idle: %+v", j.ID, g)
				}
			}
			// There is always a warning before a signal, requeue or
			// cancel.
			switch a.Kind {
			case decide.Signal:
				if prev != decide.Warned {
					t.Fatalf("job %d signalled from %s", j.ID, prev)
				}
			case decide.Requeue, decide.RequeueHold, decide.Cancel:
				if prev != decide.Warned && prev != decide.Signalled {
					t.Fatalf("job %d: %s from %s", j.ID, a.Kind, prev)
				}
			case decide.Recover:
				if prev != decide.Warned && prev != decide.Notified && prev != decide.Signalled {
					t.Fatalf("job %d recovered from %s", j.ID, prev)
				}
			}
			if a.Kind == decide.Requeue || a.Kind == decide.RequeueHold {
				if limit := r.Limits.RequeueLimit(rule); j.Requeues >= limit {
					t.Fatalf("job %d requeued with %d requeues, limit %d", j.ID, j.Requeues, limit)
				}
			}
			if a.Kind.Destructive() {
				destructive++
			}
		}
		if destructive > r.Limits.MaxActionsPerCycle {
			t.Fatalf("%d destructive actions, limit %d", destructive, r.Limits.MaxActionsPerCycle)
		}
		if gated {
			for id, st := range s.States {
				if _, running := jobs[id]; running && st.RunStart.Equal(jobs[id].Start) && d.States[id].Phase != st.Phase && st.Phase != "" {
					t.Fatalf("job %d moved from %s to %s while no action may be taken", id, st.Phase, d.States[id].Phase)
				}
			}
		}
	})
}
