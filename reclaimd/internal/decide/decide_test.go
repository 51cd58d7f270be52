package decide_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// t0 is when the test jobs start; now is two hours later, when they are
// judged.
var (
	t0  = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now = t0.Add(2 * time.Hour)
)

const interval = 30 * time.Second

func at(d time.Duration) time.Time { return t0.Add(d) }

// gpus returns GPUs 0..n-1 of a node.
func gpus(node string, n int) []decide.GPUKey {
	k := make([]decide.GPUKey, n)
	for i := range k {
		k[i] = decide.GPUKey{Node: node, Index: i}
	}
	return k
}

// job is a running llm job on the given GPUs, started at t0.
func job(id int64, g []decide.GPUKey) decide.Job {
	return decide.Job{
		ID: id, User: "ana", Account: "llm-pretrain", Tenant: "llm", Class: "train", QOS: "normal", Partition: "gpu",
		Start: t0, GPUs: g,
	}
}

// load is a GPU's load at a time: utilisation and memory activity.
type load func(t time.Time) (util, mem float64)

func flat(util, mem float64) load { return func(time.Time) (float64, float64) { return util, mem } }

// until is busy before t, then l.
func until(t time.Time, busy, l load) load {
	return func(x time.Time) (float64, float64) {
		if x.Before(t) {
			return busy(x)
		}
		return l(x)
	}
}

// samples gives every GPU in g a sample each interval in (from, to].
func samples(m map[decide.GPUKey][]decide.Sample, g []decide.GPUKey, from, to time.Time, l load) map[decide.GPUKey][]decide.Sample {
	if m == nil {
		m = map[decide.GPUKey][]decide.Sample{}
	}
	for _, k := range g {
		for t := from.Add(interval); !t.After(to); t = t.Add(interval) {
			u, mem := l(t)
			m[k] = append(m[k], decide.Sample{At: t, UtilPercent: u, MemActivityPercent: mem, MemUsedMiB: 40000})
		}
	}
	return m
}

// llmRules: llm jobs are judged over 30 minutes at 5 %, warned 15 minutes,
// signalled USR1 5 minutes, then requeued; partly idle llm jobs (2 idle
// GPUs or more) are notified. Everyone else is only notified after an hour.
func llmRules(edit ...func(r *reclaimrules.Rules)) reclaimrules.Rules {
	r := reclaimrules.Rules{
		APIVersion: reclaimrules.APIVersion,
		Kind:       reclaimrules.Kind,
		Rules: []reclaimrules.Rule{{
			Name:        "llm",
			Match:       reclaimrules.Match{Tenants: []string{"llm"}},
			Idle:        reclaimrules.IdleDef{MaxUtilPercent: 5, MaxMemActivityPercent: 5, Window: reclaimrules.Duration(30 * time.Minute)},
			PartialIdle: reclaimrules.PartialIdle{Enabled: true, MinIdleGPUs: 2},
			Warn:        reclaimrules.Duration(15 * time.Minute),
			Signal:      reclaimrules.Signal{Name: "USR1", Wait: reclaimrules.Duration(5 * time.Minute), Mode: reclaimrules.SignalBatch},
			Action:      reclaimrules.ActionRequeue,
		}, {
			Name:  "default",
			Match: reclaimrules.Match{Tenants: []string{"vision", "audio"}},
		}},
		Exempt: reclaimrules.Exemptions{Accounts: []string{"ops"}, Users: []string{"root"}, QOS: []string{"bench"}, Partitions: []string{"maint"}},
	}
	for _, e := range edit {
		e(&r)
	}
	return r
}

// The reasons most cases share.
const (
	idle8 = "8 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%)"
	// idle8After is idle8 over the minute since a signal's wait ended.
	idle8After = "8 of 8 GPUs idle for 1m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%)"
	warnPlan   = "; warning: SIGUSR1 in 15m0s, then requeue 5m0s later, unless the GPUs get busy"
)

type decideTest struct {
	jobs    []decide.Job
	samples map[decide.GPUKey][]decide.Sample
	states  map[int64]decide.JobState
	rules   reclaimrules.Rules // llmRules() when zero
	now     time.Time          // now when zero
	taken   time.Time          // the snapshot's time; now when zero
	// sourceDown and slurmDown make the snapshot say a source failed.
	sourceDown, slurmDown bool
	// mismatched is the snapshot's Mismatched, placed its Placed.
	mismatched map[string]string
	placed     map[int64]bool

	wantActions []decide.Action // compared without Evidence
	wantSkipped []decide.Skip
	wantStates  map[int64]decide.JobState // not compared when nil
	// wantUpcoming is the next step if the GPUs stay idle; not compared
	// when nil.
	wantUpcoming map[int64]decide.Upcoming
}

// idleJob is job 1 on 8 GPUs of gpu-001, idle for its whole life.
func idleJob() ([]decide.Job, map[decide.GPUKey][]decide.Sample) {
	g := gpus("gpu-001", 8)
	return []decide.Job{job(1, g)}, samples(nil, g, t0, now, flat(0, 0.3))
}

// warned is job 1's state after a warning d before now.
func warned(d time.Duration) decide.JobState {
	return decide.JobState{Phase: decide.Warned, Since: now.Add(-d), RunStart: t0, WarnedAt: now.Add(-d), Rule: "llm", Actions: 1}
}

func signalled(d time.Duration) decide.JobState {
	return decide.JobState{Phase: decide.Signalled, Since: now.Add(-d), RunStart: t0, WarnedAt: now.Add(-d - 15*time.Minute),
		SignalledAt: now.Add(-d), Rule: "llm", Actions: 2}
}

var decideTests = map[string]decideTest{
	"idle: first verdict warns": {
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm", Reason: idle8 + warnPlan}},
		wantStates: map[int64]decide.JobState{
			1: {Phase: decide.Warned, Since: now, RunStart: t0, WarnedAt: now, Rule: "llm", Actions: 1},
		},
		// The warning's plan: the signal in the rule's 15 minutes.
		wantUpcoming: map[int64]decide.Upcoming{1: {Kind: decide.Signal, At: now.Add(15 * time.Minute)}},
	},
	"busy": {
		samples:     samples(nil, gpus("gpu-001", 8), t0, now, flat(80, 30)),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipBusy, Detail: "8 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 80.0%, 30.0%)"}},
		wantStates:  map[int64]decide.JobState{1: {Phase: decide.Observed, Since: now, RunStart: t0, Rule: "llm"}},
		// Idle from now, the warning comes a whole window later.
		wantUpcoming: map[int64]decide.Upcoming{1: {Kind: decide.Warn, At: now.Add(30 * time.Minute)}},
	},
	"bursty then idle: busy for 80 minutes, idle for the last 40, is caught": {
		// Its average over its life is 60 % utilisation: an average
		// would call it busy.
		samples:     samples(nil, gpus("gpu-001", 8), t0, now, until(at(80*time.Minute), flat(90, 60), flat(0, 0.3))),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm", Reason: idle8 + warnPlan}},
	},
	"one burst inside the window keeps the job": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			m := samples(nil, gpus("gpu-001", 8), t0, now, flat(0, 0.3))
			for _, s := range m {
				s[len(s)-20].UtilPercent = 60 // ten minutes ago, one sample
			}
			return m
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipBusy, Detail: "8 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 60.0%, 0.3%)"}},
	},
	"memory-busy: low utilisation, high memory activity": {
		samples:     samples(nil, gpus("gpu-001", 8), t0, now, flat(2, 45)),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipBusy, Detail: "8 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 2.0%, 45.0%)"}},
	},
	"memory in use is not activity": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			m := samples(nil, gpus("gpu-001", 8), t0, now, flat(0, 0.3))
			for _, s := range m {
				for i := range s {
					s[i].MemUsedMiB = 79000 // a model loaded and left there
				}
			}
			return m
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm", Reason: idle8 + warnPlan}},
	},
	"partly idle: 5 of 8 idle, notified at once": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g[:3], t0, now, flat(85, 40))
			return samples(m, g[3:], t0, now, flat(0, 0))
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: "5 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.0%); notify only"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Notified, Since: now, RunStart: t0, Rule: "llm", Partial: true, Actions: 1}},
	},
	"partly idle with a destructive partial action warns first": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].PartialIdle.Action = reclaimrules.ActionRequeueHold }),
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g[:6], t0, now, flat(85, 40))
			return samples(m, g[6:], t0, now, flat(1, 0))
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm",
			Reason: "2 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 1.0%, 0.0%); warning: SIGUSR1 in 15m0s, then requeue and hold 5m0s later, unless the GPUs get busy"}},
	},
	"partly idle below min_idle_gpus is busy": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g[:7], t0, now, flat(85, 40))
			return samples(m, g[7:], t0, now, flat(0, 0))
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipBusy, Detail: "7 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 85.0%, 40.0%)"}},
	},
	"partly idle when partial_idle is off is busy": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].PartialIdle = reclaimrules.PartialIdle{} }),
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g[:1], t0, now, flat(85, 40))
			return samples(m, g[1:], t0, now, flat(0, 0))
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipBusy, Detail: "1 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 85.0%, 40.0%)"}},
	},
	"stale data: samples stopped five minutes ago": {
		samples:     samples(nil, gpus("gpu-001", 8), t0, now.Add(-5*time.Minute), flat(0, 0)),
		states:      map[int64]decide.JobState{1: warned(20 * time.Minute)},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipStaleData, Detail: "gpu-001:0: newest sample 5m0s old, expected every 30s"}},
		wantStates:  map[int64]decide.JobState{1: warned(20 * time.Minute)},
	},
	"stale data: a ten-minute gap in the window": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g, t0, now.Add(-20*time.Minute), flat(0, 0))
			return samples(m, g, now.Add(-10*time.Minute), now, flat(0, 0))
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipStaleData, Detail: "gpu-001:0: samples cover 67% of the 30m0s window, need 80%"}},
	},
	"stale data: one GPU never reported": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			return samples(nil, g[:7], t0, now, flat(0, 0))
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipStaleData, Detail: "gpu-001:7: no samples in the 30m0s window"}},
	},
	"stale data: a NaN sample": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			m := samples(nil, gpus("gpu-001", 8), t0, now, flat(0, 0))
			k := decide.GPUKey{Node: "gpu-001", Index: 2}
			m[k][len(m[k])-1].MemActivityPercent = math.NaN()
			return m
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipStaleData, Detail: "gpu-001:2: a sample has no value (NaN)"}},
	},
	"samples after now are not read": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			return samples(samples(nil, gpus("gpu-001", 8), t0, now, flat(0, 0.3)), gpus("gpu-001", 8), now, now.Add(time.Minute), flat(99, 99))
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm", Reason: idle8 + warnPlan}},
	},
	"exempt by account, user, QOS and partition": {
		jobs: func() []decide.Job {
			var jobs []decide.Job
			for i, edit := range []func(j *decide.Job){
				func(j *decide.Job) { j.Account = "ops" },
				func(j *decide.Job) { j.User = "root" },
				func(j *decide.Job) { j.QOS = "bench" },
				func(j *decide.Job) { j.Partition = "maint" },
			} {
				j := job(int64(i+1), gpus(fmt.Sprintf("gpu-%03d", i+1), 8))
				edit(&j)
				jobs = append(jobs, j)
			}
			return jobs
		}(),
		samples: func() map[decide.GPUKey][]decide.Sample {
			var m map[decide.GPUKey][]decide.Sample
			for i := 1; i <= 4; i++ {
				m = samples(m, gpus(fmt.Sprintf("gpu-%03d", i), 8), t0, now, flat(0, 0))
			}
			return m
		}(),
		// A job exempted while warned leaves the ladder.
		states: map[int64]decide.JobState{4: warned(10 * time.Minute)},
		wantSkipped: []decide.Skip{
			{JobID: 1, Reason: decide.SkipExempt, Detail: `account "ops" is exempt`},
			{JobID: 2, Reason: decide.SkipExempt, Detail: `user "root" is exempt`},
			{JobID: 3, Reason: decide.SkipExempt, Detail: `QOS "bench" is exempt`},
			{JobID: 4, Reason: decide.SkipExempt, Detail: `partition "maint" is exempt`},
		},
		wantStates: map[int64]decide.JobState{
			1: {Phase: decide.Observed, Since: now, RunStart: t0},
			2: {Phase: decide.Observed, Since: now, RunStart: t0},
			3: {Phase: decide.Observed, Since: now, RunStart: t0},
			4: {Phase: decide.Observed, Since: now, RunStart: t0},
		},
	},
	"no rule": {
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.Tenant = "bio"
			return []decide.Job{j}
		}(),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipNoRule,
			Detail: `no rule matches tenant "bio", account "llm-pretrain", user "ana", class "train", QOS "normal", partition "gpu"`}},
	},
	"requeue limit: at the limit, notified at once and told why": {
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.Requeues = 3
			return []decide.Job{j}
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: idle8 + "; requeue limit reached (3 of 3 requeues): notify only"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Notified, Since: now, RunStart: t0, Rule: "llm", Actions: 1}},
	},
	"requeue limit: the rule's limit is lower than the global one": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].MaxRequeues = 1 }),
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.Requeues = 1
			return []decide.Job{j}
		}(),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue limit reached (1 of 1 requeues): notify only"}},
	},
	"--no-requeue: only notified, at once": {
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.NoRequeue = true
			return []decide.Job{j}
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: idle8 + "; submitted with --no-requeue (the rule's no_requeue is skip): notify only"}},
	},
	"het component: a requeue would requeue the whole het job, so only notified": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].NoRequeue = reclaimrules.NoRequeueOverride }),
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.HetComponent = true
			return []decide.Job{j}
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: idle8 + "; a component of a heterogeneous job, which Slurm requeues only whole (the other components too): notify only"}},
	},
	"het leader: a cancel would end every component, so only notified": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Action = reclaimrules.ActionCancel }),
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.HetComponent, j.HetLeader = true, true
			return []decide.Job{j}
		}(),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: idle8 + "; the leader of a heterogeneous job, which runs its batch script: cancelling it ends every component: notify only"}},
	},
	"het component: cancelled alone": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Action = reclaimrules.ActionCancel }),
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.HetComponent = true
			return []decide.Job{j}
		}(),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Cancel, Rule: "llm",
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: cancel"}},
	},
	"--no-requeue, the rule overrides: requeued, and says so": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].NoRequeue = reclaimrules.NoRequeueOverride }),
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.NoRequeue = true
			return []decide.Job{j}
		}(),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Requeue, Rule: "llm",
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: submitted with --no-requeue, made requeueable by the rule's no_requeue: requeue: requeue"}},
	},
	"requeue limit: under it, requeued": {
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.Requeues = 2
			return []decide.Job{j}
		}(),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Requeue, Rule: "llm",
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue"}},
	},
	"metrics source failing: no action, states kept": {
		sourceDown: true,
		states:     map[int64]decide.JobState{1: warned(20 * time.Minute)},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipSourceFailing,
			Detail: "the GPU metrics source did not answer this cycle: no action until it does"}},
		wantStates: map[int64]decide.JobState{1: warned(20 * time.Minute)},
	},
	"slurmrestd failing: no action": {
		slurmDown: true,
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipSlurmFailing,
			Detail: "slurmrestd did not answer this cycle: no action until it does"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Observed, Since: now, RunStart: t0}},
	},
	"old snapshot: no action": {
		taken: now.Add(-3 * time.Minute),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipOldSnapshot,
			Detail: "snapshot taken 3m0s before the decision, more than twice the 30s sample interval"}},
	},
	"invalid rules: no action": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Action = "shoot" }),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipInvalidRules,
			Detail: `rules[0].action: "shoot": want one of notify, requeue, requeue-hold, cancel`}},
	},
	"startup grace": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].StartupGrace = reclaimrules.Duration(3 * time.Hour) }),
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipStartupGrace,
			Detail: "started 2h0m0s ago; startup grace 3h0m0s"}},
		wantUpcoming: map[int64]decide.Upcoming{1: {Kind: decide.Warn, At: t0.Add(3 * time.Hour)}},
	},
	"young job: not judged before its window": {
		now:          t0.Add(20 * time.Minute),
		samples:      samples(nil, gpus("gpu-001", 8), t0, t0.Add(20*time.Minute), flat(0, 0)),
		wantSkipped:  []decide.Skip{{JobID: 1, Reason: decide.SkipTooYoung, Detail: "ran 20m0s; first judged at 30m0s"}},
		wantUpcoming: map[int64]decide.Upcoming{1: {Kind: decide.Warn, At: t0.Add(30 * time.Minute)}},
	},
	"first window: idle for its first 20 minutes, judged at 15": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].FirstWindow = reclaimrules.Duration(15 * time.Minute) }),
		now:   t0.Add(20 * time.Minute),
		// The job before it worked on the same GPUs until it started.
		samples: samples(samples(nil, gpus("gpu-001", 8), t0.Add(-time.Hour), t0, flat(99, 80)),
			gpus("gpu-001", 8), t0, t0.Add(20*time.Minute), flat(0, 0.3)),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm",
			Reason: "8 of 8 GPUs idle for 20m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%)" + warnPlan}},
	},
	"first window: not yet reached": {
		rules:        llmRules(func(r *reclaimrules.Rules) { r.Rules[0].FirstWindow = reclaimrules.Duration(15 * time.Minute) }),
		now:          t0.Add(10 * time.Minute),
		samples:      samples(nil, gpus("gpu-001", 8), t0, t0.Add(10*time.Minute), flat(0, 0)),
		wantSkipped:  []decide.Skip{{JobID: 1, Reason: decide.SkipTooYoung, Detail: "ran 10m0s; first judged at 15m0s"}},
		wantUpcoming: map[int64]decide.Upcoming{1: {Kind: decide.Warn, At: t0.Add(15 * time.Minute)}},
	},
	"warned, waiting": {
		states:       map[int64]decide.JobState{1: warned(10 * time.Minute)},
		wantSkipped:  []decide.Skip{{JobID: 1, Reason: decide.SkipWaiting, Detail: "warned 10m0s ago; next step in 5m0s"}},
		wantStates:   map[int64]decide.JobState{1: warned(10 * time.Minute)},
		wantUpcoming: map[int64]decide.Upcoming{1: {Kind: decide.Signal, At: now.Add(5 * time.Minute)}},
	},
	"warned, still idle: signalled": {
		states: map[int64]decide.JobState{1: warned(15 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Signal, Signal: "SIGUSR1", SignalMode: reclaimrules.SignalBatch, Rule: "llm",
			Reason: idle8 + "; still idle 15m0s after the warning: SIGUSR1, then requeue in 5m0s"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Signalled, Since: now, RunStart: t0,
			WarnedAt: now.Add(-15 * time.Minute), SignalledAt: now, Rule: "llm", Actions: 2}},
	},
	"signal mode skip-unless-requested: a job that did not ask is warned of the requeue alone": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Signal.Mode = "" }),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm",
			Reason: idle8 + "; warning: requeue in 15m0s unless the GPUs get busy"}},
	},
	"signal mode skip-unless-requested: a job that did not ask is requeued without the signal": {
		rules:  llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Signal.Mode = reclaimrules.SignalSkipUnlessRequested }),
		states: map[int64]decide.JobState{1: warned(15 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Requeue, Rule: "llm",
			Reason: idle8 + "; still idle 15m0s after the warning: requeue"}},
	},
	"signal mode skip-unless-requested: a job that asked is signalled": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Signal.Mode = "" }),
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 8))
			j.SignalRequested = true
			return []decide.Job{j}
		}(),
		states: map[int64]decide.JobState{1: warned(15 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Signal, Signal: "SIGUSR1", SignalMode: reclaimrules.SignalSkipUnlessRequested, Rule: "llm",
			Reason: idle8 + "; still idle 15m0s after the warning: SIGUSR1, then requeue in 5m0s"}},
	},
	"signal mode all-steps: every job is signalled": {
		rules:  llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Signal.Mode = reclaimrules.SignalAllSteps }),
		states: map[int64]decide.JobState{1: warned(15 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Signal, Signal: "SIGUSR1", SignalMode: reclaimrules.SignalAllSteps, Rule: "llm",
			Reason: idle8 + "; still idle 15m0s after the warning: SIGUSR1, then requeue in 5m0s"}},
	},
	"warned, still idle, no signal in the rule: cancelled": {
		rules: llmRules(func(r *reclaimrules.Rules) {
			r.Rules[0].Signal = reclaimrules.Signal{}
			r.Rules[0].Action = reclaimrules.ActionCancel
		}),
		states: map[int64]decide.JobState{1: warned(16 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Cancel, Rule: "llm",
			Reason: idle8 + "; still idle 16m0s after the warning: cancel"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Cancelled, Since: now, RunStart: t0,
			WarnedAt: now.Add(-16 * time.Minute), Rule: "llm", Actions: 2}},
	},
	"signalled, waiting": {
		states: map[int64]decide.JobState{1: signalled(2 * time.Minute)},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipWaiting,
			Detail: "signalled 2m0s ago; requeue in 3m0s, if fresh samples then show the GPUs still idle"}},
	},
	"signalled, still idle: requeued and hold": {
		rules:  llmRules(func(r *reclaimrules.Rules) { r.Rules[0].Action = reclaimrules.ActionRequeueHold }),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.RequeueHold, Rule: "llm",
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue and hold"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Requeued, Since: now, RunStart: t0,
			WarnedAt: now.Add(-21 * time.Minute), SignalledAt: now.Add(-6 * time.Minute), Rule: "llm", Actions: 3}},
	},
	"signalled, the wait just over: no sample after it yet, waits": {
		states: map[int64]decide.JobState{1: signalled(5 * time.Minute)},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipWaiting,
			Detail: "signalled 5m0s ago; requeue in 0s, if fresh samples then show the GPUs still idle"}},
		wantStates: map[int64]decide.JobState{1: signalled(5 * time.Minute)},
	},
	"signalled, busy writing its checkpoint during the wait, idle after: requeued": {
		samples: samples(nil, gpus("gpu-001", 8), t0, now, func(t time.Time) (float64, float64) {
			if t.After(now.Add(-6*time.Minute)) && t.Before(now.Add(-90*time.Second)) {
				return 30, 90
			}
			return 0, 0.3
		}),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Requeue, Rule: "llm",
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue"}},
	},
	"signalled, busy after the wait: abandoned, watched again": {
		samples: samples(nil, gpus("gpu-001", 8), t0, now, until(now.Add(-4*time.Minute), flat(0, 0.3), flat(95, 60))),
		states:  map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Recover, Rule: "llm",
			Reason: "busy after the signal's wait: 8 of 8 GPUs above util 5% or memory activity 5% in the last 1m0s (max seen 95.0%, 60.0%); " +
				"the requeue after SIGUSR1 is abandoned and the job watched again"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Recovered, Since: now, RunStart: t0, Rule: "llm", Actions: 3}},
	},
	"signalled, samples missing after the wait: waits for them": {
		samples: samples(nil, gpus("gpu-001", 8), t0, now.Add(-10*time.Minute), flat(0, 0.3)),
		states:  map[int64]decide.JobState{1: signalled(7 * time.Minute)},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipStaleData,
			Detail: "signalled 7m0s ago; the requeue waits for fresh samples after the 5m0s wait, abandoned in 3m0s without them: gpu-001:0: no samples in the 2m0s window"}},
		wantStates: map[int64]decide.JobState{1: signalled(7 * time.Minute)},
	},
	// Samples gone after the signal and back, idle, 1 h 39 min later: the
	// job has been running unseen for most of that time, and is not
	// requeued on ten minutes of samples.
	"signalled, samples gone past the bound and back: abandoned, not requeued": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g, t0, now.Add(-99*time.Minute), flat(0, 0.3))
			return samples(m, g, now.Add(-10*time.Minute), now, flat(0, 0.3))
		}(),
		states: map[int64]decide.JobState{1: signalled(99 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Recover, Rule: "llm",
			Reason: "no fresh samples for 1h34m0s after the 5m0s wait (gpu-001:0: samples cover 11% of the 1h34m0s window, need 80%); " +
				"the requeue after SIGUSR1 is abandoned and the job watched again"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Recovered, Since: now, RunStart: t0, Rule: "llm", Actions: 3}},
	},
	"recovery: busy again after the warning": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g[:1], t0, now, flat(0, 0.3))
			return samples(m, g[1:], t0, now, until(now.Add(-2*time.Minute), flat(0, 0.3), flat(97, 50)))
		}(),
		states: map[int64]decide.JobState{1: warned(10 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Recover, Rule: "llm",
			Reason: "busy again: 7 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 97.0%, 50.0%); the reclaim is withdrawn"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Recovered, Since: now, RunStart: t0, Rule: "llm", Actions: 2}},
	},
	"recovery: busy again after a notice": {
		samples: samples(nil, gpus("gpu-001", 8), t0, now, until(now.Add(-time.Minute), flat(0, 0), flat(50, 50))),
		states:  map[int64]decide.JobState{1: {Phase: decide.Notified, Since: now.Add(-time.Hour), RunStart: t0, Rule: "llm", Actions: 1}},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Recover, Rule: "llm",
			Reason: "busy again: 8 of 8 GPUs above util 5% or memory activity 5% in the last 30m0s (max seen 50.0%, 50.0%); the reclaim is withdrawn"}},
	},
	"warned, then one GPU busy again: partly idle, its own end action": {
		samples: func() map[decide.GPUKey][]decide.Sample {
			g := gpus("gpu-001", 8)
			m := samples(nil, g[1:], t0, now, flat(0, 0.3))
			return samples(m, g[:1], t0, now, until(now.Add(-2*time.Minute), flat(0, 0.3), flat(97, 50)))
		}(),
		states: map[int64]decide.JobState{1: warned(15 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "llm",
			Reason: "7 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.3%); still idle 15m0s after the warning: notify only"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Notified, Since: now, RunStart: t0, WarnedAt: now.Add(-15 * time.Minute),
			Rule: "llm", Partial: true, Actions: 2}},
	},
	"notified and still idle: nothing more": {
		states:      map[int64]decide.JobState{1: {Phase: decide.Notified, Since: now.Add(-time.Hour), RunStart: t0, Rule: "llm", Actions: 1}},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipNotified, Detail: "notified 1h0m0s ago; still idle"}},
	},
	"requeued, Slurm still lists the run": {
		states:      map[int64]decide.JobState{1: {Phase: decide.Requeued, Since: now.Add(-time.Minute), RunStart: t0, Rule: "llm", Actions: 3}},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipActed, Detail: "requeued 1m0s ago; Slurm still lists the run as running"}},
	},
	"requeued, running again: a new ladder": {
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-002", 8))
			j.Start, j.Requeues = now.Add(-40*time.Minute), 1
			return []decide.Job{j}
		}(),
		samples:     samples(nil, gpus("gpu-002", 8), now.Add(-40*time.Minute), now, flat(0, 0.3)),
		states:      map[int64]decide.JobState{1: {Phase: decide.Requeued, Since: now.Add(-time.Hour), RunStart: t0, Rule: "llm", Actions: 3}},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm", Reason: idle8 + warnPlan}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Warned, Since: now, RunStart: now.Add(-40 * time.Minute),
			WarnedAt: now, Rule: "llm", Actions: 1}},
	},
	"action limit: the most idle GPU-time goes first": {
		rules: llmRules(func(r *reclaimrules.Rules) { r.Limits.MaxActionsPerCycle = 2 }),
		jobs: []decide.Job{
			job(1, gpus("gpu-001", 2)),
			job(2, gpus("gpu-002", 8)),
			job(3, gpus("gpu-003", 4)),
			job(4, gpus("gpu-004", 4)), // first seen idle: a warning is not capped
			job(5, gpus("gpu-005", 1)),
		},
		samples: func() map[decide.GPUKey][]decide.Sample {
			var m map[decide.GPUKey][]decide.Sample
			for i, n := range []int{2, 8, 4, 4, 1} {
				m = samples(m, gpus(fmt.Sprintf("gpu-%03d", i+1), n), t0, now, flat(0, 0))
			}
			return m
		}(),
		states: map[int64]decide.JobState{
			1: warned(15 * time.Minute),
			2: warned(15 * time.Minute),
			3: warned(15 * time.Minute),
			5: warned(50 * time.Minute), // 1 GPU × 80 min is less than 4 × 45
		},
		wantActions: []decide.Action{
			{JobID: 2, Kind: decide.Signal, Signal: "SIGUSR1", SignalMode: reclaimrules.SignalBatch, Rule: "llm",
				Reason: "8 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.0%); still idle 15m0s after the warning: SIGUSR1, then requeue in 5m0s"},
			{JobID: 3, Kind: decide.Signal, Signal: "SIGUSR1", SignalMode: reclaimrules.SignalBatch, Rule: "llm",
				Reason: "4 of 4 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.0%); still idle 15m0s after the warning: SIGUSR1, then requeue in 5m0s"},
			{JobID: 4, Kind: decide.Warn, Rule: "llm",
				Reason: "4 of 4 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.0%)" + warnPlan},
		},
		wantSkipped: []decide.Skip{
			{JobID: 1, Reason: decide.SkipActionLimit, Detail: "signal deferred: at most 2 signals, requeues and cancels per cycle, the most idle GPU-time first"},
			{JobID: 5, Reason: decide.SkipActionLimit, Detail: "signal deferred: at most 2 signals, requeues and cancels per cycle, the most idle GPU-time first"},
		},
		wantStates: map[int64]decide.JobState{
			1: warned(15 * time.Minute),
			2: {Phase: decide.Signalled, Since: now, RunStart: t0, WarnedAt: now.Add(-15 * time.Minute), SignalledAt: now, Rule: "llm", Actions: 2},
			3: {Phase: decide.Signalled, Since: now, RunStart: t0, WarnedAt: now.Add(-15 * time.Minute), SignalledAt: now, Rule: "llm", Actions: 2},
			4: {Phase: decide.Warned, Since: now, RunStart: t0, WarnedAt: now, Rule: "llm", Actions: 1},
			5: warned(50 * time.Minute),
		},
	},
	"dry run: decided and recorded, states advance": {
		rules:  llmRules(func(r *reclaimrules.Rules) { r.DryRun = true }),
		states: map[int64]decide.JobState{1: signalled(6 * time.Minute)},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Requeue, Rule: "llm", DryRun: true,
			Reason: idle8After + "; still idle 6m0s after SIGUSR1, past its 5m0s wait: requeue"}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Requeued, Since: now, RunStart: t0,
			WarnedAt: now.Add(-21 * time.Minute), SignalledAt: now.Add(-6 * time.Minute), Rule: "llm", Actions: 3}},
	},
	"other tenants: notify only, after the default hour": {
		jobs: func() []decide.Job {
			j := job(1, gpus("gpu-001", 1))
			j.Tenant = "vision"
			return []decide.Job{j}
		}(),
		samples: samples(nil, gpus("gpu-001", 1), t0, now, flat(0, 0)),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Notify, Rule: "default",
			Reason: "1 of 1 GPU idle for 1h0m0s: util ≤ 0%, memory activity ≤ 0% (max seen 0.0%, 0.0%); notify only"}},
	},
	"GPU map mismatch, the job placed by the node's map: judged": {
		jobs:       []decide.Job{job(1, gpus("gpu-002", 8))},
		samples:    samples(nil, gpus("gpu-002", 8), t0, now, flat(0, 0)),
		mismatched: map[string]string{"gpu-002": "job 9 runs on GPU 3 (NVML), which Slurm gives to job 1"},
		placed:     map[int64]bool{1: true},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm",
			Reason: "8 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.0%)" + warnPlan}},
		wantStates: map[int64]decide.JobState{1: {Phase: decide.Warned, Since: now, RunStart: t0, WarnedAt: now, Rule: "llm", Actions: 1}},
	},
	"GPU map mismatch: no job with a GPU on the node is judged, its state kept": {
		jobs:       []decide.Job{job(1, append(gpus("gpu-001", 8), gpus("gpu-002", 8)...)), job(2, gpus("gpu-003", 8))},
		samples:    samples(samples(samples(nil, gpus("gpu-001", 8), t0, now, flat(0, 0)), gpus("gpu-002", 8), t0, now, flat(0, 0)), gpus("gpu-003", 8), t0, now, flat(0, 0)),
		states:     map[int64]decide.JobState{1: {Phase: decide.Warned, Since: now.Add(-time.Hour), WarnedAt: now.Add(-time.Hour), RunStart: t0, Rule: "llm", Actions: 1}},
		mismatched: map[string]string{"gpu-002": "job 9 runs on GPU 3 (NVML), which Slurm gives to job 1"},
		wantActions: []decide.Action{{JobID: 2, Kind: decide.Warn, Rule: "llm",
			Reason: "8 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 0.0%, 0.0%)" + warnPlan}},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipGPUMismatch, Detail: "gpu-002: job 9 runs on GPU 3 (NVML), which Slurm gives to job 1"}},
		wantStates: map[int64]decide.JobState{
			1: {Phase: decide.Warned, Since: now.Add(-time.Hour), WarnedAt: now.Add(-time.Hour), RunStart: t0, Rule: "llm", Actions: 1},
			2: {Phase: decide.Warned, Since: now, RunStart: t0, WarnedAt: now, Rule: "llm", Actions: 1},
		},
	},
	"a job without GPUs": {
		jobs:        []decide.Job{job(1, nil)},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipNoGPUs, Detail: "the job holds no GPUs"}},
	},
	"a job listed twice is judged once": {
		jobs:        []decide.Job{job(1, gpus("gpu-001", 8)), job(1, gpus("gpu-001", 8))},
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm", Reason: idle8 + warnPlan}},
		wantSkipped: []decide.Skip{{JobID: 1, Reason: decide.SkipDuplicate, Detail: "the snapshot lists the job twice; the first is judged"}},
		wantStates: map[int64]decide.JobState{
			1: {Phase: decide.Warned, Since: now, RunStart: t0, WarnedAt: now, Rule: "llm", Actions: 1},
		},
	},
	"multi-node job": {
		jobs: []decide.Job{job(1, append(gpus("gpu-001", 8), gpus("gpu-002", 8)...))},
		samples: samples(samples(nil, gpus("gpu-001", 8), t0, now, flat(0, 0.3)),
			gpus("gpu-002", 8), t0, now, flat(4.5, 0)),
		wantActions: []decide.Action{{JobID: 1, Kind: decide.Warn, Rule: "llm",
			Reason: "16 of 16 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max seen 4.5%, 0.3%)" + warnPlan}},
	},
}

// snapshot builds the test's snapshot, filling in the defaults.
func (tc decideTest) snapshot() (decide.Snapshot, time.Time, reclaimrules.Rules) {
	jobs, smp := idleJob()
	if tc.jobs != nil {
		jobs = tc.jobs
	}
	if tc.samples != nil {
		smp = tc.samples
	}
	n := now
	if !tc.now.IsZero() {
		n = tc.now
	}
	taken := n
	if !tc.taken.IsZero() {
		taken = tc.taken
	}
	r := tc.rules
	if r.APIVersion == "" {
		r = llmRules()
	}
	return decide.Snapshot{
		Taken: taken, Jobs: jobs, Samples: smp, SampleInterval: interval,
		SourceOK: !tc.sourceDown, SlurmOK: !tc.slurmDown, States: tc.states, Mismatched: tc.mismatched, Placed: tc.placed,
	}, n, r
}

func TestDecide(t *testing.T) {
	for name, tc := range decideTests {
		t.Run(name, func(t *testing.T) {
			s, n, r := tc.snapshot()
			got := decide.Decide(s, n, r)
			if diff := cmp.Diff(tc.wantActions, got.Actions, cmpopts.IgnoreFields(decide.Action{}, "Evidence"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSkipped, got.Skipped, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if tc.wantStates != nil {
				if diff := cmp.Diff(tc.wantStates, got.States); diff != "" {
					t.Errorf("states (-want +got):\n%s", diff)
				}
			}
			if tc.wantUpcoming != nil {
				if diff := cmp.Diff(tc.wantUpcoming, got.Upcoming); diff != "" {
					t.Errorf("upcoming (-want +got):\n%s", diff)
				}
			}
			// Every job has a next state; and every job has exactly one
			// action or skip, except a duplicate which has its skip too.
			for _, j := range s.Jobs {
				if _, ok := got.States[j.ID]; !ok {
					t.Errorf("job %d has no next state", j.ID)
				}
			}
			if len(got.Actions)+len(got.Skipped) != len(s.Jobs) {
				t.Errorf("%d actions and %d skips for %d jobs", len(got.Actions), len(got.Skipped), len(s.Jobs))
			}
		})
	}
}

// TestDecideDoesNotChangeItsInput: the snapshot's states and samples are
// the caller's.
func TestDecideDoesNotChangeItsInput(t *testing.T) {
	tc := decideTests["action limit: the most idle GPU-time goes first"]
	s, n, r := tc.snapshot()
	states := map[int64]decide.JobState{}
	for k, v := range s.States {
		states[k] = v
	}
	rulesBefore := fmt.Sprintf("%+v", r)
	decide.Decide(s, n, r)
	if diff := cmp.Diff(states, s.States); diff != "" {
		t.Errorf("Decide changed the snapshot's states (-before +after):\n%s", diff)
	}
	if got := fmt.Sprintf("%+v", r); got != rulesBefore {
		t.Errorf("Decide changed the rules:\n%s\n%s", rulesBefore, got)
	}
}

func TestEvidence(t *testing.T) {
	g := gpus("gpu-001", 2)
	m := samples(nil, g[:1], t0, now, flat(0, 0.3))
	m = samples(m, g[1:], t0, now, until(now.Add(-20*time.Minute), flat(100, 100), flat(3, 1)))
	s := decide.Snapshot{Taken: now, Jobs: []decide.Job{job(1, g)}, Samples: m, SampleInterval: interval, SourceOK: true, SlurmOK: true}
	// One GPU of two idle: partly idle with min_idle_gpus 1.
	d := decide.Decide(s, now, llmRules(func(r *reclaimrules.Rules) { r.Rules[0].PartialIdle.MinIdleGPUs = 1 }))
	if len(d.Actions) != 1 || d.Actions[0].Kind != decide.Notify {
		t.Fatalf("got %+v, want one Notify", d)
	}
	want := decide.Evidence{
		WindowStart: now.Add(-30 * time.Minute), WindowEnd: now, JobStart: t0,
		GPUs: []decide.GPUEvidence{
			{GPU: g[0], Samples: 60, Coverage: 1, Newest: now, MaxUtilPercent: 0, MaxMemActivityPercent: 0.3, MaxMemUsedMiB: 40000, Idle: true},
			{GPU: g[1], Samples: 60, Coverage: 1, Newest: now, MaxUtilPercent: 100, MaxMemActivityPercent: 100, MaxMemUsedMiB: 40000},
		},
		IdleGPUs: 1, TotalGPUs: 2,
	}
	if diff := cmp.Diff(want, d.Actions[0].Evidence); diff != "" {
		t.Errorf("evidence (-want +got):\n%s", diff)
	}
	// With a time limit the evidence says when the limit would end the
	// run: what a reclaim frees is the GPUs until then.
	j := job(1, g)
	j.TimeLimit = 12 * time.Hour
	s.Jobs = []decide.Job{j}
	d = decide.Decide(s, now, llmRules(func(r *reclaimrules.Rules) { r.Rules[0].PartialIdle.MinIdleGPUs = 1 }))
	if len(d.Actions) != 1 || !d.Actions[0].Evidence.JobEnd.Equal(t0.Add(12*time.Hour)) {
		t.Errorf("with a 12h limit: %+v, want the evidence's job end at %s", d.Actions, t0.Add(12*time.Hour))
	}
}
