package decide_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// simJob is a job of the simulated cluster: its load as a function of the
// time since the simulation began.
type simJob struct {
	job  decide.Job
	load func(elapsed time.Duration) (util, mem float64)
}

// event is one action, at a time since the simulation began.
type event struct {
	At   time.Duration
	Job  int64
	Kind decide.Kind
}

// TestLadderOverCycles runs reclaimd's loop for three simulated hours
// inside a synctest bubble: a sampler goroutine takes a sample of every
// allocated GPU each 30 seconds, the loop decides each minute, feeds the
// states back through JSON (as the store does across restarts) and
// "carries out" requeues. The clock is the bubble's, so the run is exact
// and instant.
func TestLadderOverCycles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		rules := llmRules(func(r *reclaimrules.Rules) { r.Rules[0].MaxRequeues = 1 })
		busy := func(time.Duration) (float64, float64) { return 95, 70 }
		idle := func(time.Duration) (float64, float64) { return 0, 0.5 }
		job := func(id int64, node string, n int, start time.Time) decide.Job {
			j := job(id, gpus(node, n))
			j.Start = start
			return j
		}
		exempt := job(4, "gpu-004", 1, begin)
		exempt.Account = "ops"
		running := []simJob{
			// Works for 50 minutes, then sits idle: warned at 80, and
			// signalled and requeued late because of the outage.
			{job(1, "gpu-001", 8, begin), func(e time.Duration) (float64, float64) {
				if e < 50*time.Minute {
					return busy(e)
				}
				return idle(e)
			}},
			// A burst every 20 minutes: never idle for 30.
			{job(2, "gpu-002", 4, begin), func(e time.Duration) (float64, float64) {
				if e%(20*time.Minute) == 0 {
					return busy(e)
				}
				return idle(e)
			}},
			// Idle from the start: warned at 30; its owner works from 40
			// to 45 (recovered), then leaves it idle again.
			{job(3, "gpu-003", 2, begin), func(e time.Duration) (float64, float64) {
				if e >= 40*time.Minute && e < 45*time.Minute {
					return busy(e)
				}
				return idle(e)
			}},
			{exempt, idle},
			// Memory-bound: low utilisation, busy memory.
			{job(5, "gpu-005", 8, begin), func(time.Duration) (float64, float64) { return 2, 60 }},
		}
		// The metrics source is down from 92m30s to 96m: no samples, and
		// the cycles in between take no action.
		down := func(e time.Duration) bool { return e >= 92*time.Minute+30*time.Second && e <= 96*time.Minute }

		var mu sync.Mutex // guards running and store
		store := map[decide.GPUKey][]decide.Sample{}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-tick.C:
					e := now.Sub(begin)
					if down(e) {
						continue
					}
					mu.Lock()
					for _, j := range running {
						u, m := j.load(e)
						for _, g := range j.job.GPUs {
							store[g] = append(store[g], decide.Sample{At: now, UtilPercent: u, MemActivityPercent: m})
						}
					}
					mu.Unlock()
				}
			}
		}()

		var got []event
		states := map[int64]decide.JobState{}
		requeuedAt := map[int64]time.Duration{}
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for range 180 {
			<-tick.C
			synctest.Wait() // the sampler has taken this instant's sample
			now := time.Now()
			e := now.Sub(begin)

			mu.Lock()
			// Job 1 runs again 10 minutes after its requeue, elsewhere,
			// and idles: at its requeue limit, it is only notified.
			if at, ok := requeuedAt[1]; ok && e == at+10*time.Minute {
				j := job(1, "gpu-006", 8, now)
				j.Requeues = 1
				running = append(running, simJob{j, idle})
			}
			s := decide.Snapshot{
				Taken: now, Samples: map[decide.GPUKey][]decide.Sample{}, SampleInterval: interval,
				SourceOK: !down(e), SlurmOK: true, States: states,
			}
			for _, j := range running {
				s.Jobs = append(s.Jobs, j.job)
				for _, g := range j.job.GPUs {
					s.Samples[g] = store[g] // read only by Decide
				}
			}
			mu.Unlock()

			d := decide.Decide(s, now, rules)
			for _, a := range d.Actions {
				got = append(got, event{e, a.JobID, a.Kind})
				if a.Kind == decide.Requeue {
					requeuedAt[a.JobID] = e
					mu.Lock()
					for i, j := range running {
						if j.job.ID == a.JobID {
							running = append(running[:i], running[i+1:]...)
							break
						}
					}
					mu.Unlock()
				}
			}
			states = restart(t, d.States)
		}

		want := []event{
			{30 * time.Minute, 3, decide.Warn},
			{40 * time.Minute, 3, decide.Recover},
			{75 * time.Minute, 3, decide.Warn},
			{80 * time.Minute, 1, decide.Warn},
			{90 * time.Minute, 3, decide.Signal},
			{97 * time.Minute, 1, decide.Signal},
			// Job 3's wait ended at 95, in the outage: it is requeued once
			// the samples since cover 80 % of the time since.
			{100 * time.Minute, 3, decide.Requeue},
			// Job 1's wait ended at 102: requeued on the first sample after.
			{103 * time.Minute, 1, decide.Requeue},
			{143 * time.Minute, 1, decide.Notify},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("actions over three hours (-want +got):\n%s", diff)
		}
		phases := map[int64]decide.Phase{}
		for id, st := range states {
			phases[id] = st.Phase
		}
		wantPhases := map[int64]decide.Phase{1: decide.Notified, 2: decide.Observed, 4: decide.Observed, 5: decide.Observed}
		if diff := cmp.Diff(wantPhases, phases); diff != "" {
			t.Errorf("phases at the end (-want +got):\n%s", diff)
		}
	})
}

// restart stores the states as JSON and reads them back, as reclaimd does
// through SQLite across a restart.
func restart(t *testing.T, states map[int64]decide.JobState) map[int64]decide.JobState {
	t.Helper()
	data, err := json.Marshal(states)
	if err != nil {
		t.Fatal(err)
	}
	var back map[int64]decide.JobState
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	return back
}
