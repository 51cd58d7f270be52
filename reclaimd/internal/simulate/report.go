package simulate

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Report is what a simulation found.
type Report struct {
	// From and To bound the simulated time; Step is the cycle interval and
	// SampleInterval the trace's.
	From           time.Time     `json:"from"`
	To             time.Time     `json:"to"`
	Step           time.Duration `json:"-"`
	SampleInterval time.Duration `json:"-"`
	// Notes are caveats: of the trace's source, of the rules, of the run.
	Notes []string `json:"notes"`
	// Jobs holds every run that overlaps [From, To), by start.
	Jobs []JobTimeline `json:"jobs"`
	// TotalGPUHours is the GPU-hours the runs held within [From, To).
	TotalGPUHours float64 `json:"total_gpu_hours"`
	// IdleGPUHours is the GPU-hours the runs' samples show idle while the
	// runs were judged idle (from a warning or notice until the run
	// recovered, ended or was reclaimed). Only observed time counts: a
	// sample covers at most one sample interval before it, so the time of
	// a gap in the samples is not idle time.
	IdleGPUHours float64 `json:"idle_gpu_hours"`
	// JudgedIdleGPUHours is the GPU-hours the runs held while judged
	// idle, observed or not; ObservedGPUHours the part of it samples
	// cover. IdleCoverage is their ratio: how much of the time judged idle
	// IdleGPUHours rests on.
	JudgedIdleGPUHours float64 `json:"judged_idle_gpu_hours"`
	ObservedGPUHours   float64 `json:"observed_gpu_hours"`
	IdleCoverage       float64 `json:"idle_coverage"`
	// ReclaimedGPUHours is the GPU-hours that requeues and cancels would
	// have freed: each reclaimed run's GPUs from the action to its
	// recorded end (or To).
	ReclaimedGPUHours float64 `json:"reclaimed_gpu_hours"`
	// ReclaimedGPUHoursObserved is what the trace's own later runs ran on
	// the GPUs the simulation freed before the reclaimed runs' recorded
	// ends, as reclaimd counts it (package worth: a run that started on a
	// freed GPU within worth.DefaultGap of its being free). A trace
	// recorded without reclaim shows a GPU's next run starting only once
	// the GPU was really free, so this is what the trace shows, not what
	// a scheduler would have started sooner. StartGainHours sums each
	// such run's start gain (the reclaimed run's recorded end − its
	// start, an estimate); Beneficiaries counts those runs.
	ReclaimedGPUHoursObserved float64 `json:"reclaimed_gpu_hours_observed"`
	StartGainHours            float64 `json:"start_gain_hours"`
	Beneficiaries             int     `json:"beneficiaries"`
	// ByRule sums the reclaims up by the rule that made them.
	ByRule map[string]RuleTotals `json:"by_rule"`
	// JobsTouched counts the runs with any action, warnings included;
	// JobsReclaimed those requeued or cancelled.
	JobsTouched   int `json:"jobs_touched"`
	JobsReclaimed int `json:"jobs_reclaimed"`
	// StaleJobs counts the runs skipped at least once for stale data
	// (missing or old samples): the trace has gaps where they ran.
	StaleJobs int `json:"stale_jobs"`
	// FlaggedJobs counts the runs the rules judged idle at least once (a
	// warning or a notice), as a whole or partly. SlowStarters counts
	// those judged idle as a whole whose trace shows a GPU busy (above
	// the flagging rule's thresholds) after the first such flag, while
	// the run still ran as recorded, outside a signal's wait: jobs that
	// were only slow to start, or paused, and that the rule would have
	// bothered; SlowStartersReclaimed those of them that the rules
	// requeued or cancelled before that first busy sample: work the rule
	// would have cut short.
	//
	// Two kinds of runs are busy after a flag without being slow
	// starters, and are counted apart: BusyInSignalWait, those busy only
	// within a signal's wait (signal.wait after the checkpoint signal:
	// the checkpoint the signal asked for), and PartlyIdleFlagged, those
	// only ever judged partly idle (a partial_idle warning or notice:
	// some GPUs idle while others work, so that a busy GPU is what
	// they were flagged with).
	FlaggedJobs           int `json:"flagged_jobs"`
	SlowStarters          int `json:"slow_starters"`
	SlowStartersReclaimed int `json:"slow_starters_reclaimed"`
	BusyInSignalWait      int `json:"busy_in_signal_wait"`
	PartlyIdleFlagged     int `json:"partly_idle_flagged"`
	// PartlyIdleGPUHours is the GPU time of multi-GPU runs that a
	// whole-job rule cannot reach: time a GPU's samples show idle (under
	// the thresholds of the run's rule) while, at the same sample time,
	// another GPU of the run is busy. A sample stands for at most one
	// sample interval before it, as for IdleGPUHours. PartlyIdleJobs
	// counts the runs with any. A rule's partial_idle reaches some of it.
	PartlyIdleGPUHours float64 `json:"partly_idle_gpu_hours"`
	PartlyIdleJobs     int     `json:"partly_idle_jobs"`
	// ByAction counts the actions by kind ("warn", "cancel", …).
	ByAction map[string]int `json:"by_action"`
	// ByTenant sums the runs up by tenant ("" for none).
	ByTenant map[string]TenantTotals `json:"by_tenant"`
}

// TenantTotals sum up one tenant's runs.
type TenantTotals struct {
	Jobs              int     `json:"jobs"`
	JobsTouched       int     `json:"jobs_touched"`
	JobsReclaimed     int     `json:"jobs_reclaimed"`
	GPUHours          float64 `json:"gpu_hours"`
	IdleGPUHours      float64 `json:"idle_gpu_hours"`
	ReclaimedGPUHours float64 `json:"reclaimed_gpu_hours"`
	// ReclaimedGPUHoursObserved is the tenant's reclaimed runs' part of
	// Report.ReclaimedGPUHoursObserved.
	ReclaimedGPUHoursObserved float64 `json:"reclaimed_gpu_hours_observed"`
}

// RuleTotals sum up the reclaims of one rule.
type RuleTotals struct {
	JobsReclaimed             int     `json:"jobs_reclaimed"`
	ReclaimedGPUHours         float64 `json:"reclaimed_gpu_hours"`
	ReclaimedGPUHoursObserved float64 `json:"reclaimed_gpu_hours_observed"`
}

// Handover is a later run of the trace that started on a GPU a reclaim
// freed, and the time it ran there before the reclaimed run's recorded
// end.
type Handover struct {
	JobID            int64     `json:"job_id"`
	Tenant           string    `json:"tenant,omitempty"`
	GPU              string    `json:"gpu"`
	Start            time.Time `json:"start"`
	GPUSeconds       float64   `json:"gpu_seconds"`
	StartGainSeconds float64   `json:"start_gain_seconds"`
}

// JobTimeline is one run and what the rules did to it.
type JobTimeline struct {
	JobID   int64  `json:"job_id"`
	User    string `json:"user,omitempty"`
	Account string `json:"account,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	GPUs    int    `json:"gpus"`
	// Start and End are the run's, as recorded.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Rule is the rule of the last action, if any.
	Rule   string  `json:"rule,omitempty"`
	Events []Event `json:"events,omitempty"`
	// IdleGPUSeconds is the run's part of Report.IdleGPUHours;
	// JudgedIdleGPUSeconds and ObservedGPUSeconds of the others.
	IdleGPUSeconds       float64 `json:"idle_gpu_seconds"`
	JudgedIdleGPUSeconds float64 `json:"judged_idle_gpu_seconds"`
	ObservedGPUSeconds   float64 `json:"observed_gpu_seconds"`
	// ReclaimedAt is when the run was requeued or cancelled (zero: never);
	// ReclaimedGPUSeconds is GPUs × (End − ReclaimedAt), End clipped to
	// the simulation's To.
	ReclaimedAt         time.Time `json:"reclaimed_at,omitzero"`
	ReclaimedGPUSeconds float64   `json:"reclaimed_gpu_seconds"`
	// ReclaimedGPUSecondsObserved is the sum of HandedTo's GPUSeconds:
	// the runs that started on its freed GPUs (Report.ReclaimedGPUHoursObserved).
	ReclaimedGPUSecondsObserved float64    `json:"reclaimed_gpu_seconds_observed,omitempty"`
	HandedTo                    []Handover `json:"handed_to,omitempty"`
	// StaleCycles counts the cycles the run was skipped for stale data.
	StaleCycles int `json:"stale_cycles,omitempty"`
	// BusyAfterFlagAt is the time of the first sample that shows a GPU of
	// the run busy after the run was first judged idle (zero: none, or
	// never judged idle): see Report.SlowStarters.
	BusyAfterFlagAt time.Time `json:"busy_after_flag_at,omitzero"`
	// BusyInSignalWaitAt is the first such sample within a signal's wait
	// (a checkpoint), which does not make the run a slow starter.
	BusyInSignalWaitAt time.Time `json:"busy_in_signal_wait_at,omitzero"`
	// PartlyIdleGPUSeconds is the run's part of Report.PartlyIdleGPUHours.
	PartlyIdleGPUSeconds float64 `json:"partly_idle_gpu_seconds,omitempty"`
}

// Event is one action on a run.
type Event struct {
	At     time.Time   `json:"at"`
	Kind   decide.Kind `json:"kind"`
	Reason string      `json:"reason"`
	// PartlyIdle marks a warning or notice of a partly idle run (some of
	// its GPUs idle while others work).
	PartlyIdle bool `json:"partly_idle,omitempty"`
}

// textTime is how the text report writes times (always UTC).
const textTime = "2006-01-02 15:04:05"

// WriteText writes the report for people: its notes, the summary, the
// totals per tenant, and the timeline of every run the rules touched.
func (r Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, n := range r.Notes {
		fmt.Fprintf(bw, "NOTE: %s\n", n)
	}
	pct := 0.0
	if r.TotalGPUHours > 0 {
		pct = 100 * r.ReclaimedGPUHours / r.TotalGPUHours
	}
	fmt.Fprintf(bw, "GPU-hours in trace: %.1f, would be reclaimed: %.1f (%.1f %%), jobs touched: %d of %d\n",
		r.TotalGPUHours, r.ReclaimedGPUHours, pct, r.JobsTouched, len(r.Jobs))
	fmt.Fprintf(bw, "reclaimed GPU-hours observed: %.1f of the %.1f bound, handed to %d later runs on the freed GPUs, which started %.1f hours sooner in all (estimated: to the reclaimed runs' recorded ends)\n",
		r.ReclaimedGPUHoursObserved, r.ReclaimedGPUHours, r.Beneficiaries, r.StartGainHours)
	fmt.Fprintf(bw, "GPU-hours seen idle: %.1f (samples cover %.1f %% of the %.1f GPU-hours judged idle), jobs requeued or cancelled: %d, actions: %s\n",
		r.IdleGPUHours, 100*r.IdleCoverage, r.JudgedIdleGPUHours, r.JobsReclaimed, actionCounts(r.ByAction))
	fmt.Fprintf(bw, "simulated %s to %s UTC, a cycle every %s, samples every %s\n",
		r.From.UTC().Format(textTime), r.To.UTC().Format(textTime), r.Step, r.SampleInterval)
	fmt.Fprintf(bw, "jobs judged idle: %d, busy again later in the trace (slow starters): %d, of them requeued or cancelled before they got busy: %d\n",
		r.FlaggedJobs, r.SlowStarters, r.SlowStartersReclaimed)
	fmt.Fprintf(bw, "not slow starters: busy only in a signal's wait (a checkpoint): %d, judged only partly idle (a GPU busy all along): %d\n",
		r.BusyInSignalWait, r.PartlyIdleFlagged)
	fmt.Fprintf(bw, "partly idle GPU-hours (a GPU idle while another of its job works; a whole-job rule cannot reach them): %.1f in %d jobs\n",
		r.PartlyIdleGPUHours, r.PartlyIdleJobs)
	if r.StaleJobs > 0 {
		fmt.Fprintf(bw, "jobs skipped for stale data at least once: %d (the trace has gaps where they ran; see stale_cycles in the JSON report)\n", r.StaleJobs)
	}

	if len(r.ByTenant) > 0 {
		fmt.Fprintln(bw)
		tenants := slices.Collect(maps.Keys(r.ByTenant))
		slices.SortFunc(tenants, func(a, b string) int {
			ta, tb := r.ByTenant[a], r.ByTenant[b]
			if c := cmp.Compare(tb.ReclaimedGPUHours, ta.ReclaimedGPUHours); c != 0 {
				return c
			}
			if c := cmp.Compare(tb.GPUHours, ta.GPUHours); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		width := len("tenant")
		for _, name := range tenants {
			width = max(width, utf8.RuneCountInString(tenantName(name)))
		}
		pad := func(s string) string { return s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
		fmt.Fprintf(bw, "%s  jobs  touched  reclaimed  GPU-hours  idle GPU-hours  reclaimed GPU-hours  observed\n", pad("tenant"))
		for _, name := range tenants {
			t := r.ByTenant[name]
			fmt.Fprintf(bw, "%s  %4d  %7d  %9d  %9.1f  %14.1f  %19.1f  %8.1f\n", pad(tenantName(name)), t.Jobs, t.JobsTouched, t.JobsReclaimed, t.GPUHours, t.IdleGPUHours,
				t.ReclaimedGPUHours, t.ReclaimedGPUHoursObserved)
		}
	}
	if len(r.ByRule) > 0 {
		fmt.Fprintln(bw)
		rules := slices.Sorted(maps.Keys(r.ByRule))
		width := len("rule")
		for _, name := range rules {
			width = max(width, utf8.RuneCountInString(name))
		}
		pad := func(s string) string { return s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
		fmt.Fprintf(bw, "%s  reclaimed  reclaimed GPU-hours  observed\n", pad("rule"))
		for _, name := range rules {
			t := r.ByRule[name]
			fmt.Fprintf(bw, "%s  %9d  %19.1f  %8.1f\n", pad(name), t.JobsReclaimed, t.ReclaimedGPUHours, t.ReclaimedGPUHoursObserved)
		}
	}

	for _, j := range r.Jobs {
		if len(j.Events) == 0 {
			continue
		}
		fmt.Fprintln(bw)
		fmt.Fprintf(bw, "job %d", j.JobID)
		for _, kv := range [][2]string{{"user", j.User}, {"account", j.Account}, {"tenant", j.Tenant}, {"rule", j.Rule}} {
			if kv[1] != "" {
				fmt.Fprintf(bw, "  %s %s", kv[0], kv[1])
			}
		}
		fmt.Fprintf(bw, "  %s  %s to %s (%s)\n", gpuCount(j.GPUs), j.Start.UTC().Format(textTime), j.End.UTC().Format(textTime), j.End.Sub(j.Start))
		for _, e := range j.Events {
			fmt.Fprintf(bw, "  %s  %-12s  %s\n", e.At.UTC().Format(textTime), e.Kind, e.Reason)
		}
		if !j.BusyAfterFlagAt.IsZero() {
			fmt.Fprintf(bw, "  busy again at %s: a slow starter\n", j.BusyAfterFlagAt.UTC().Format(textTime))
		}
		if j.BusyAfterFlagAt.IsZero() && !j.BusyInSignalWaitAt.IsZero() {
			fmt.Fprintf(bw, "  busy at %s, in the signal's wait: a checkpoint, not a slow starter\n", j.BusyInSignalWaitAt.UTC().Format(textTime))
		}
		if !j.ReclaimedAt.IsZero() {
			fmt.Fprintf(bw, "  reclaimed %.2f GPU-hours (%s × %s), idle %.2f GPU-hours\n",
				j.ReclaimedGPUSeconds/3600, gpuCount(j.GPUs), time.Duration(j.ReclaimedGPUSeconds/float64(j.GPUs)*float64(time.Second)).Round(time.Second), j.IdleGPUSeconds/3600)
			fmt.Fprintf(bw, "  observed %.2f GPU-hours handed to %d later runs\n", j.ReclaimedGPUSecondsObserved/3600, len(j.HandedTo))
			for _, h := range j.HandedTo {
				fmt.Fprintf(bw, "    job %d on %s from %s: %.2f GPU-hours, started %s sooner (estimated)\n", h.JobID, h.GPU, h.Start.UTC().Format(textTime),
					h.GPUSeconds/3600, time.Duration(h.StartGainSeconds*float64(time.Second)).Round(time.Second))
			}
		} else {
			fmt.Fprintf(bw, "  not reclaimed, idle %.2f GPU-hours\n", j.IdleGPUSeconds/3600)
		}
	}
	return bw.Flush()
}

// tenantName is how the text report names a tenant.
func tenantName(t string) string {
	if t == "" {
		return "(none)"
	}
	return t
}

// actionCounts writes "cancel 6, warn 11", or "none".
func actionCounts(by map[string]int) string {
	if len(by) == 0 {
		return "none"
	}
	kinds := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, by[k])
	}
	return strings.Join(parts, ", ")
}

func gpuCount(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// WriteJSON writes the report as one indented JSON document, durations as
// Go duration strings ("30s").
func (r Report) WriteJSON(w io.Writer) error {
	type plain Report // without the methods, so that it encodes field by field
	out := struct {
		plain
		Step           string `json:"step"`
		SampleInterval string `json:"sample_interval"`
	}{plain(r), r.Step.String(), r.SampleInterval.String()}
	// Lists, never null: a reader should not need to tell the two apart.
	if out.Notes == nil {
		out.Notes = []string{}
	}
	if out.Jobs == nil {
		out.Jobs = []JobTimeline{}
	}
	if out.ByRule == nil {
		out.ByRule = map[string]RuleTotals{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
