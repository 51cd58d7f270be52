package simulate

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata (review the diff)")

// golden compares got with the file at path, or writes it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; run with -update if the change is right):\n%s", path, diff)
	}
}

// approx compares floats to a part in 10¹², for sums of GPU-seconds.
var approx = cmpopts.EquateApprox(1e-12, 1e-9)

// checkTrace checks what Run relies on: runs with GPUs, end after start,
// ordered by start; samples in order, one per time.
func checkTrace(t *testing.T, tr Trace) {
	t.Helper()
	for i, j := range tr.Jobs {
		if len(j.GPUs) == 0 || !j.End.After(j.Start) {
			t.Fatalf("job %d: %d GPUs, %s to %s", j.ID, len(j.GPUs), j.Start, j.End)
		}
		if i > 0 && j.Start.Before(tr.Jobs[i-1].Start) {
			t.Fatalf("job %d starts before job %d, which comes before it", j.ID, tr.Jobs[i-1].ID)
		}
	}
	for g, ss := range tr.Samples {
		for i := 1; i < len(ss); i++ {
			if !ss[i].At.After(ss[i-1].At) {
				t.Fatalf("%s: samples %d and %d out of order: %s, %s", g, i-1, i, ss[i-1].At, ss[i].At)
			}
		}
	}
}

// t0 is when the hand-written traces begin.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// load is a GPU's utilisation and memory activity at a time since the
// job's start.
type load func(elapsed time.Duration) (util, mem float64)

var (
	idle load = func(time.Duration) (float64, float64) { return 0, 0.3 }
	busy load = func(time.Duration) (float64, float64) { return 90, 40 }
)

// simJob is a hand-written job and the load on all its GPUs.
type simJob struct {
	job  Job
	load load
}

// job is a run on n GPUs of node, from 12:00 to 16:00.
func job(id int64, node string, n int) Job {
	j := Job{ID: id, User: "u" + node, Account: "acct", Tenant: "research", Class: "train", Start: at(0), End: at(4 * time.Hour)}
	for i := range n {
		j.GPUs = append(j.GPUs, decide.GPUKey{Node: node, Index: i})
	}
	return j
}

// trace builds a trace with a sample of every GPU of every job each minute
// of the job, as reclaimd's agent would take them.
func trace(jobs ...simJob) Trace {
	tr := Trace{Samples: map[decide.GPUKey][]decide.Sample{}, SampleInterval: time.Minute}
	for _, sj := range jobs {
		tr.Jobs = append(tr.Jobs, sj.job)
		for _, g := range sj.job.GPUs {
			for s := sj.job.Start.Add(time.Minute); !s.After(sj.job.End); s = s.Add(time.Minute) {
				u, m := sj.load(s.Sub(sj.job.Start))
				tr.Samples[g] = append(tr.Samples[g], decide.Sample{At: s, UtilPercent: u, MemActivityPercent: m, MemUsedMiB: 30500})
			}
		}
	}
	sortJobs(tr.Jobs)
	for g, ss := range tr.Samples {
		slices.SortFunc(ss, func(a, b decide.Sample) int { return a.At.Compare(b.At) })
		tr.Samples[g] = ss
	}
	return tr
}

// trainRules: idle at ≤ 5 % for 30m, warn 15m, SIGUSR1, 5m, requeue.
func trainRules(edit ...func(*reclaimrules.Rules)) reclaimrules.Rules {
	r := reclaimrules.Rules{
		APIVersion: reclaimrules.APIVersion,
		Kind:       reclaimrules.Kind,
		Rules: []reclaimrules.Rule{{
			Name:   "train",
			Idle:   reclaimrules.IdleDef{MaxUtilPercent: 5, MaxMemActivityPercent: 5, Window: reclaimrules.Duration(30 * time.Minute)},
			Warn:   reclaimrules.Duration(15 * time.Minute),
			Signal: reclaimrules.Signal{Name: "USR1", Wait: reclaimrules.Duration(5 * time.Minute), Mode: reclaimrules.SignalBatch},
			Action: reclaimrules.ActionRequeue,
		}},
	}
	for _, e := range edit {
		e(&r)
	}
	return r
}

// timeline is a JobTimeline of job() with events and numbers filled in.
func timeline(j Job, rule string, events []Event, idleGPUSeconds float64, reclaimedAt time.Time) JobTimeline {
	tl := JobTimeline{JobID: j.ID, User: j.User, Account: j.Account, Tenant: j.Tenant, GPUs: len(j.GPUs), Start: j.Start, End: j.End,
		Rule: rule, Events: events, IdleGPUSeconds: idleGPUSeconds, JudgedIdleGPUSeconds: idleGPUSeconds, ObservedGPUSeconds: idleGPUSeconds,
		ReclaimedAt: reclaimedAt}
	if !reclaimedAt.IsZero() {
		tl.ReclaimedGPUSeconds = float64(len(j.GPUs)) * j.End.Sub(reclaimedAt).Seconds()
	}
	return tl
}

func ev(d time.Duration, k decide.Kind) Event { return Event{At: at(d), Kind: k} }

// TestIdleJobTimeline is the whole ladder, exactly: an idle job on 8 GPUs
// is warned when its first 30-minute window is over, signalled 15 minutes
// later, requeued on the first sample after the 5 minutes it had to
// checkpoint, and the 8 GPUs are reclaimed for the 3h9m left until its
// recorded end.
func TestIdleJobTimeline(t *testing.T) {
	j := job(1, "gpu-001", 8)
	rep := Run(trace(simJob{j, idle}), trainRules(), Options{Step: time.Minute})
	seen := "8 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%)"
	want := []JobTimeline{{
		JobID: 1, User: "ugpu-001", Account: "acct", Tenant: "research", GPUs: 8, Start: at(0), End: at(4 * time.Hour), Rule: "train",
		Events: []Event{
			{At: at(30 * time.Minute), Kind: decide.Warn, Reason: seen + "; warning: SIGUSR1 in 15m0s, then requeue 5m0s later, unless the GPUs get busy"},
			{At: at(45 * time.Minute), Kind: decide.Signal, Reason: seen + "; still idle 15m0s after the warning: SIGUSR1, then requeue in 5m0s"},
			{At: at(51 * time.Minute), Kind: decide.Requeue, Reason: "8 of 8 GPUs idle for 1m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%)" +
				"; still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue"},
		},
		IdleGPUSeconds:       8 * (21 * time.Minute).Seconds(),
		JudgedIdleGPUSeconds: 8 * (21 * time.Minute).Seconds(),
		ObservedGPUSeconds:   8 * (21 * time.Minute).Seconds(),
		ReclaimedAt:          at(51 * time.Minute),
		ReclaimedGPUSeconds:  8 * (3*time.Hour + 9*time.Minute).Seconds(), // GPUs × (end − requeue)
	}}
	if diff := cmp.Diff(want, rep.Jobs); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if got, want := rep.ReclaimedGPUHours, 8*(3+9.0/60); math.Abs(got-want) > 1e-9 {
		t.Errorf("ReclaimedGPUHours = %v, want %v", got, want)
	}
}

// TestRun runs hand-written traces through the rules.
func TestRun(t *testing.T) {
	// Busy with a burst every 20 minutes until 1h, then idle.
	burstyThenIdle := func(e time.Duration) (float64, float64) {
		if e <= time.Hour && e%(20*time.Minute) == 0 {
			return 80, 30
		}
		return 0, 0
	}
	// Idle for 40 minutes, then busy.
	idleThenBusy := func(e time.Duration) (float64, float64) {
		if e > 40*time.Minute {
			return busy(e)
		}
		return idle(e)
	}
	noSamples := job(9, "gpu-009", 1)
	firstRun, secondRun := job(10, "gpu-010", 2), job(10, "gpu-010", 2)
	firstRun.End, secondRun.Start = at(time.Hour), at(time.Hour)
	j1, j2 := job(1, "gpu-001", 8), job(2, "gpu-002", 8)

	tests := map[string]struct {
		jobs  []simJob
		rules reclaimrules.Rules
		opt   Options
		trace func(*Trace)
		want  []JobTimeline
	}{
		"idle: warned, signalled, requeued": {
			jobs:  []simJob{{j1, idle}},
			rules: trainRules(),
			want: []JobTimeline{timeline(j1, "train", []Event{ev(30*time.Minute, decide.Warn), ev(45*time.Minute, decide.Signal), ev(51*time.Minute, decide.Requeue)},
				8*21*60, at(51*time.Minute))},
		},
		"busy: untouched": {
			jobs:  []simJob{{j1, busy}},
			rules: trainRules(),
			want:  []JobTimeline{timeline(j1, "", nil, 0, time.Time{})},
		},
		// A burst every 20 minutes keeps every 30-minute window busy; the
		// last burst is the sample at 13:00, so the first idle window is
		// (13:00, 13:30].
		"bursty, then idle: caught": {
			jobs:  []simJob{{job(3, "gpu-003", 4), burstyThenIdle}},
			rules: trainRules(),
			want: []JobTimeline{timeline(job(3, "gpu-003", 4), "train", []Event{ev(90*time.Minute, decide.Warn), ev(105*time.Minute, decide.Signal), ev(111*time.Minute, decide.Requeue)},
				4*21*60, at(111*time.Minute))},
		},
		"exempt user": {
			jobs:  []simJob{{j1, idle}},
			rules: trainRules(func(r *reclaimrules.Rules) { r.Exempt.Users = []string{"ugpu-001"} }),
			want:  []JobTimeline{timeline(j1, "", nil, 0, time.Time{})},
		},
		"busy again after the warning: recovered": {
			jobs:  []simJob{{j1, idleThenBusy}},
			rules: trainRules(),
			// Idle 30 to 40, busy in the sample at 41: ten minutes idle
			// of the eleven judged idle.
			want: func() []JobTimeline {
				tl := timeline(j1, "train", []Event{ev(30*time.Minute, decide.Warn), ev(41*time.Minute, decide.Recover)}, 8*10*60, time.Time{})
				tl.JudgedIdleGPUSeconds, tl.ObservedGPUSeconds = 8*11*60, 8*11*60
				tl.BusyAfterFlagAt = at(41 * time.Minute) // a slow starter
				return []JobTimeline{tl}
			}(),
		},
		"notify only: idle until the end": {
			jobs: []simJob{{j1, idle}},
			rules: trainRules(func(r *reclaimrules.Rules) {
				r.Rules[0].Action, r.Rules[0].Signal = reclaimrules.ActionNotify, reclaimrules.Signal{}
			}),
			want: []JobTimeline{timeline(j1, "train", []Event{ev(30*time.Minute, decide.Notify)}, 8*210*60, time.Time{})},
		},
		// One action per cycle: equal idle time, so the lower job id goes
		// first and the other follows a cycle later.
		"action limit": {
			jobs:  []simJob{{j1, idle}, {j2, idle}},
			rules: trainRules(func(r *reclaimrules.Rules) { r.Limits.MaxActionsPerCycle = 1 }),
			want: []JobTimeline{
				timeline(j1, "train", []Event{ev(30*time.Minute, decide.Warn), ev(45*time.Minute, decide.Signal), ev(51*time.Minute, decide.Requeue)}, 8*21*60, at(51*time.Minute)),
				timeline(j2, "train", []Event{ev(30*time.Minute, decide.Warn), ev(46*time.Minute, decide.Signal), ev(52*time.Minute, decide.Requeue)}, 8*22*60, at(52*time.Minute)),
			},
		},
		// The second run of job 10 is its first requeue, and the rule
		// allows one: it is only notified.
		"requeue limit from the trace's runs": {
			jobs:  []simJob{{firstRun, busy}, {secondRun, idle}},
			rules: trainRules(func(r *reclaimrules.Rules) { r.Rules[0].MaxRequeues = 1 }),
			want: []JobTimeline{
				timeline(firstRun, "", nil, 0, time.Time{}),
				timeline(secondRun, "train", []Event{ev(90*time.Minute, decide.Notify)}, 2*150*60, time.Time{}),
			},
		},
		// Notified at 12:30, and the samples are gone from 13:00 to 14:00:
		// that hour is judged idle but not seen, and is not counted idle.
		"a gap while judged idle: only the time seen idle counts": {
			jobs: []simJob{{j1, idle}},
			rules: trainRules(func(r *reclaimrules.Rules) {
				r.Rules[0].Action, r.Rules[0].Signal = reclaimrules.ActionNotify, reclaimrules.Signal{}
			}),
			trace: func(tr *Trace) {
				for _, g := range j1.GPUs {
					tr.Samples[g] = slices.DeleteFunc(tr.Samples[g], func(s decide.Sample) bool {
						return s.At.After(at(time.Hour)) && !s.At.After(at(2*time.Hour))
					})
				}
			},
			want: func() []JobTimeline {
				tl := timeline(j1, "train", []Event{ev(30*time.Minute, decide.Notify)}, 8*150*60, time.Time{})
				tl.JudgedIdleGPUSeconds = 8 * 210 * 60
				tl.StaleCycles = 81 // from 13:02, until the 30m window is 80 % covered again
				return []JobTimeline{tl}
			}(),
		},
		"no samples: never judged": {
			jobs:  []simJob{{noSamples, idle}},
			rules: trainRules(),
			trace: func(tr *Trace) { delete(tr.Samples, noSamples.GPUs[0]) },
			want: func() []JobTimeline {
				tl := timeline(noSamples, "", nil, 0, time.Time{})
				tl.StaleCycles = 210 // 12:30 to 15:59
				return []JobTimeline{tl}
			}(),
		},
		// From 12:40 to 14:00: the job is judged at once (it has run 40
		// minutes), and only the GPU-hours up to 14:00 count.
		"from and to": {
			jobs:  []simJob{{j1, idle}},
			rules: trainRules(),
			opt:   Options{From: at(40 * time.Minute), To: at(2 * time.Hour)},
			want: func() []JobTimeline {
				tl := timeline(j1, "train", []Event{ev(40*time.Minute, decide.Warn), ev(55*time.Minute, decide.Signal), ev(61*time.Minute, decide.Requeue)}, 8*21*60, at(61*time.Minute))
				tl.ReclaimedGPUSeconds = 8 * (59 * time.Minute).Seconds()
				return []JobTimeline{tl}
			}(),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tr := trace(tt.jobs...)
			if tt.trace != nil {
				tt.trace(&tr)
			}
			opt := tt.opt
			opt.Step = time.Minute
			rep := Run(tr, tt.rules, opt)
			if diff := cmp.Diff(tt.want, rep.Jobs, cmpopts.IgnoreFields(Event{}, "Reason"), approx); diff != "" {
				t.Errorf("timelines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReportTotals checks the sums of a trace with a reclaimed, a busy and
// an exempt job in two tenants.
func TestReportTotals(t *testing.T) {
	reclaimed, working, exempt := job(1, "gpu-001", 8), job(2, "gpu-002", 4), job(3, "gpu-003", 2)
	working.Tenant, exempt.Tenant = "ops", ""
	exempt.Account = "ops-acct"
	rules := trainRules(func(r *reclaimrules.Rules) { r.Exempt.Accounts = []string{"ops-acct"} })
	rep := Run(trace(simJob{reclaimed, idle}, simJob{working, busy}, simJob{exempt, idle}), rules, Options{Step: time.Minute})
	rep.Jobs = nil
	want := Report{
		From: at(0), To: at(4 * time.Hour), Step: time.Minute, SampleInterval: time.Minute,
		TotalGPUHours:      (8 + 4 + 2) * 4,
		IdleGPUHours:       8 * 21.0 / 60,
		JudgedIdleGPUHours: 8 * 21.0 / 60,
		ObservedGPUHours:   8 * 21.0 / 60,
		IdleCoverage:       1,
		ReclaimedGPUHours:  8 * (3 + 9.0/60),
		JobsTouched:        1,
		JobsReclaimed:      1,
		FlaggedJobs:        1,
		ByAction:           map[string]int{"warn": 1, "signal": 1, "requeue": 1},
		// Nothing else ran on the freed GPUs: nothing observed.
		ByRule: map[string]RuleTotals{"train": {JobsReclaimed: 1, ReclaimedGPUHours: 8 * (3 + 9.0/60)}},
		ByTenant: map[string]TenantTotals{
			"research": {Jobs: 1, JobsTouched: 1, JobsReclaimed: 1, GPUHours: 32, IdleGPUHours: 8 * 21.0 / 60, ReclaimedGPUHours: 8 * (3 + 9.0/60)},
			"ops":      {Jobs: 1, GPUHours: 16},
			"":         {Jobs: 1, GPUHours: 8},
		},
	}
	if diff := cmp.Diff(want, rep, approx); diff != "" {
		t.Errorf("Run() (-want +got):\n%s", diff)
	}
}

// TestDryRun: rules in dry-run mode give the same report, with a note.
func TestDryRun(t *testing.T) {
	tr := trace(simJob{job(1, "gpu-001", 8), idle}, simJob{job(2, "gpu-002", 4), busy})
	on := Run(tr, trainRules(), Options{Step: time.Minute})
	dry := Run(tr, trainRules(func(r *reclaimrules.Rules) { r.DryRun = true }), Options{Step: time.Minute})
	if diff := cmp.Diff(on, dry, cmpopts.IgnoreFields(Report{}, "Notes")); diff != "" {
		t.Errorf("dry run vs on (-on +dry):\n%s", diff)
	}
	if on.JobsReclaimed != 1 {
		t.Errorf("JobsReclaimed = %d, want 1", on.JobsReclaimed)
	}
	wantNotes := []string{`the rules are in dry-run mode ("dry_run": true): simulated as if they were on`}
	if diff := cmp.Diff(wantNotes, dry.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

// TestRunNotes covers the reports of runs that cannot act.
func TestRunNotes(t *testing.T) {
	tr := trace(simJob{job(1, "gpu-001", 8), idle})
	tests := map[string]struct {
		tr    Trace
		rules reclaimrules.Rules
		opt   Options
		want  []string
	}{
		"invalid rules": {
			tr: tr, rules: trainRules(func(r *reclaimrules.Rules) { r.APIVersion = "" }),
			want: []string{"the rules do not validate (apiVersion: missing: use strata/v1, and 0 more problems): reclaimd would take no action; check them with `reclaimd check-config`"},
		},
		"empty trace": {
			rules: trainRules(),
			want:  []string{"nothing to simulate: the trace has no jobs, or To is not after From"},
		},
		"too many cycles": {
			tr: tr, rules: trainRules(), opt: Options{Step: time.Nanosecond},
			want: []string{"not simulated: 14400000000000 cycles of 1ns from 2026-11-29T12:00:00Z to 2026-11-29T16:00:00Z is more than 5000000; narrow From and To or lengthen the step"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rep := Run(tt.tr, tt.rules, tt.opt)
			if diff := cmp.Diff(tt.want, rep.Notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			if rep.JobsTouched != 0 {
				t.Errorf("JobsTouched = %d, want 0", rep.JobsTouched)
			}
		})
	}
}

// TestExample is the example trace of testdata, written by hand in the
// documented format, and its golden reports.
func TestExample(t *testing.T) {
	tr, err := LoadTrace(filepath.Join("testdata", "example.jobs.csv"), filepath.Join("testdata", "example.samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.SampleInterval != 5*time.Minute {
		t.Errorf("SampleInterval = %s, want 5m0s", tr.SampleInterval)
	}
	rep := Run(tr, loadRules(t, filepath.Join("testdata", "example-rules.json")), Options{Step: time.Minute})
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "example.report.golden"), text.Bytes())
	golden(t, filepath.Join("testdata", "example.report.json.golden"), js.Bytes())
	if !strings.HasPrefix(text.String(), "GPU-hours in trace: ") {
		t.Errorf("the report does not open with the summary:\n%s", text.String())
	}
}
