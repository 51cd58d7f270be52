// Package decide is reclaimd's pure core: from one snapshot of the running
// jobs and their GPUs' recent samples, the jobs' states from the last
// cycle, the time and the reclaim rules, [Decide] works out what to do to
// each job this cycle and each job's next state. It does no I/O and reads
// no clock; adapters (Slurm, the agent or Prometheus, SQLite) sit around
// it in the daemon.
//
// # Idle
//
// A GPU is idle over a window when every sample in it is at or under the
// rule's utilisation and memory-activity thresholds: the maximum decides,
// not the average, so one burst keeps a job alive for a whole window, and
// a job that works and then sits idle for a whole window is caught (an
// average over its life would miss it). High memory activity with low
// utilisation (a memory-bound job) is not idle. Memory in use is recorded
// as evidence but never judged: a job that holds its model in GPU memory
// and computes nothing is the idle job this exists for.
//
// Idle needs data. A sample stands for the Snapshot.SampleInterval before
// it; a GPU whose samples cover less than the rule's min_coverage of the
// window, whose newest sample is older than two intervals, or that has a
// NaN value, is stale, and a job with a stale GPU is skipped, its state
// unchanged. Samples before the window (another job's, on a GPU just
// allocated) and after now (clock skew) are not read.
//
// # The window
//
// A job is judged once it has run its rule's idle.window, over the last
// window. With first_window set, a job is judged from that age on over its
// whole life so far, until its life reaches the window. Nothing is judged
// during startup_grace.
//
// # The ladder
//
// Over cycles each job moves through [Phase]s, driven by the verdict
// (wholly idle, partly idle, busy) and the time spent in its phase:
//
//	Observed/Recovered --idle--> Warned (Warn action)
//	Warned --idle for rule.warn--> Signalled (Signal), when the rule has a
//	        signal that its mode sends to this job (skip-unless-requested:
//	        only to a job with SignalRequested) and the end action is
//	        destructive; else the end action
//	Signalled --idle in fresh samples after rule.signal.wait--> Requeued
//	        (Requeue, RequeueHold) or Cancelled (Cancel) or Notified (Notify)
//	Signalled --busy after the wait, or no fresh samples--> Recovered
//	Warned/Notified --busy--> Recovered (Recover); the ladder starts again
//
// The end action is the rule's action, or partial_idle.action for a partly
// idle job. Where the end action is notify (by rule, or because the job
// reached its requeue limit) the first idle verdict notifies at once: a
// notice needs no warning. A requeue at the limit becomes a Notify that
// says so; Decide never turns a requeue into a cancel.
//
// After a signal nothing is decided on what the job did while it had
// time to checkpoint: the next step waits for samples taken after
// rule.signal.wait, and is taken only when every one of them is idle. A
// job busy after the wait keeps its GPUs (Recover: the ladder is
// abandoned, with a record, and the job watched again from the start); so
// does a job with no fresh samples for SignalEvidenceBound past the wait,
// so that a requeue never rests on old evidence.
//
// # Safety
//
// No actions at all when slurmrestd or the metrics source failed this
// cycle, when the snapshot is older than two sample intervals, or when
// the rules do not validate: every job is skipped with the reason, and
// its state carried unchanged. No action either for a job with a GPU on a
// node in Snapshot.Mismatched, where the source's own map of which job
// runs on which GPU contradicts Slurm's (SkipGPUMismatch): its samples
// may be another job's. Signals, requeues and cancels are capped
// per cycle (limits.max_actions_per_cycle), the jobs with the most idle
// GPU-time first; the others stay in their phase and are skipped with
// SkipActionLimit, to be taken next cycle. In dry-run mode actions come
// with DryRun set and states advance as if they had been carried out, so
// the record shows what would have happened, and when. (A job "requeued"
// in dry-run mode keeps running and stays Requeued for the rest of its
// run, skipped as SkipActed: each run is reclaimed once on paper.)
//
// The daemon writes each action's intent with the job's next state to
// SQLite before acting, re-reads the job and checks [Action.StillApplies]
// before acting, marks the job with [Action.Marker] and logs the action
// (it is a [log/slog.LogValuer]). States in a Decision assume every action
// succeeds: when one fails, the daemon keeps the job's previous state, so
// the next cycle decides again.
package decide

import (
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// DefaultSampleInterval is the sample interval assumed when the snapshot
// gives none: the agent's default period and a common Prometheus step.
const DefaultSampleInterval = 30 * time.Second

// GPUKey names one GPU: the node and the GPU's index there, as Slurm
// reports it in the job's allocation.
type GPUKey struct {
	Node  string
	Index int
}

// String formats the key as "node:index".
func (k GPUKey) String() string { return k.Node + ":" + strconv.Itoa(k.Index) }

// Sample is one reading of one GPU; it describes the interval before At.
type Sample struct {
	At                 time.Time
	UtilPercent        float64 // NVML utilization.gpu, DCGM GPU_UTIL
	MemActivityPercent float64 // DCGM DRAM active, NVML utilization.memory
	MemUsedMiB         float64 // evidence only: holding memory is not using the GPU
}

// Job is one running job with its GPU allocation.
type Job struct {
	ID        int64
	User      string
	Account   string
	Tenant    string
	Class     string // workload class: train, batch, interactive, serve
	QOS       string
	Partition string
	// Start is when this run started; a requeued job starts a new run.
	Start time.Time
	// TimeLimit is the job's time limit (0: none or unknown): a reclaim
	// frees its GPUs until Start+TimeLimit at the most.
	TimeLimit time.Duration
	GPUs      []GPUKey
	// Requeues is how often Slurm has requeued the job, for any cause
	// (restart_cnt).
	Requeues int
	// NoRequeue is set for a job submitted with --no-requeue: a requeue
	// only notifies, unless the rule's no_requeue is "requeue".
	NoRequeue bool
	// SignalRequested is set for a job that asked for the checkpoint
	// signal (it traps it): under the default signal mode
	// (skip-unless-requested) only such a job is signalled.
	SignalRequested bool
	// HetComponent is set for a component of a heterogeneous job: Slurm
	// requeues only whole heterogeneous jobs, so a requeue only notifies.
	// A cancel or signal reaches the component alone, except for the
	// leader (HetLeader, offset 0), which runs the batch script: its end
	// ends every component, so a cancel of it only notifies too.
	HetComponent, HetLeader bool
}

// Snapshot is what reclaimd knows at the start of a cycle.
type Snapshot struct {
	// Taken is when the adapters read the jobs and samples.
	Taken time.Time
	// Jobs are the running jobs that hold GPUs.
	Jobs []Job
	// Samples holds each GPU's recent samples, sorted by time. The caller
	// keeps at least the longest rule window; older samples are ignored.
	Samples map[GPUKey][]Sample
	// Windows holds GPUs' samples reduced to what Decide reads of them
	// (see Window), for a caller that keeps whole windows of many GPUs:
	// a GPU with a Window is read from it, and not from Samples.
	Windows map[GPUKey]*Window
	// SampleInterval is how often the source samples a GPU (the agent's
	// period, Prometheus's query step); 0 means DefaultSampleInterval.
	SampleInterval time.Duration
	// SourceOK is true when the metrics source answered this cycle.
	SourceOK bool
	// SlurmOK is true when slurmrestd answered this cycle.
	SlurmOK bool
	// States are the jobs' states after the last cycle, by job id.
	States map[int64]JobState
	// Mismatched names the nodes where the metrics source's own map of
	// which job holds which GPU contradicts the jobs' GPUs, with what was
	// seen: their samples may be another job's, so no job with a GPU
	// there is judged (SkipGPUMismatch), its state unchanged, unless it
	// is in Placed.
	Mismatched map[string]string
	// Placed are the jobs with GPUs on Mismatched nodes that the source's
	// own map places whole: on each such node, as many GPUs as Slurm
	// gives the job run its processes and no other job's, and the
	// samples under the job's GPUKeys are those GPUs' (the join on the
	// node's map, not Slurm's index). They are judged.
	Placed map[int64]bool
}

// Phase is where a job stands in the reclaim ladder.
type Phase string

// The phases of the ladder. The zero Phase reads as Observed.
const (
	Observed  Phase = "observed"  // seen, not (or no longer) idle
	Warned    Phase = "warned"    // idle; its owner was warned
	Signalled Phase = "signalled" // still idle after the warning; signalled to checkpoint
	Requeued  Phase = "requeued"  // requeued (and perhaps held)
	Cancelled Phase = "cancelled" // cancelled
	Recovered Phase = "recovered" // busy again after a warning or notice
	Notified  Phase = "notified"  // idle; its owner was told, nothing more
)

// JobState is one job's place in the ladder, carried from cycle to cycle
// (and across restarts, through the store).
type JobState struct {
	Phase Phase
	// Since is when the job entered Phase (for Observed: first seen).
	Since time.Time
	// RunStart is the start of the run the state is about: when a job
	// runs again after a requeue, its ladder starts again.
	RunStart    time.Time
	WarnedAt    time.Time
	SignalledAt time.Time
	// Rule is the name of the rule that judged the job last.
	Rule string
	// Partial is set when the ladder is for a partly idle job, whose end
	// action is the rule's partial_idle.action.
	Partial bool
	// Actions counts the actions decided for this run of the job.
	Actions int
}

// Kind is what an action does.
type Kind string

// The kinds of action.
const (
	Warn        Kind = "warn"         // tell the owner the job is idle and what comes next
	Signal      Kind = "signal"       // send the rule's signal (checkpoint)
	Requeue     Kind = "requeue"      // requeue the job
	RequeueHold Kind = "requeue-hold" // requeue the job and hold it
	Cancel      Kind = "cancel"       // cancel the job
	Notify      Kind = "notify"       // tell the owner; nothing more
	Recover     Kind = "recover"      // tell the owner the reclaim is withdrawn
)

// Destructive reports whether the action interrupts the job: these are
// capped per cycle.
func (k Kind) Destructive() bool {
	return k == Signal || k == Requeue || k == RequeueHold || k == Cancel
}

// Action is one thing to do to one job, with why.
type Action struct {
	JobID int64
	Kind  Kind
	// Signal is the canonical signal name ("SIGUSR1") of a Signal action.
	Signal string
	// SignalMode is the rule's signal mode of a Signal action: batch (the
	// batch shell only), all-steps (every process of the job), or
	// skip-unless-requested (a job that asked: where the daemon's
	// configuration says).
	SignalMode reclaimrules.SignalMode
	Rule       string
	// Reason says in plain words what was seen and what follows, e.g.
	// "8 of 8 GPUs idle for 30m0s: util ≤ 5%, memory activity ≤ 5% (max
	// seen 0.0%, 0.3%); warning: SIGUSR1 in 15m0s, then requeue 5m0s
	// later, unless the GPUs get busy".
	Reason   string
	Evidence Evidence
	// DryRun is set when the rules are in dry-run mode: record the action,
	// do not carry it out.
	DryRun bool
}

// Evidence is what an action was decided on.
type Evidence struct {
	WindowStart, WindowEnd time.Time
	// JobStart and the GPUs' keys identify the run judged; see
	// Action.StillApplies.
	JobStart time.Time
	// JobEnd is when the job's time limit would end this run (zero: no
	// limit): what a reclaim frees is its GPUs until then at the most.
	JobEnd    time.Time `json:",omitzero"`
	GPUs      []GPUEvidence
	IdleGPUs  int
	TotalGPUs int
}

// GPUEvidence is what one GPU showed over the window.
type GPUEvidence struct {
	GPU                   GPUKey
	Samples               int
	Coverage              float64 // fraction of the window covered by samples
	Newest                time.Time
	MaxUtilPercent        float64
	MaxMemActivityPercent float64
	MaxMemUsedMiB         float64
	Idle                  bool
}

// SkipReason says, in a few words fit for a metric label, why a job got no
// action this cycle.
type SkipReason string

// Why a job got no action.
const (
	SkipSlurmFailing  SkipReason = "slurmrestd failing"
	SkipSourceFailing SkipReason = "metrics source failing"
	SkipOldSnapshot   SkipReason = "old snapshot"
	SkipInvalidRules  SkipReason = "invalid rules"
	SkipDuplicate     SkipReason = "duplicate job"
	SkipActed         SkipReason = "already acted"
	SkipExempt        SkipReason = "exempt"
	SkipNoRule        SkipReason = "no rule"
	SkipNoGPUs        SkipReason = "no GPUs"
	SkipStartupGrace  SkipReason = "startup grace"
	SkipTooYoung      SkipReason = "window not reached"
	SkipStaleData     SkipReason = "stale data"
	SkipBusy          SkipReason = "busy"
	SkipWaiting       SkipReason = "waiting"
	SkipNotified      SkipReason = "notified"
	SkipActionLimit   SkipReason = "action limit"
	SkipGPUMismatch   SkipReason = "gpu map mismatch"
)

// Label is the reason as a metric label: "stale data" is stale_data.
func (r SkipReason) Label() string { return strings.ReplaceAll(string(r), " ", "_") }

// Judged reports whether a job skipped for this reason had its GPUs
// judged this cycle (busy, or idle and waiting for its next step), as
// opposed to not judged at all (stale data, too young, exempt...).
func (r SkipReason) Judged() bool {
	switch r {
	case SkipBusy, SkipWaiting, SkipNotified, SkipActionLimit, SkipActed:
		return true
	}
	return false
}

// Skip is a job that got no action this cycle, and why.
type Skip struct {
	JobID  int64
	Reason SkipReason
	Detail string // plain words: which GPU is stale, what the limit is
}

// Decision is the outcome of one cycle.
type Decision struct {
	// Actions to take, in the order of Snapshot.Jobs.
	Actions []Action
	// States holds the next state of every job in Snapshot.Jobs. A job
	// that has left the snapshot (ended, or pending after a requeue) has
	// no entry: the store keeps its last state.
	States map[int64]JobState
	// Skipped lists every job without an action, in the order of
	// Snapshot.Jobs, with the reason.
	Skipped []Skip
	// Upcoming is, for each job on a rule's ladder, the next step
	// reclaimd takes if the job's GPUs stay idle from now; a job with no
	// such step (not judged, stale samples, notified) has no entry.
	Upcoming map[int64]Upcoming
}

// Upcoming is the next step of a job's ladder if its GPUs stay idle:
// before any warning, the warning (or the notice of a notify-only rule)
// at the earliest cycle a whole idle window could show; once warned, the
// step the warning announced; once signalled, the end action.
type Upcoming struct {
	Kind Kind
	At   time.Time
}
