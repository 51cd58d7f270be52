package simulate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// The figures of the evidence report, recomputed here on their own from
// the trace's samples and the rule's thresholds: a second, plain
// implementation of their definitions (see Report.SlowStarters and
// Report.PartlyIdleGPUHours), which takes from the simulation only when
// each run was first judged idle.
type evidence struct {
	flagged, slow, slowReclaimed, partlyJobs int
	inWait, partlyFlagged                    int
	partlyGPUSeconds                         float64
	busyAt                                   map[int64]time.Time // by job
}

// recompute takes each signal's wait from wait (the rules' signal.wait).
func recompute(tr Trace, rep Report, maxUtil, maxMem float64, wait time.Duration) evidence {
	ev := evidence{busyAt: map[int64]time.Time{}}
	isBusy := func(s decide.Sample) bool { return s.UtilPercent > maxUtil || s.MemActivityPercent > maxMem }
	iv := tr.SampleInterval
	for _, tl := range rep.Jobs {
		var j Job
		for _, x := range tr.Jobs {
			if x.ID == tl.JobID && x.Start.Equal(tl.Start) {
				j = x
			}
		}
		start, end := j.Start, j.End
		if start.Before(rep.From) {
			start = rep.From
		}
		if end.After(rep.To) {
			end = rep.To
		}
		// Slow starters: the first busy sample after the first warning
		// or notice of the whole run idle, up to the recorded end, and
		// not within a signal's wait (a checkpoint).
		var flag, partFlag time.Time
		var signals []time.Time
		for _, e := range tl.Events {
			switch {
			case e.Kind == decide.Signal:
				signals = append(signals, e.At)
			case e.Kind != decide.Warn && e.Kind != decide.Notify:
			case e.PartlyIdle && partFlag.IsZero():
				partFlag = e.At
			case !e.PartlyIdle && flag.IsZero():
				flag = e.At
			}
		}
		inWait := func(t time.Time) bool {
			for _, s := range signals {
				if t.After(s) && !t.After(s.Add(wait)) {
					return true
				}
			}
			return false
		}
		if !flag.IsZero() || !partFlag.IsZero() {
			ev.flagged++
		}
		if flag.IsZero() && !partFlag.IsZero() {
			ev.partlyFlagged++
		}
		if !flag.IsZero() {
			var first, waitFirst time.Time
			for _, g := range j.GPUs {
				for _, s := range tr.Samples[g] {
					if !s.At.After(flag) || s.At.After(end) || !isBusy(s) {
						continue
					}
					if inWait(s.At) {
						waitFirst = s.At
					} else if first.IsZero() || s.At.Before(first) {
						first = s.At
					}
				}
			}
			if first.IsZero() && !waitFirst.IsZero() {
				ev.inWait++
			}
			if !first.IsZero() {
				ev.slow++
				ev.busyAt[j.ID] = first
				if !tl.ReclaimedAt.IsZero() && tl.ReclaimedAt.Before(first) {
					ev.slowReclaimed++
				}
			}
		}
		// Partly idle: by sample time, the GPUs idle and busy then.
		if len(j.GPUs) < 2 {
			continue
		}
		type atTime struct{ idle, busy int }
		byTime := map[time.Time]*atTime{}
		for _, g := range j.GPUs {
			for _, s := range tr.Samples[g] {
				if !s.At.After(start) || s.At.After(end) {
					continue
				}
				k := s.At.UTC()
				if byTime[k] == nil {
					byTime[k] = &atTime{}
				}
				if isBusy(s) {
					byTime[k].busy++
				} else {
					byTime[k].idle++
				}
			}
		}
		seconds := 0.0
		for _, g := range j.GPUs {
			prev := start
			for _, s := range tr.Samples[g] {
				if s.At.After(end) {
					break
				}
				if !s.At.After(start) {
					continue
				}
				covered := min(s.At.Sub(prev), iv, s.At.Sub(start))
				if c := byTime[s.At.UTC()]; c.busy > 0 && !isBusy(s) {
					seconds += covered.Seconds()
				}
				prev = s.At
			}
		}
		if seconds > 0 {
			ev.partlyJobs++
			ev.partlyGPUSeconds += seconds
		}
	}
	return ev
}

func (e evidence) of(rep Report) evidence {
	got := evidence{flagged: rep.FlaggedJobs, slow: rep.SlowStarters, slowReclaimed: rep.SlowStartersReclaimed,
		inWait: rep.BusyInSignalWait, partlyFlagged: rep.PartlyIdleFlagged,
		partlyJobs: rep.PartlyIdleJobs, partlyGPUSeconds: rep.PartlyIdleGPUHours * 3600, busyAt: map[int64]time.Time{}}
	for _, tl := range rep.Jobs {
		if !tl.BusyAfterFlagAt.IsZero() {
			got.busyAt[tl.JobID] = tl.BusyAfterFlagAt
		}
	}
	return got
}

var cmpEvidence = cmp.Options{cmp.AllowUnexported(evidence{}), approx}

// TestAlexEvidence: on the shared Alex trace (flat series: each job's GPUs
// hold its average throughout), the figures recomputed from the samples
// match the report, and the CSV alone says what they must be: the jobs
// judged idle are those TestAlexTouched finds from the CSV, none of them
// works later (an average of at most 5 % stays so), and no GPU of a job
// differs from another, so nothing is partly idle.
func TestAlexEvidence(t *testing.T) {
	tr, rep := alex(t)
	want := recompute(tr, rep, 5, 5, 0)
	if diff := cmp.Diff(want, want.of(rep), cmpEvidence); diff != "" {
		t.Errorf("evidence (-recomputed +report):\n%s", diff)
	}
	rows := readAlexCSV(t)
	const step = int64(DefaultStep / time.Second)
	first := slices.MinFunc(rows, func(a, b alexRow) int { return int(a.start - b.start) }).start
	flagged := 0
	for _, r := range rows {
		if judged := first + (r.start+3600-first+step-1)/step*step; r.util <= 5 && judged < r.end {
			flagged++
		}
	}
	if rep.FlaggedJobs != flagged || rep.SlowStarters != 0 || rep.PartlyIdleJobs != 0 || rep.PartlyIdleGPUHours != 0 {
		t.Errorf("flagged %d (the CSV says %d), slow starters %d, partly idle %d jobs / %.2f GPU-hours; want 0 of both on flat series",
			rep.FlaggedJobs, flagged, rep.SlowStarters, rep.PartlyIdleJobs, rep.PartlyIdleGPUHours)
	}
	if want.flagged == 0 {
		t.Fatal("no job judged idle: the test checks nothing")
	}
}

// TestEvidenceRandom: on random traces of multi-GPU jobs whose GPUs idle,
// start late, pause and work on their own, with gaps in the samples, the
// report's slow starters and partly idle GPU-hours are the recomputed
// ones, job by job.
func TestEvidenceRandom(t *testing.T) {
	total := evidence{}
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := Trace{Samples: map[decide.GPUKey][]decide.Sample{}, SampleInterval: time.Minute}
		for id := range int64(6) {
			node := fmt.Sprintf("gpu-%02d", id)
			j := job(100+id, node, 1+rng.IntN(4))
			j.Start = at(time.Duration(rng.IntN(60)) * time.Minute)
			j.End = j.Start.Add(time.Duration(30+rng.IntN(200)) * time.Minute)
			tr.Jobs = append(tr.Jobs, j)
			for _, g := range j.GPUs {
				// Idle for a while (a slow start), then segments of work
				// and idling, each GPU on its own.
				busyFrom := j.Start.Add(time.Duration(rng.IntN(150)) * time.Minute)
				working := false
				for s := j.Start.Add(time.Minute); !s.After(j.End); s = s.Add(time.Minute) {
					if rng.IntN(20) == 0 {
						continue // a gap
					}
					if s.After(busyFrom) && rng.IntN(15) == 0 {
						working = !working
					}
					u, m := 0.0, 0.5
					if working {
						u, m = 80, 30
					}
					if rng.IntN(50) == 0 {
						u = 6 // a blip over the threshold
					}
					tr.Samples[g] = append(tr.Samples[g], decide.Sample{At: s, UtilPercent: u, MemActivityPercent: m})
				}
			}
		}
		sortJobs(tr.Jobs)
		rules := trainRules()
		rules.Rules[0].FirstWindow = 10 * 60e9
		if seed%2 == 1 {
			// Partly idle runs are warned and noticed too.
			rules.Rules[0].PartialIdle = reclaimrules.PartialIdle{Enabled: true, MinIdleGPUs: 1, Action: reclaimrules.ActionNotify}
		}
		rep := Run(tr, rules, Options{Step: time.Minute})
		want := recompute(tr, rep, 5, 5, rules.Rules[0].Signal.Wait.Std())
		if diff := cmp.Diff(want, want.of(rep), cmpEvidence); diff != "" {
			t.Fatalf("seed %d: evidence (-recomputed +report):\n%s", seed, diff)
		}
		total.flagged += want.flagged
		total.slow += want.slow
		total.slowReclaimed += want.slowReclaimed
		total.partlyJobs += want.partlyJobs
		total.inWait += want.inWait
		total.partlyFlagged += want.partlyFlagged
	}
	t.Logf("over all seeds: %d flagged, %d slow starters (%d reclaimed first), %d busy only in a signal's wait, %d flagged only partly idle, %d jobs partly idle",
		total.flagged, total.slow, total.slowReclaimed, total.inWait, total.partlyFlagged, total.partlyJobs)
	if total.slow == 0 || total.slowReclaimed == 0 || total.partlyJobs == 0 || total.slow == total.flagged || total.partlyFlagged == 0 {
		t.Errorf("the random traces do not exercise the figures: %+v", total)
	}
}

// TestNotSlowStarters: a job that checkpoints in the signal's wait (its GPUs
// busy for two minutes after SIGUSR1, then idle until the requeue) and a
// job only ever noticed as partly idle (one GPU working throughout, the
// other idle) are busy after they were flagged, but neither was slow to
// start: each is counted apart, and neither is a slow starter. A job
// busy again after its warning is one.
func TestNotSlowStarters(t *testing.T) {
	checkpoint := func(e time.Duration) (float64, float64) {
		if e > 46*time.Minute && e <= 48*time.Minute { // the signal comes at 45m
			return 90, 40
		}
		return 0, 0.3
	}
	slow := func(e time.Duration) (float64, float64) {
		if e > 40*time.Minute {
			return 90, 40
		}
		return 0, 0.3
	}
	tr := trace(simJob{job(1, "gpu-001", 2), checkpoint}, simJob{job(2, "gpu-002", 2), slow}, simJob{job(3, "gpu-003", 2), idle})
	working := tr.Samples[decide.GPUKey{Node: "gpu-003", Index: 1}]
	for i := range working {
		working[i].UtilPercent = 80
	}
	rules := trainRules()
	rules.Rules[0].PartialIdle = reclaimrules.PartialIdle{Enabled: true, MinIdleGPUs: 1, Action: reclaimrules.ActionNotify}
	rep := Run(tr, rules, Options{Step: time.Minute})
	if rep.FlaggedJobs != 3 || rep.SlowStarters != 1 || rep.BusyInSignalWait != 1 || rep.PartlyIdleFlagged != 1 {
		t.Errorf("flagged %d, slow starters %d, busy only in a signal's wait %d, flagged only partly idle %d; want 3, 1, 1, 1",
			rep.FlaggedJobs, rep.SlowStarters, rep.BusyInSignalWait, rep.PartlyIdleFlagged)
	}
	byID := map[int64]JobTimeline{}
	for _, tl := range rep.Jobs {
		byID[tl.JobID] = tl
	}
	if tl := byID[1]; !tl.BusyAfterFlagAt.IsZero() || !tl.BusyInSignalWaitAt.Equal(at(47*time.Minute)) || tl.ReclaimedAt.IsZero() {
		t.Errorf("job 1 (checkpoints): busy after flag %v, in the wait %v, reclaimed %v; want none, 12:47, requeued", tl.BusyAfterFlagAt, tl.BusyInSignalWaitAt, tl.ReclaimedAt)
	}
	if tl := byID[2]; !tl.BusyAfterFlagAt.Equal(at(41 * time.Minute)) {
		t.Errorf("job 2 (slow starter): busy after flag %v, want 12:41", tl.BusyAfterFlagAt)
	}
	if tl := byID[3]; len(tl.Events) == 0 || !tl.Events[0].PartlyIdle || !tl.BusyAfterFlagAt.IsZero() {
		t.Errorf("job 3 (partly idle): events %+v, busy after flag %v; want a partly idle warning and no slow start", tl.Events, tl.BusyAfterFlagAt)
	}
	want := recompute(tr, rep, 5, 5, rules.Rules[0].Signal.Wait.Std())
	if diff := cmp.Diff(want, want.of(rep), cmpEvidence); diff != "" {
		t.Errorf("evidence (-recomputed +report):\n%s", diff)
	}
}
