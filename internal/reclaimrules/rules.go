// Package reclaimrules is the contract between strata-policy, which renders
// the idle-GPU reclaim rules of every tenant into
// /etc/strata/rendered/reclaim-rules.json, and reclaimd, which reads them (and, until
// policy exists, embeds the same structure in its own YAML configuration).
// Beside the idle rules it carries the recovery rules ([Recovery]): how
// reclaimd retries each workload class's failed jobs, by failure class.
//
// The file is versioned JSON (apiVersion "strata/v1", kind "ReclaimRules").
// Every type carries json and yaml tags with the same snake_case names, so
// the two spellings of the contract cannot drift apart. [Parse] decodes
// strictly (an unknown, repeated or mistyped field is an error with its
// line, column and path), [Rules.Validate] reports every problem at once
// with its JSON path, and [Rules.WithDefaults] fills the documented
// defaults in code.
//
// The package holds data and pure functions only: no clock, no files.
package reclaimrules

import (
	"slices"
	"strings"
	"time"
)

// APIVersion and Kind head every reclaim rules document.
const (
	APIVersion = "strata/v1"
	Kind       = "ReclaimRules"
)

// Defaults that [Rules.WithDefaults] fills in where a field is zero.
//
// Thresholds have no default other than zero: util ≤ 0 % and memory
// activity ≤ 0 % is the strictest idle definition (Princeton's), so a rule
// that forgets them reclaims less, never more.
const (
	// DefaultWindow is the sliding window a GPU must be idle for. Long,
	// because a forgotten window should not reclaim aggressively.
	DefaultWindow = time.Hour
	// DefaultMinCoverage is the fraction of the window that must have
	// samples before a GPU can be idle.
	DefaultMinCoverage = 0.8
	// DefaultWarn is how long the owner has, after the warning, to use the
	// GPUs before the ladder goes on.
	DefaultWarn = 15 * time.Minute
	// DefaultSignalWait is how long a signalled job has to checkpoint.
	DefaultSignalWait = 5 * time.Minute
	// DefaultAction is what a rule without an action does: only notify.
	DefaultAction = ActionNotify
	// DefaultMinIdleGPUs is the fewest idle GPUs that make a multi-GPU job
	// partly idle.
	DefaultMinIdleGPUs = 1
	// DefaultMaxActionsPerCycle caps the destructive actions (signal,
	// requeue, cancel) of one cycle, so that a broken metrics source that
	// reports zeros cannot empty the cluster in one go.
	DefaultMaxActionsPerCycle = 10
	// DefaultMaxRequeuesPerJob is the most times a job may have been
	// requeued before reclaimd stops requeueing it and only notifies.
	DefaultMaxRequeuesPerJob = 3
)

// MinWindow is the shortest idle window a rule may give: shorter windows
// hold too few samples to judge (sources sample every 10 to 30 seconds).
const MinWindow = time.Minute

// Rules is one reclaim rules document.
type Rules struct {
	APIVersion string `json:"apiVersion" yaml:"apiVersion"`
	Kind       string `json:"kind" yaml:"kind"`
	// DryRun makes reclaimd decide and record every action as if it had
	// taken it, without signalling, requeueing or cancelling anything.
	DryRun bool `json:"dry_run" yaml:"dry_run"`
	// Rules are tried in order; the first that matches a job is its rule
	// (see [Rules.For]).
	Rules  []Rule     `json:"rules" yaml:"rules"`
	Exempt Exemptions `json:"exempt" yaml:"exempt"`
	Limits Limits     `json:"limits" yaml:"limits"`
	// Recovery are the retry policies of failed jobs, tried in order like
	// Rules (see [Rules.RecoveryFor]); a job none matches is never
	// retried.
	Recovery []Recovery `json:"recovery,omitempty" yaml:"recovery,omitempty"`
}

// Rule says which jobs it applies to, when their GPUs count as idle, and
// what happens to them then.
//
// The escalation ladder over reclaimd's cycles: the first idle verdict
// warns the owner; still idle Warn later, the job gets Signal.Name (when
// set and the action is destructive) and Signal.Wait to checkpoint; then
// Action. A job whose GPUs get busy while warned is recovered and the
// ladder starts again. When the action is notify, the first idle verdict
// notifies at once: a notice needs no warning.
type Rule struct {
	// Name identifies the rule in records, logs and the job's admin
	// comment: letters, digits, '.', '_' and '-'; unique in the document.
	Name  string  `json:"name" yaml:"name"`
	Match Match   `json:"match" yaml:"match"`
	Idle  IdleDef `json:"idle" yaml:"idle"`
	// StartupGrace: no judgement before the job has run this long.
	StartupGrace Duration `json:"startup_grace" yaml:"startup_grace"`
	// FirstWindow, when set, judges a job that was idle for its whole
	// first FirstWindow at that age, without waiting for a full
	// Idle.Window. Until the job has run Idle.Window, its window is its
	// whole life so far. Must be shorter than Idle.Window.
	FirstWindow Duration    `json:"first_window" yaml:"first_window"`
	PartialIdle PartialIdle `json:"partial_idle" yaml:"partial_idle"`
	// Warn is the wait after the warning before the ladder goes on
	// (0: DefaultWarn). There is always a warning before a signal,
	// requeue or cancel.
	Warn   Duration `json:"warn" yaml:"warn"`
	Signal Signal   `json:"signal" yaml:"signal"`
	// Action ends the ladder for a wholly idle job ("": DefaultAction).
	Action Action `json:"action" yaml:"action"`
	// MaxRequeues, when positive, is this rule's limit on a job's
	// requeues; the lower of it and Limits.MaxRequeuesPerJob applies. A
	// job at the limit is only notified, with the reason: reclaimd never
	// turns a requeue into a cancel on its own.
	MaxRequeues int `json:"max_requeues" yaml:"max_requeues"`
	// NoRequeue says what a requeue does to a job submitted with
	// --no-requeue, whose owner said it must not run twice (it appends to
	// its output, or has side effects): NoRequeueSkip (the default) only
	// notifies the owner; NoRequeueOverride requeues it anyway, and the
	// owner's notice says so.
	NoRequeue NoRequeuePolicy `json:"no_requeue,omitempty" yaml:"no_requeue,omitempty"`
}

// NoRequeuePolicy is what a requeue does to a --no-requeue job.
type NoRequeuePolicy string

// The values of Rule.NoRequeue.
const (
	NoRequeueSkip     NoRequeuePolicy = "skip"    // notify only (the default, also for "")
	NoRequeueOverride NoRequeuePolicy = "requeue" // make it requeueable and requeue it
)

// Match selects jobs. Every non-empty list must contain the job's value;
// empty lists match anything, so a Match with no lists matches every job.
type Match struct {
	Tenants    []string `json:"tenants,omitempty" yaml:"tenants,omitempty"`
	Accounts   []string `json:"accounts,omitempty" yaml:"accounts,omitempty"`
	Users      []string `json:"users,omitempty" yaml:"users,omitempty"`
	Classes    []string `json:"classes,omitempty" yaml:"classes,omitempty"`
	QOS        []string `json:"qos,omitempty" yaml:"qos,omitempty"`
	Partitions []string `json:"partitions,omitempty" yaml:"partitions,omitempty"`
}

// IdleDef is the composite idle definition of one GPU. A GPU is idle in a
// sample when its utilisation is at or under MaxUtilPercent and its memory
// activity (DCGM's DRAM active, NVML's memory utilisation) at or under
// MaxMemActivityPercent. It is idle over Window when it is idle in every
// sample of the window (the maximum decides, not the average) and samples
// cover at least MinCoverage of the window; a GPU without enough fresh
// samples is never idle.
type IdleDef struct {
	MaxUtilPercent        float64 `json:"max_util_percent" yaml:"max_util_percent"`
	MaxMemActivityPercent float64 `json:"max_mem_activity_percent" yaml:"max_mem_activity_percent"`
	// Window is the sliding window (0: DefaultWindow, at least MinWindow).
	Window Duration `json:"window" yaml:"window"`
	// MinCoverage is a fraction in (0, 1] (0: DefaultMinCoverage).
	MinCoverage float64 `json:"min_coverage" yaml:"min_coverage"`
}

// PartialIdle judges multi-GPU jobs of which some GPUs are idle for the
// whole window while others work. Such a job is partly idle when at least
// MinIdleGPUs of its GPUs and at least MinIdleFraction of them are idle.
// It goes through the same ladder as a wholly idle job, ending in Action,
// which defaults to notify: a job that still computes is only stopped when
// the rule says so.
type PartialIdle struct {
	Enabled bool `json:"enabled" yaml:"enabled"`
	// MinIdleGPUs is a count (0: DefaultMinIdleGPUs). Like Action, it is
	// only defaulted, and only allowed, when Enabled.
	MinIdleGPUs int `json:"min_idle_gpus" yaml:"min_idle_gpus"`
	// MinIdleFraction is a fraction of the job's GPUs in [0, 1].
	MinIdleFraction float64 `json:"min_idle_fraction" yaml:"min_idle_fraction"`
	// Action ends the ladder for a partly idle job ("": notify).
	Action Action `json:"action" yaml:"action"`
}

// Signal is the checkpoint signal sent before a destructive action.
type Signal struct {
	// Name is one of the signals slurmrestd sends (see [CanonicalSignal]),
	// with or without the SIG prefix; "" sends none.
	Name string `json:"name" yaml:"name"`
	// Wait is the time the job has to checkpoint (0: DefaultSignalWait
	// when Name is set).
	Wait Duration `json:"wait" yaml:"wait"`
	// Mode says which jobs get the signal, and which of their processes
	// ("": SignalSkipUnlessRequested). A batch script that does not trap
	// the signal dies of it (USR1, USR2 and TERM end a process by
	// default), and a job that dies is not requeued: the run is lost.
	Mode SignalMode `json:"mode,omitempty" yaml:"mode,omitempty"`
}

// SignalMode says which jobs a rule's signal goes to, and where in them.
type SignalMode string

// The values of Signal.Mode.
const (
	// SignalSkipUnlessRequested (the default) signals only a job that
	// asked for it, with the word strata:signal in its comment
	// (--comment=strata:signal: the job traps the signal); the others
	// go from the warning straight to the action. slurmctld keeps no
	// trace of sbatch --signal that slurmrestd shows, so the job must say
	// so.
	SignalSkipUnlessRequested SignalMode = "skip-unless-requested"
	// SignalBatch signals every job, its batch shell only: the script
	// must trap the signal (and pass it on to its steps), or it dies.
	SignalBatch SignalMode = "batch"
	// SignalAllSteps signals every job, every process of every step and
	// the batch shell: each process that does not trap it dies.
	SignalAllSteps SignalMode = "all-steps"
)

// signalModes lists the valid modes, in the order messages name them.
var signalModes = []SignalMode{SignalSkipUnlessRequested, SignalBatch, SignalAllSteps}

// Sends reports whether the mode sends the signal to a job that asked for
// one (requested) or not.
func (m SignalMode) Sends(requested bool) bool {
	return m == SignalBatch || m == SignalAllSteps || requested
}

// Action is what ends the ladder.
type Action string

// The actions a rule can end with.
const (
	ActionNotify      Action = "notify"       // tell the owner; touch nothing
	ActionRequeue     Action = "requeue"      // requeue: the job runs again later
	ActionRequeueHold Action = "requeue-hold" // requeue and hold until released
	ActionCancel      Action = "cancel"       // cancel the job
)

// actions lists the valid actions, in the order messages name them.
var actions = []Action{ActionNotify, ActionRequeue, ActionRequeueHold, ActionCancel}

// Destructive reports whether the action stops the job.
func (a Action) Destructive() bool {
	return a == ActionRequeue || a == ActionRequeueHold || a == ActionCancel
}

// Requeues reports whether the action requeues the job.
func (a Action) Requeues() bool { return a == ActionRequeue || a == ActionRequeueHold }

// Exemptions name jobs that are never judged, whatever rule matches them.
type Exemptions struct {
	Accounts   []string `json:"accounts,omitempty" yaml:"accounts,omitempty"`
	Users      []string `json:"users,omitempty" yaml:"users,omitempty"`
	QOS        []string `json:"qos,omitempty" yaml:"qos,omitempty"`
	Partitions []string `json:"partitions,omitempty" yaml:"partitions,omitempty"`
}

// Limits bound what one reclaimd cycle and one job may get.
type Limits struct {
	// MaxActionsPerCycle caps signals, requeues and cancels per cycle
	// (0: DefaultMaxActionsPerCycle); warnings, notices and recoveries are
	// not capped. The jobs with the most idle GPU-time go first.
	MaxActionsPerCycle int `json:"max_actions_per_cycle" yaml:"max_actions_per_cycle"`
	// MaxRequeuesPerJob is the most requeues (as Slurm counts them, for
	// any cause) after which a job is no longer requeued
	// (0: DefaultMaxRequeuesPerJob).
	MaxRequeuesPerJob int `json:"max_requeues_per_job" yaml:"max_requeues_per_job"`
}

// JobInfo is what rules and exemptions match on.
type JobInfo struct {
	Tenant    string
	Account   string
	User      string
	Class     string // workload class: train, batch, interactive, serve
	QOS       string
	Partition string
}

// For returns the rule for a job: the first rule, in document order, whose
// every non-empty Match list contains the job's value (tenant, account,
// user, class, QOS, partition). Lists within a rule are ANDed, values
// within a list ORed, and matching is exact and case-sensitive, as in
// Slurm. A rule with an empty Match is a catch-all, so it belongs last.
// Exemptions are not considered here (see [Exemptions.Exempts]).
func (r Rules) For(j JobInfo) (Rule, bool) {
	for _, rule := range r.Rules {
		if rule.Match.Matches(j) {
			return rule, true
		}
	}
	return Rule{}, false
}

// Matches reports whether every non-empty list of m contains j's value.
func (m Match) Matches(j JobInfo) bool {
	return in(m.Tenants, j.Tenant) && in(m.Accounts, j.Account) && in(m.Users, j.User) &&
		in(m.Classes, j.Class) && in(m.QOS, j.QOS) && in(m.Partitions, j.Partition)
}

// in reports whether list is empty or holds v.
func in(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }

// Exempts reports whether a job is exempt, and why (`account "ops"`).
func (e Exemptions) Exempts(j JobInfo) (string, bool) {
	switch {
	case slices.Contains(e.Accounts, j.Account):
		return "account " + quote(j.Account), true
	case slices.Contains(e.Users, j.User):
		return "user " + quote(j.User), true
	case slices.Contains(e.QOS, j.QOS):
		return "QOS " + quote(j.QOS), true
	case slices.Contains(e.Partitions, j.Partition):
		return "partition " + quote(j.Partition), true
	}
	return "", false
}

func quote(s string) string { return `"` + s + `"` }

// signals are the names slurmrestd (and scancel --signal) accept, in the
// order messages list them.
var signals = []string{"HUP", "INT", "QUIT", "ABRT", "KILL", "ALRM", "TERM", "USR1", "USR2", "URG", "CONT", "STOP", "TSTP", "TTIN", "TTOU"}

// CanonicalSignal returns a signal's canonical name ("usr1", "USR1" and
// "SIGUSR1" all give "SIGUSR1"), or false when slurmrestd does not send it.
func CanonicalSignal(name string) (string, bool) {
	n := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	if slices.Contains(signals, n) {
		return "SIG" + n, true
	}
	return "", false
}

// WithDefaults returns a copy of r with every zero field that has a
// default filled in (see the Default constants) and signal names in
// canonical form. Parse returns rules with defaults already filled; call
// it on rules decoded another way (reclaimd's YAML configuration).
func (r Rules) WithDefaults() Rules {
	out := r
	out.Rules = make([]Rule, len(r.Rules))
	for i, rule := range r.Rules {
		out.Rules[i] = rule.withDefaults()
	}
	if out.Limits.MaxActionsPerCycle == 0 {
		out.Limits.MaxActionsPerCycle = DefaultMaxActionsPerCycle
	}
	if out.Limits.MaxRequeuesPerJob == 0 {
		out.Limits.MaxRequeuesPerJob = DefaultMaxRequeuesPerJob
	}
	return out
}

func (r Rule) withDefaults() Rule {
	if r.Idle.Window == 0 {
		r.Idle.Window = Duration(DefaultWindow)
	}
	if r.Idle.MinCoverage == 0 {
		r.Idle.MinCoverage = DefaultMinCoverage
	}
	if r.PartialIdle.Enabled && r.PartialIdle.MinIdleGPUs == 0 {
		r.PartialIdle.MinIdleGPUs = DefaultMinIdleGPUs
	}
	if r.PartialIdle.Enabled && r.PartialIdle.Action == "" {
		r.PartialIdle.Action = ActionNotify
	}
	if r.Warn == 0 {
		r.Warn = Duration(DefaultWarn)
	}
	if r.Signal.Name != "" {
		if c, ok := CanonicalSignal(r.Signal.Name); ok {
			r.Signal.Name = c
		}
		if r.Signal.Wait == 0 {
			r.Signal.Wait = Duration(DefaultSignalWait)
		}
		if r.Signal.Mode == "" {
			r.Signal.Mode = SignalSkipUnlessRequested
		}
	}
	if r.Action == "" {
		r.Action = DefaultAction
	}
	return r
}

// RequeueLimit is the most requeues a job may have had for rule to requeue
// it again: the lower of rule.MaxRequeues (when positive) and
// l.MaxRequeuesPerJob (DefaultMaxRequeuesPerJob when zero).
func (l Limits) RequeueLimit(rule Rule) int {
	limit := l.MaxRequeuesPerJob
	if limit <= 0 {
		limit = DefaultMaxRequeuesPerJob
	}
	if rule.MaxRequeues > 0 && rule.MaxRequeues < limit {
		limit = rule.MaxRequeues
	}
	return limit
}
