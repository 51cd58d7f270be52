package simulate

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/worth"
)

// DefaultStep is the cycle interval a simulation uses when Options gives
// none: reclaimd's default.
const DefaultStep = 30 * time.Second

// maxCycles bounds a simulation (at the default step, almost five years):
// past it, the From, To and Step given are almost certainly a mistake.
const maxCycles = 5_000_000

// Options shape a simulation.
type Options struct {
	// Step is the cycle interval, reclaimd's interval (0: DefaultStep).
	Step time.Duration
	// From and To bound the simulated time (zero: the first job's start,
	// the last job's end). Runs that overlap [From, To) are simulated;
	// GPU-hours are counted inside it only.
	From, To time.Time
}

// Run simulates reclaimd over the trace with the rules and reports what it
// would have done; see the package documentation. The trace is read, never
// written. Rules that do not validate are simulated as reclaimd would run
// them: no action at all, with a note in the report.
func Run(tr Trace, rules reclaimrules.Rules, opt Options) Report {
	step := opt.Step
	if step <= 0 {
		step = DefaultStep
	}
	from, to := opt.From, opt.To
	if len(tr.Jobs) > 0 {
		first, last := tr.Jobs[0].Start, tr.Jobs[0].End
		for _, j := range tr.Jobs {
			first, last = minTime(first, j.Start), maxTime(last, j.End)
		}
		if from.IsZero() {
			from = first
		}
		if to.IsZero() {
			to = last
		}
	}
	rep := Report{From: from, To: to, Step: step, SampleInterval: tr.SampleInterval, Notes: slices.Clone(tr.Notes),
		ByAction: map[string]int{}, ByTenant: map[string]TenantTotals{}}
	if rep.SampleInterval <= 0 {
		rep.SampleInterval = decide.DefaultSampleInterval
	}
	if rules.DryRun {
		rep.Notes = append(rep.Notes, `the rules are in dry-run mode ("dry_run": true): simulated as if they were on`)
	}
	if errs := rules.Validate(); len(errs) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the rules do not validate (%v, and %d more problems): reclaimd would take no action; check them with `reclaimd check-config`", errs[0], len(errs)-1))
	}
	if !to.After(from) {
		rep.Notes = append(rep.Notes, "nothing to simulate: the trace has no jobs, or To is not after From")
		return rep
	}
	if n := to.Sub(from) / step; n > maxCycles {
		rep.Notes = append(rep.Notes, fmt.Sprintf("not simulated: %d cycles of %s from %s to %s is more than %d; narrow From and To or lengthen the step",
			n, step, formatTime(from), formatTime(to), maxCycles))
		return rep
	}

	s := newSim(tr, rules, from, to, step)
	s.run()
	s.report(&rep)
	return rep
}

// sim is one simulation in progress.
type sim struct {
	tr       Trace
	rules    reclaimrules.Rules
	from, to time.Time
	step     time.Duration
	window   time.Duration // the longest rule window: samples kept per GPU

	runs    []*run // the runs that overlap [from, to), by start
	series  map[decide.GPUKey]*series
	states  map[int64]decide.JobState
	running []*run
}

// run is one run of a job in the simulation.
type run struct {
	job      *Job
	requeues int       // earlier runs of the job
	series   []*series // one per GPU, in the job's order
	end      time.Time // the recorded end, clipped to the simulation
	tl       JobTimeline

	stopped   bool      // requeued or cancelled by the simulation
	idleSince time.Time // zero when the run is not judged idle
	idleGPUs  int
	idleDef   reclaimrules.IdleDef // the thresholds of the rule that judged it
	counted   time.Time            // idle time is counted up to here
	// flagAt is when the run was first judged idle as a whole (zero:
	// never), and flagDef the thresholds of the rule that judged it then;
	// partFlagAt when it was first judged partly idle (some of its GPUs
	// idle while others work).
	flagAt     time.Time
	flagDef    reclaimrules.IdleDef
	partFlagAt time.Time
	// waits are the signals' waits, (signal, signal + signal.wait]: what
	// the GPUs do then is the checkpoint the signal asked for.
	waits [][2]time.Time
}

// series is one GPU's samples with a sliding window over them: at time t,
// samples[lo:hi] are those in (t − window, t]. Both ends only move
// forward, so that keeping them costs O(samples) over a whole run.
type series struct {
	samples []decide.Sample
	lo, hi  int
}

func (s *series) advance(t, windowStart time.Time) []decide.Sample {
	for s.hi < len(s.samples) && !s.samples[s.hi].At.After(t) {
		s.hi++
	}
	for s.lo < s.hi && !s.samples[s.lo].At.After(windowStart) {
		s.lo++
	}
	return s.samples[s.lo:s.hi:s.hi]
}

func newSim(tr Trace, rules reclaimrules.Rules, from, to time.Time, step time.Duration) *sim {
	s := &sim{tr: tr, rules: rules, from: from, to: to, step: step,
		series: map[decide.GPUKey]*series{}, states: map[int64]decide.JobState{}}
	for _, r := range rules.WithDefaults().Rules {
		s.window = max(s.window, r.Idle.Window.Std(), r.FirstWindow.Std())
	}
	jobs := make([]Job, len(tr.Jobs))
	copy(jobs, tr.Jobs)
	sortJobs(jobs) // the order Run relies on, whoever built the trace
	seen := map[int64]int{}
	for i := range jobs {
		j := &jobs[i]
		n := seen[j.ID]
		seen[j.ID]++
		if !j.Start.Before(to) || !j.End.After(from) {
			continue
		}
		r := &run{job: j, requeues: n, end: minTime(j.End, to)}
		for _, g := range j.GPUs {
			sr := s.series[g]
			if sr == nil {
				sr = &series{samples: tr.Samples[g]}
				s.series[g] = sr
			}
			r.series = append(r.series, sr)
		}
		r.tl = JobTimeline{JobID: j.ID, User: j.User, Account: j.Account, Tenant: j.Tenant, GPUs: len(j.GPUs), Start: j.Start, End: j.End}
		s.runs = append(s.runs, r)
	}
	return s
}

// run steps the clock from s.from to s.to.
func (s *sim) run() {
	snap := decide.Snapshot{
		Samples:        map[decide.GPUKey][]decide.Sample{},
		SampleInterval: s.tr.SampleInterval,
		SourceOK:       true,
		SlurmOK:        true,
	}
	var jobs []decide.Job
	byID := map[int64]*run{}
	next := 0 // the next run to start
	for t := s.from; t.Before(s.to); t = t.Add(s.step) {
		for next < len(s.runs) && !s.runs[next].job.Start.After(t) {
			s.running = append(s.running, s.runs[next])
			next++
		}
		// Runs that ended: their idle time ends with them.
		kept := s.running[:0]
		for _, r := range s.running {
			if r.job.End.After(t) {
				kept = append(kept, r)
				continue
			}
			r.closeIdle(r.end, s.tr.SampleInterval)
		}
		clear(s.running[len(kept):])
		s.running = kept

		windowStart := t.Add(-s.window)
		jobs = jobs[:0]
		clear(snap.Samples)
		clear(byID)
		for _, r := range s.running {
			j := r.job
			jobs = append(jobs, decide.Job{ID: j.ID, User: j.User, Account: j.Account, Tenant: j.Tenant, Class: j.Class,
				QOS: j.QOS, Partition: j.Partition, Start: j.Start, GPUs: j.GPUs, Requeues: r.requeues})
			byID[j.ID] = r
			for i, g := range j.GPUs {
				snap.Samples[g] = r.series[i].advance(t, windowStart)
			}
		}
		snap.Taken, snap.Jobs, snap.States = t, jobs, s.states
		d := decide.Decide(snap, t, s.rules)
		for _, sk := range d.Skipped {
			if sk.Reason == decide.SkipStaleData {
				byID[sk.JobID].tl.StaleCycles++
			}
		}
		for _, a := range d.Actions {
			byID[a.JobID].act(t, a, s.rules, s.tr.SampleInterval)
		}
		for _, r := range s.running {
			r.countIdle(t, s.tr.SampleInterval)
		}
		s.states = d.States

		kept = s.running[:0]
		for _, r := range s.running {
			if !r.stopped {
				kept = append(kept, r)
			}
		}
		clear(s.running[len(kept):])
		s.running = kept
	}
	for _, r := range s.running {
		r.closeIdle(r.end, s.tr.SampleInterval)
	}
}

// act records one action on the run at t.
func (r *run) act(t time.Time, a decide.Action, rules reclaimrules.Rules, iv time.Duration) {
	partly := (a.Kind == decide.Warn || a.Kind == decide.Notify) && a.Evidence.IdleGPUs < a.Evidence.TotalGPUs
	r.tl.Events = append(r.tl.Events, Event{At: t, Kind: a.Kind, Reason: a.Reason, PartlyIdle: partly})
	r.tl.Rule = a.Rule
	switch a.Kind {
	case decide.Signal:
		for _, rule := range rules.WithDefaults().Rules {
			if rule.Name == a.Rule {
				r.waits = append(r.waits, [2]time.Time{t, t.Add(rule.Signal.Wait.Std())})
			}
		}
	case decide.Warn, decide.Notify:
		if r.idleSince.IsZero() {
			r.idleSince, r.counted, r.idleGPUs = t, t, a.Evidence.IdleGPUs
			for _, rule := range rules.WithDefaults().Rules {
				if rule.Name == a.Rule {
					r.idleDef = rule.Idle
				}
			}
		}
		switch {
		case partly:
			if r.partFlagAt.IsZero() {
				r.partFlagAt = t
			}
		case r.flagAt.IsZero():
			r.flagAt, r.flagDef = t, r.idleDef
		}
	case decide.Recover:
		r.closeIdle(t, iv)
	case decide.Requeue, decide.RequeueHold, decide.Cancel:
		r.closeIdle(t, iv)
		r.stopped = true
		r.tl.ReclaimedAt = t
		r.tl.ReclaimedGPUSeconds = float64(len(r.job.GPUs)) * r.end.Sub(t).Seconds()
	}
}

// countIdle adds, from r.counted to t, while the run is judged idle, the
// GPU time its samples show idle (IdleGPUSeconds), the GPU time they
// cover at all (ObservedGPUSeconds) and the GPU time it held
// (JudgedIdleGPUSeconds). A sample covers at most one sample interval
// before it (and after the one before), as in the decision, so a gap in
// the samples counts as neither idle nor observed.
func (r *run) countIdle(t time.Time, iv time.Duration) {
	if r.idleSince.IsZero() || !t.After(r.counted) {
		return
	}
	if iv <= 0 {
		iv = decide.DefaultSampleInterval
	}
	for _, sr := range r.series {
		ss := sr.samples
		// Each sample is counted once, in the cycle it is first seen,
		// for the part of its interval since the run was judged idle.
		i := sort.Search(len(ss), func(i int) bool { return ss[i].At.After(r.counted) })
		for ; i < len(ss) && !ss[i].At.After(t); i++ {
			from := ss[i].At.Add(-iv)
			if i > 0 && ss[i-1].At.After(from) {
				from = ss[i-1].At
			}
			from = maxTime(from, r.idleSince)
			if !ss[i].At.After(from) {
				continue
			}
			c := ss[i].At.Sub(from).Seconds()
			r.tl.ObservedGPUSeconds += c
			if ss[i].UtilPercent <= r.idleDef.MaxUtilPercent && ss[i].MemActivityPercent <= r.idleDef.MaxMemActivityPercent {
				r.tl.IdleGPUSeconds += c
			}
		}
	}
	r.tl.JudgedIdleGPUSeconds += float64(len(r.series)) * t.Sub(r.counted).Seconds()
	r.counted = t
}

// closeIdle counts the run's idle time up to t and ends it.
func (r *run) closeIdle(t time.Time, iv time.Duration) {
	if r.idleSince.IsZero() {
		return
	}
	r.countIdle(t, iv)
	r.idleSince, r.counted, r.idleGPUs = time.Time{}, time.Time{}, 0
}

// evidence fills in the run's slow-starter and partly idle figures from
// its samples; see Report.SlowStarters and Report.PartlyIdleGPUHours.
func (s *sim) evidence(r *run) {
	rules := s.rules.WithDefaults()
	start := maxTime(r.job.Start, s.from)
	busy := func(x decide.Sample, def reclaimrules.IdleDef) bool {
		return x.UtilPercent > def.MaxUtilPercent || x.MemActivityPercent > def.MaxMemActivityPercent
	}
	if !r.flagAt.IsZero() {
		for _, sr := range r.series {
			for _, x := range sr.samples {
				if !x.At.After(r.flagAt) || x.At.After(r.end) || !busy(x, r.flagDef) {
					continue
				}
				first := &r.tl.BusyAfterFlagAt
				if r.inWait(x.At) {
					first = &r.tl.BusyInSignalWaitAt
				}
				if first.IsZero() || x.At.Before(*first) {
					*first = x.At
				}
			}
		}
	}
	if len(r.series) < 2 {
		return
	}
	j := r.job
	info := decide.Job{Tenant: j.Tenant, Account: j.Account, User: j.User, Class: j.Class, QOS: j.QOS, Partition: j.Partition}.Info()
	if _, exempt := rules.Exempt.Exempts(info); exempt {
		return
	}
	rule, ok := rules.For(info)
	if !ok {
		return
	}
	busyAt := map[int64]bool{} // Unix ns of the samples that show a GPU busy
	for _, sr := range r.series {
		for _, x := range sr.samples {
			if x.At.After(start) && !x.At.After(r.end) && busy(x, rule.Idle) {
				busyAt[x.At.UnixNano()] = true
			}
		}
	}
	if len(busyAt) == 0 {
		return
	}
	iv := s.tr.SampleInterval
	if iv <= 0 {
		iv = decide.DefaultSampleInterval
	}
	for _, sr := range r.series {
		ss := sr.samples
		for i, x := range ss {
			if !x.At.After(start) || x.At.After(r.end) || busy(x, rule.Idle) || !busyAt[x.At.UnixNano()] {
				continue
			}
			from := maxTime(x.At.Add(-iv), start)
			if i > 0 {
				from = maxTime(from, ss[i-1].At)
			}
			r.tl.PartlyIdleGPUSeconds += x.At.Sub(from).Seconds()
		}
	}
}

// inWait says whether t is in one of the run's signal waits.
func (r *run) inWait(t time.Time) bool {
	for _, w := range r.waits {
		if t.After(w[0]) && !t.After(w[1]) {
			return true
		}
	}
	return false
}

// report sums the runs up into rep.
func (s *sim) report(rep *Report) {
	rep.Jobs = make([]JobTimeline, 0, len(s.runs))
	for _, r := range s.runs {
		s.evidence(r)
		tl := r.tl
		if !r.flagAt.IsZero() || !r.partFlagAt.IsZero() {
			rep.FlaggedJobs++
		}
		if r.flagAt.IsZero() && !r.partFlagAt.IsZero() {
			rep.PartlyIdleFlagged++
		}
		if tl.BusyAfterFlagAt.IsZero() && !tl.BusyInSignalWaitAt.IsZero() {
			rep.BusyInSignalWait++
		}
		if !tl.BusyAfterFlagAt.IsZero() {
			rep.SlowStarters++
			if !tl.ReclaimedAt.IsZero() && tl.ReclaimedAt.Before(tl.BusyAfterFlagAt) {
				rep.SlowStartersReclaimed++
			}
		}
		if tl.PartlyIdleGPUSeconds > 0 {
			rep.PartlyIdleJobs++
			rep.PartlyIdleGPUHours += tl.PartlyIdleGPUSeconds / 3600
		}
		start := maxTime(r.job.Start, s.from)
		gpuHours := float64(len(r.job.GPUs)) * r.end.Sub(start).Hours()
		tt := rep.ByTenant[tl.Tenant]
		tt.Jobs++
		tt.GPUHours += gpuHours
		tt.IdleGPUHours += tl.IdleGPUSeconds / 3600
		rep.ObservedGPUHours += tl.ObservedGPUSeconds / 3600
		rep.JudgedIdleGPUHours += tl.JudgedIdleGPUSeconds / 3600
		tt.ReclaimedGPUHours += tl.ReclaimedGPUSeconds / 3600
		rep.TotalGPUHours += gpuHours
		rep.IdleGPUHours += tl.IdleGPUSeconds / 3600
		rep.ReclaimedGPUHours += tl.ReclaimedGPUSeconds / 3600
		if len(tl.Events) > 0 {
			tt.JobsTouched++
			rep.JobsTouched++
		}
		if !tl.ReclaimedAt.IsZero() {
			tt.JobsReclaimed++
			rep.JobsReclaimed++
		}
		if tl.StaleCycles > 0 {
			rep.StaleJobs++
		}
		for _, e := range tl.Events {
			rep.ByAction[string(e.Kind)]++
		}
		rep.ByTenant[tl.Tenant] = tt
		rep.Jobs = append(rep.Jobs, tl)
	}
	if rep.JudgedIdleGPUHours > 0 {
		rep.IdleCoverage = rep.ObservedGPUHours / rep.JudgedIdleGPUHours
	}
	s.handovers(rep)
}

// handovers adds to rep what the reclaims were worth as reclaimd observes
// it (package worth): the trace's later runs that started on the freed
// GPUs, until the reclaimed runs' recorded ends. A run the simulation
// reclaimed ends there; the others end as recorded (or at To).
func (s *sim) handovers(rep *Report) {
	var reclaims []worth.Reclaim
	runs := make([]worth.Run, 0, len(s.runs))
	byRun := map[int64]int{} // reclaim id (the run's index) → rep.Jobs index
	for i, r := range s.runs {
		wr := worth.Run{JobID: r.job.ID, Tenant: r.job.Tenant, Account: r.job.Account, Start: r.job.Start, End: r.end}
		for _, g := range r.job.GPUs {
			wr.GPUs = append(wr.GPUs, worth.GPU{Node: g.Node, Index: g.Index})
		}
		if t := r.tl.ReclaimedAt; !t.IsZero() {
			wr.End = t
			reclaims = append(reclaims, worth.Reclaim{ID: int64(i), JobID: r.job.ID, Tenant: r.job.Tenant, Rule: r.tl.Rule, At: t, LimitEnd: r.end, GPUs: wr.GPUs})
			byRun[int64(i)] = i
		}
		runs = append(runs, wr)
	}
	rep.ByRule = map[string]RuleTotals{}
	for _, rc := range reclaims {
		rt := rep.ByRule[rc.Rule]
		rt.JobsReclaimed++
		rt.ReclaimedGPUHours += rep.Jobs[byRun[rc.ID]].ReclaimedGPUSeconds / 3600
		rep.ByRule[rc.Rule] = rt
	}
	if len(reclaims) == 0 {
		return
	}
	rules := map[int64]string{}
	for _, rc := range reclaims {
		rules[rc.ID] = rc.Rule
	}
	gains := map[[2]int64]float64{} // reclaim, job: the largest start gain
	for _, h := range worth.Handovers(reclaims, runs, s.to, worth.DefaultGap) {
		tl := &rep.Jobs[byRun[h.Reclaim]]
		tl.HandedTo = append(tl.HandedTo, Handover{JobID: h.JobID, Tenant: h.Tenant, GPU: decide.GPUKey{Node: h.GPU.Node, Index: h.GPU.Index}.String(),
			Start: h.Start, GPUSeconds: h.Seconds, StartGainSeconds: h.StartGain.Seconds()})
		tl.ReclaimedGPUSecondsObserved += h.Seconds
		rep.ReclaimedGPUHoursObserved += h.Seconds / 3600
		tt := rep.ByTenant[tl.Tenant]
		tt.ReclaimedGPUHoursObserved += h.Seconds / 3600
		rep.ByTenant[tl.Tenant] = tt
		rt := rep.ByRule[rules[h.Reclaim]]
		rt.ReclaimedGPUHoursObserved += h.Seconds / 3600
		rep.ByRule[rules[h.Reclaim]] = rt
		k := [2]int64{h.Reclaim, h.JobID}
		gains[k] = max(gains[k], h.StartGain.Hours())
	}
	rep.Beneficiaries = len(gains)
	for _, g := range gains {
		rep.StartGainHours += g
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
