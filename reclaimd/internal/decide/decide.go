package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/internal/dcgmprom"
	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// Info returns what rules and exemptions match the job on.
func (j Job) Info() reclaimrules.JobInfo {
	return reclaimrules.JobInfo{Tenant: j.Tenant, Account: j.Account, User: j.User, Class: j.Class, QOS: j.QOS, Partition: j.Partition}
}

// Decide works out this cycle's actions and every job's next state; see
// the package documentation for the rules it follows. It is a pure
// function of its arguments: s.States is read, never written. It takes
// O(jobs × GPUs per job × log samples + samples in the windows) time.
func Decide(s Snapshot, now time.Time, r reclaimrules.Rules) Decision {
	c := cycle{s: s, now: now, interval: s.SampleInterval}
	if c.interval <= 0 {
		c.interval = DefaultSampleInterval
	}
	c.gate, c.gateDetail = c.gates(r)
	c.rules = r.WithDefaults()
	c.limits = c.rules.Limits

	total := 0
	for _, j := range s.Jobs {
		total += len(j.GPUs)
	}
	c.gpus = make([]GPUEvidence, 0, total)
	out := make([]outcome, len(s.Jobs))
	next := make(map[int64]JobState, len(s.Jobs))
	var destructive []int
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if _, dup := next[j.ID]; dup {
			out[i] = outcome{skip: SkipDuplicate, detail: "the snapshot lists the job twice; the first is judged"}
			continue
		}
		c.judge(j, &out[i])
		next[j.ID] = out[i].next
		if out[i].action.Kind.Destructive() {
			destructive = append(destructive, i)
		}
	}
	c.limit(out, destructive)

	d := Decision{States: next, Upcoming: map[int64]Upcoming{}}
	for i := range out {
		o := &out[i]
		id := s.Jobs[i].ID
		if o.skip != SkipDuplicate {
			next[id] = o.next
			if o.upcoming.Kind != "" && c.gate == "" {
				d.Upcoming[id] = o.upcoming
			}
		}
		if o.action.Kind != "" {
			o.action.JobID = id
			o.action.DryRun = c.rules.DryRun
			d.Actions = append(d.Actions, o.action)
			continue
		}
		d.Skipped = append(d.Skipped, Skip{JobID: id, Reason: o.skip, Detail: o.detail})
	}
	return d
}

// cycle holds what one call of Decide shares between jobs.
type cycle struct {
	s          Snapshot
	now        time.Time
	interval   time.Duration
	rules      reclaimrules.Rules
	limits     reclaimrules.Limits
	gate       SkipReason // set when no job may get an action
	gateDetail string
	gpus       []GPUEvidence // backing store of every Evidence.GPUs
}

// outcome is one job's result: an action, or a skip with its reason.
type outcome struct {
	action Action // Kind "" when there is none
	skip   SkipReason
	detail string
	prev   JobState // the state before this cycle
	next   JobState
	weight float64 // idle GPU-seconds, to order destructive actions
	// upcoming is the next step if the GPUs stay idle (Kind "": none).
	upcoming Upcoming
}

// gates returns why no job may get an action this cycle, if so.
func (c *cycle) gates(r reclaimrules.Rules) (SkipReason, string) {
	switch {
	case !c.s.SlurmOK:
		return SkipSlurmFailing, "slurmrestd did not answer this cycle: no action until it does"
	case !c.s.SourceOK:
		return SkipSourceFailing, "the GPU metrics source did not answer this cycle: no action until it does"
	case c.s.Taken.IsZero():
		return SkipOldSnapshot, "the snapshot has no time"
	case c.now.Sub(c.s.Taken) > 2*c.interval:
		return SkipOldSnapshot, fmt.Sprintf("snapshot taken %s before the decision, more than twice the %s sample interval", ago(c.now, c.s.Taken), c.interval)
	}
	if errs := r.Validate(); len(errs) > 0 {
		detail := errs[0].Error()
		if len(errs) > 1 {
			detail += fmt.Sprintf(" (and %d more problems)", len(errs)-1)
		}
		return SkipInvalidRules, detail
	}
	return "", ""
}

// judge decides for one job, into o.
func (c *cycle) judge(j *Job, o *outcome) {
	now := c.now
	prev, known := c.s.States[j.ID]
	if !known || prev.Phase == "" {
		prev.Phase = Observed
		if prev.Since.IsZero() {
			prev.Since = now
		}
	}
	if !prev.RunStart.IsZero() && !prev.RunStart.Equal(j.Start) {
		prev = JobState{Phase: Observed, Since: now} // a new run: a new ladder
	}
	prev.RunStart = j.Start
	o.prev, o.next = prev, prev
	skip := func(reason SkipReason, detail string) {
		o.skip, o.detail = reason, detail
	}
	// dropLadder ends the ladder of a job that is no longer judged.
	dropLadder := func() {
		if prev.Phase == Warned || prev.Phase == Signalled || prev.Phase == Notified {
			o.next = JobState{Phase: Observed, Since: now, RunStart: j.Start}
		}
	}

	if c.gate != "" {
		skip(c.gate, c.gateDetail)
		return
	}
	for _, g := range j.GPUs {
		if why, bad := c.s.Mismatched[g.Node]; bad && !c.s.Placed[j.ID] {
			skip(SkipGPUMismatch, g.Node+": "+why)
			return
		}
	}
	if prev.Phase == Requeued || prev.Phase == Cancelled {
		skip(SkipActed, fmt.Sprintf("%s %s ago; Slurm still lists the run as running", prev.Phase, ago(now, prev.Since)))
		return
	}
	info := j.Info()
	if why, ok := c.rules.Exempt.Exempts(info); ok {
		dropLadder()
		skip(SkipExempt, why+" is exempt")
		return
	}
	rule, ok := c.rules.For(info)
	if !ok {
		dropLadder()
		skip(SkipNoRule, fmt.Sprintf("no rule matches tenant %q, account %q, user %q, class %q, QOS %q, partition %q",
			j.Tenant, j.Account, j.User, j.Class, j.QOS, j.Partition))
		return
	}
	o.next.Rule = rule.Name
	if len(j.GPUs) == 0 {
		skip(SkipNoGPUs, "the job holds no GPUs")
		return
	}
	if prev.Phase == Signalled {
		c.afterSignal(j, rule, prev, o)
		return
	}
	// The first step if the GPUs stay idle: the warning, or the notice
	// of a rule that only notifies.
	first := Warn
	if end, _ := endAction(rule, false, j, c.limits); end == Notify {
		first = Notify
	}
	age := now.Sub(j.Start)
	window := rule.Idle.Window.Std()
	fw := rule.FirstWindow.Std()
	judgeAt := window
	if fw > 0 && fw < window {
		judgeAt = fw
	}
	if grace := rule.StartupGrace.Std(); age < grace {
		skip(SkipStartupGrace, fmt.Sprintf("started %s ago; startup grace %s", age.Round(time.Second), grace))
		o.upcoming = Upcoming{Kind: first, At: j.Start.Add(max(grace, judgeAt))}
		return
	}
	from := now.Add(-window)
	if age < window {
		if fw <= 0 || age < fw {
			said := window
			if fw > 0 {
				said = fw
			}
			skip(SkipTooYoung, fmt.Sprintf("ran %s; first judged at %s", age.Round(time.Second), said))
			o.upcoming = Upcoming{Kind: first, At: j.Start.Add(judgeAt)}
			return
		}
		from, window = j.Start, age
	}

	ev, st := c.evaluate(j, rule, from)
	if st != "" {
		skip(SkipStaleData, st)
		return
	}
	partial := ev.IdleGPUs > 0 && ev.IdleGPUs < ev.TotalGPUs && rule.PartialIdle.Enabled &&
		ev.IdleGPUs >= rule.PartialIdle.MinIdleGPUs &&
		float64(ev.IdleGPUs) >= rule.PartialIdle.MinIdleFraction*float64(ev.TotalGPUs)
	idle := ev.IdleGPUs == ev.TotalGPUs || partial

	act := func(k Kind, reason string) {
		o.action = Action{Kind: k, Rule: rule.Name, Reason: reason, Evidence: ev}
		if k == Signal {
			o.action.Signal, o.action.SignalMode = rule.Signal.Name, rule.Signal.Mode
		}
		o.advance(k, now)
		if k.Destructive() {
			idleFor := window
			if !prev.WarnedAt.IsZero() {
				idleFor += now.Sub(prev.WarnedAt)
			}
			o.weight = float64(ev.IdleGPUs) * idleFor.Seconds()
		}
	}

	if !idle {
		busy := busyText(ev, rule, window)
		// Idle from now, a whole window of idle samples is the verdict.
		o.upcoming = Upcoming{Kind: first, At: now.Add(rule.Idle.Window.Std())}
		switch prev.Phase {
		case Warned, Notified:
			act(Recover, "busy again: "+busy+"; the reclaim is withdrawn")
			return
		}
		skip(SkipBusy, busy)
		return
	}

	o.next.Partial = partial
	end, note := endAction(rule, partial, j, c.limits)
	// The signal step, unless the rule's mode skips it for this job: a
	// batch script that does not trap the signal dies of it, and the run
	// is lost rather than requeued.
	signals := rule.Signal.Name != "" && rule.Signal.Mode.Sends(j.SignalRequested)
	seen := func() string { return idleText(ev, rule, window) }
	// After a warning: the signal, or the end action.
	afterWarn := end
	if end.Destructive() && signals {
		afterWarn = Signal
	}
	switch prev.Phase {
	case Notified:
		skip(SkipNotified, fmt.Sprintf("notified %s ago; still idle", ago(now, prev.Since)))
		return
	case Warned:
		waited := now.Sub(prev.WarnedAt)
		if w := rule.Warn.Std(); waited < w {
			skip(SkipWaiting, fmt.Sprintf("warned %s ago; next step in %s", ago(now, prev.WarnedAt), (w-waited).Round(time.Second)))
			o.upcoming = Upcoming{Kind: afterWarn, At: prev.WarnedAt.Add(w)}
			return
		}
		if end.Destructive() && signals {
			act(Signal, fmt.Sprintf("%s; still idle %s after the warning: %s, then %s in %s",
				seen(), ago(now, prev.WarnedAt), rule.Signal.Name, verb(end), rule.Signal.Wait.Std()))
			return
		}
		act(end, fmt.Sprintf("%s; still idle %s after the warning: %s%s", seen(), ago(now, prev.WarnedAt), note, verb(end)))
		return
	}
	// Observed or Recovered: the first idle verdict.
	if end == Notify {
		act(Notify, seen()+"; "+note+"notify only")
		return
	}
	plan := fmt.Sprintf("%s in %s", verb(end), rule.Warn.Std())
	if signals {
		plan = fmt.Sprintf("%s in %s, then %s %s later,", rule.Signal.Name, rule.Warn.Std(), verb(end), rule.Signal.Wait.Std())
	}
	act(Warn, fmt.Sprintf("%s; warning: %s unless the GPUs get busy", seen(), plan))
	o.upcoming = Upcoming{Kind: afterWarn, At: now.Add(rule.Warn.Std())}
}

// advance moves o's next state on by an action of kind k taken at now.
func (o *outcome) advance(k Kind, now time.Time) {
	o.next.Actions++
	o.next.Since = now
	switch k {
	case Warn:
		o.next.Phase, o.next.WarnedAt = Warned, now
	case Signal:
		o.next.Phase, o.next.SignalledAt = Signalled, now
	case Requeue, RequeueHold:
		o.next.Phase = Requeued
	case Cancel:
		o.next.Phase = Cancelled
	case Notify:
		o.next.Phase = Notified
	case Recover:
		o.next.Phase, o.next.WarnedAt, o.next.SignalledAt, o.next.Partial = Recovered, time.Time{}, time.Time{}, false
	}
}

// SignalEvidenceBound is how long past a signal's wait a signalled job
// may go without fresh samples before the next step is abandoned: the
// wait again, and never less than five sample intervals.
func SignalEvidenceBound(wait, interval time.Duration) time.Duration { return max(wait, 5*interval) }

// afterSignal decides for a signalled job. The next step is taken only on
// samples taken after the signal's wait (what the job did while it
// checkpointed is not read), every one idle; busy GPUs after the wait, or
// no fresh samples for SignalEvidenceBound past it, abandon the ladder:
// the job is recovered, with a record, and watched again.
func (c *cycle) afterSignal(j *Job, rule reclaimrules.Rule, prev JobState, o *outcome) {
	now := c.now
	end, note := endAction(rule, prev.Partial, j, c.limits)
	wait := rule.Signal.Wait.Std()
	due := prev.SignalledAt.Add(wait)
	if !now.After(due) {
		o.skip, o.detail = SkipWaiting, fmt.Sprintf("signalled %s ago; %s in %s, if fresh samples then show the GPUs still idle",
			ago(now, prev.SignalledAt), verb(end), due.Sub(now).Round(time.Second))
		o.upcoming = Upcoming{Kind: end, At: due}
		return
	}
	ev, stale := c.evaluate(j, rule, due)
	span := now.Sub(due)
	abandon := func(why string) {
		o.action = Action{Kind: Recover, Rule: rule.Name, Evidence: ev,
			Reason: fmt.Sprintf("%s; the %s after %s is abandoned and the job watched again", why, verb(end), signalName(rule))}
		o.advance(Recover, now)
	}
	if stale != "" {
		if span <= 2*c.interval {
			// The first samples after the wait are not due yet.
			o.skip, o.detail = SkipWaiting, fmt.Sprintf("signalled %s ago; %s once fresh samples after the %s wait show the GPUs still idle",
				ago(now, prev.SignalledAt), verb(end), wait)
			return
		}
		if bound := SignalEvidenceBound(wait, c.interval); span > bound {
			abandon(fmt.Sprintf("no fresh samples for %s after the %s wait (%s)", span.Round(time.Second), wait, stale))
			return
		}
		o.skip, o.detail = SkipStaleData, fmt.Sprintf("signalled %s ago; the %s waits for fresh samples after the %s wait, abandoned in %s without them: %s",
			ago(now, prev.SignalledAt), verb(end), wait, (SignalEvidenceBound(wait, c.interval)-span).Round(time.Second), stale)
		return
	}
	partial := prev.Partial && ev.IdleGPUs > 0 && rule.PartialIdle.Enabled && ev.IdleGPUs >= rule.PartialIdle.MinIdleGPUs &&
		float64(ev.IdleGPUs) >= rule.PartialIdle.MinIdleFraction*float64(ev.TotalGPUs)
	if ev.IdleGPUs < ev.TotalGPUs && !partial {
		abandon("busy after the signal's wait: " + busyText(ev, rule, span))
		return
	}
	o.action = Action{Kind: end, Rule: rule.Name, Evidence: ev,
		Reason: fmt.Sprintf("%s; still idle %s after %s, past its %s wait: %s%s", idleText(ev, rule, span), ago(now, prev.SignalledAt),
			signalName(rule), wait, note, verb(end))}
	o.advance(end, now)
	if end.Destructive() {
		o.weight = float64(ev.IdleGPUs) * (rule.Idle.Window.Std() + now.Sub(prev.WarnedAt)).Seconds()
	}
}

// endAction returns the action that ends the ladder, and a note when a
// requeue was turned into a notice ("requeue limit reached (3 of 3
// requeues): ").
func endAction(rule reclaimrules.Rule, partial bool, j *Job, l reclaimrules.Limits) (Kind, string) {
	a := rule.Action
	if partial {
		a = rule.PartialIdle.Action
	}
	note := ""
	if a.Requeues() {
		if limit := l.RequeueLimit(rule); j.Requeues >= limit {
			return Notify, fmt.Sprintf("requeue limit reached (%d of %d requeues): ", j.Requeues, limit)
		}
		if j.HetComponent {
			return Notify, "a component of a heterogeneous job, which Slurm requeues only whole (the other components too): "
		}
		if j.NoRequeue {
			if rule.NoRequeue != reclaimrules.NoRequeueOverride {
				return Notify, "submitted with --no-requeue (the rule's no_requeue is skip): "
			}
			note = "submitted with --no-requeue, made requeueable by the rule's no_requeue: requeue: "
		}
	}
	switch a {
	case reclaimrules.ActionRequeue:
		return Requeue, note
	case reclaimrules.ActionRequeueHold:
		return RequeueHold, note
	case reclaimrules.ActionCancel:
		if j.HetLeader {
			return Notify, "the leader of a heterogeneous job, which runs its batch script: cancelling it ends every component: "
		}
		return Cancel, ""
	}
	return Notify, ""
}

// verb names an end action in a sentence.
func verb(k Kind) string {
	switch k {
	case RequeueHold:
		return "requeue and hold"
	case Notify:
		return "notify only"
	}
	return string(k)
}

// signalName is the signal a Signalled job got: the rule's, or a generic
// word when the rule has lost it since.
func signalName(rule reclaimrules.Rule) string {
	if rule.Signal.Name != "" {
		return rule.Signal.Name
	}
	return "the signal"
}

// evaluate judges every GPU of a job over (from, now]. It returns the
// evidence, or why the data is stale.
func (c *cycle) evaluate(j *Job, rule reclaimrules.Rule, from time.Time) (Evidence, string) {
	ev := Evidence{WindowStart: from, WindowEnd: c.now, JobStart: j.Start, TotalGPUs: len(j.GPUs)}
	if j.TimeLimit > 0 && !j.Start.IsZero() {
		ev.JobEnd = j.Start.Add(j.TimeLimit)
	}
	start := len(c.gpus)
	span := c.now.Sub(from)
	stale := ""
	for _, g := range j.GPUs {
		ge, why := c.evaluateGPU(g, from, span, rule.Idle)
		if why != "" && stale == "" {
			stale = g.String() + ": " + why
		}
		if ge.Idle {
			ev.IdleGPUs++
		}
		c.gpus = append(c.gpus, ge)
	}
	ev.GPUs = c.gpus[start:len(c.gpus):len(c.gpus)]
	return ev, stale
}

// evaluateGPU reads one GPU's samples in (from, now]; each covers at most
// one sample interval before it. The samples are the GPU's Window when
// the snapshot gives one, else its Samples.
func (c *cycle) evaluateGPU(g GPUKey, from time.Time, span time.Duration, def reclaimrules.IdleDef) (GPUEvidence, string) {
	ge := GPUEvidence{GPU: g}
	var st stats
	if w, ok := c.s.Windows[g]; ok {
		if !w.Exact(c.now) {
			// Only the tail can be read after a now that is older than
			// the samples: the GPU's source is ahead of this clock.
			return ge, fmt.Sprintf("more than %d samples newer than now: the source's clock is ahead", WindowTail)
		}
		st = w.stats(from, c.now.UnixNano(), int64(c.interval))
	} else {
		st = statsOf(c.s.Samples[g], from, c.now.UnixNano(), int64(c.interval))
	}
	covered := st.covered
	ge.Samples = st.n
	ge.MaxUtilPercent, ge.MaxMemActivityPercent, ge.MaxMemUsedMiB = st.maxU, st.maxM, st.maxUsed
	invalid := st.invalid
	if span > 0 {
		ge.Coverage = min(float64(covered)/float64(span), 1)
	}
	switch {
	case ge.Samples == 0:
		return ge, fmt.Sprintf("no samples in the %s window", span.Round(time.Second))
	case invalid:
		return ge, "a sample has no value (NaN)"
	}
	ge.Newest = st.newest
	switch {
	case c.now.Sub(ge.Newest) > 2*c.interval:
		return ge, fmt.Sprintf("newest sample %s old, expected every %s", ago(c.now, ge.Newest), c.interval)
	case ge.Coverage < def.MinCoverage:
		return ge, fmt.Sprintf("samples cover %.0f%% of the %s window, need %.0f%%", 100*ge.Coverage, span.Round(time.Second), 100*def.MinCoverage)
	}
	// The product's one definition of an idle GPU (the portal's overview
	// judges by it too).
	ge.Idle = dcgmprom.Idle(ge.MaxUtilPercent, ge.MaxMemActivityPercent,
		dcgmprom.Threshold{MaxUtilPercent: def.MaxUtilPercent, MaxMemActivityPercent: def.MaxMemActivityPercent})
	return ge, ""
}

// limit turns the destructive actions past limits.max_actions_per_cycle
// into skips, keeping those with the most idle GPU-time (then the lowest
// job id, so that the choice is stable).
func (c *cycle) limit(out []outcome, destructive []int) {
	limit := c.limits.MaxActionsPerCycle
	if len(destructive) <= limit {
		return
	}
	slices.SortStableFunc(destructive, func(a, b int) int {
		if d := cmp.Compare(out[b].weight, out[a].weight); d != 0 {
			return d
		}
		return cmp.Compare(c.s.Jobs[a].ID, c.s.Jobs[b].ID)
	})
	for _, i := range destructive[limit:] {
		o := &out[i]
		o.skip = SkipActionLimit
		o.detail = fmt.Sprintf("%s deferred: at most %d signals, requeues and cancels per cycle, the most idle GPU-time first", o.action.Kind, limit)
		o.action = Action{}
		o.next = o.prev
	}
}

// idleText describes the idle GPUs: "8 of 8 GPUs idle for 30m0s: util ≤
// 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%)".
func idleText(ev Evidence, rule reclaimrules.Rule, window time.Duration) string {
	var u, m float64
	for _, g := range ev.GPUs {
		if g.Idle {
			u, m = max(u, g.MaxUtilPercent), max(m, g.MaxMemActivityPercent)
		}
	}
	return fmt.Sprintf("%d of %s idle for %s: util ≤ %s%%, memory activity ≤ %s%% (max seen %.1f%%, %.1f%%)",
		ev.IdleGPUs, gpus(ev.TotalGPUs), window.Round(time.Second), pct(rule.Idle.MaxUtilPercent), pct(rule.Idle.MaxMemActivityPercent), u, m)
}

// busyText describes the busy GPUs: "2 of 8 GPUs above util 5% or memory
// activity 5% in the last 30m0s (max seen 87.0%, 40.0%)".
func busyText(ev Evidence, rule reclaimrules.Rule, window time.Duration) string {
	var u, m float64
	for _, g := range ev.GPUs {
		if !g.Idle {
			u, m = max(u, g.MaxUtilPercent), max(m, g.MaxMemActivityPercent)
		}
	}
	return fmt.Sprintf("%d of %s above util %s%% or memory activity %s%% in the last %s (max seen %.1f%%, %.1f%%)",
		ev.TotalGPUs-ev.IdleGPUs, gpus(ev.TotalGPUs), pct(rule.Idle.MaxUtilPercent), pct(rule.Idle.MaxMemActivityPercent), window.Round(time.Second), u, m)
}

func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return strconv.Itoa(n) + " GPUs"
}

// ago is the time from t to now, to the second: for people, not for
// arithmetic.
func ago(now, t time.Time) time.Duration { return now.Sub(t).Round(time.Second) }

// pct formats a percentage without trailing zeros: 5, 2.5, 0.25.
func pct(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
