// Package controller is reclaimd's cycle: read the running GPU jobs from
// slurmrestd (one conditional request), their GPUs' samples from the node
// agents, the jobs' states from the store; run the pure decide.Decide;
// save the states; and carry out each action safely: intent recorded
// first, the job re-read and checked to be the same run on the same GPUs,
// the job marked, one log line with the evidence, the outcome recorded.
package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// Slurm is what the controller needs of slurmrestd (*slurmrest.Client).
// Actions name the job by its [slurmrest.Job.Ref], never its bare ID: an
// array task's record may carry the array's ID (which reaches every task),
// and a heterogeneous job's leader the het job's (which reaches every
// component).
type Slurm interface {
	Jobs(ctx context.Context, since time.Time) (slurmrest.JobList, error)
	Job(ctx context.Context, id int64) (slurmrest.Job, error)
	UpdateRef(ctx context.Context, ref slurmrest.JobRef, u slurmrest.JobUpdate) error
	SignalRef(ctx context.Context, ref slurmrest.JobRef, sig string, batchOnly bool) error
	RequeueRef(ctx context.Context, ref slurmrest.JobRef, opt slurmrest.RequeueOptions) error
	CancelRef(ctx context.Context, ref slurmrest.JobRef) error
	// Nodes is read by node health (Config.Health) and by recovery when
	// a job failed; UpdateNode by node health; Accounts by recovery.
	Nodes(ctx context.Context) ([]slurmrest.Node, error)
	UpdateNode(ctx context.Context, name, state, reason string) error
	Accounts(ctx context.Context) ([]slurmrest.Account, error)
}

// Collector gives the samples of the GPUs on the given nodes.
type Collector interface {
	Collect(ctx context.Context, nodes []string) (collect.Result, error)
}

// Notifier tells a job's owner about an action.
type Notifier interface {
	Notify(ctx context.Context, n Notice) error
}

// Notice is one message to a job's owner.
type Notice struct {
	JobID   int64     `json:"job_id"`
	User    string    `json:"user"`
	Account string    `json:"account"`
	Tenant  string    `json:"tenant"`
	Action  string    `json:"action"`
	Rule    string    `json:"rule"`
	Reason  string    `json:"reason"`
	DryRun  bool      `json:"dry_run"`
	At      time.Time `json:"at"`
	// Admin is set on a notice to the admins: node health's
	// (NoticeDrained, NoticeResumed, NoticeCapHit), which names a node and
	// no job, and recovery's about a job held after failing on several
	// nodes.
	Admin     bool   `json:"admin,omitempty"`
	Node      string `json:"node,omitempty"`
	Partition string `json:"partition,omitempty"`
	// FailureClass, Evidence and StderrTail are set on recovery's notices
	// (actions retry, retry-hold, not-retried).
	FailureClass string          `json:"failure_class,omitempty"`
	Evidence     json.RawMessage `json:"evidence,omitempty"`
	StderrTail   []string        `json:"stderr_tail,omitempty"`
}

// Config of the controller.
type Config struct {
	Slurm     Slurm
	Collector Collector
	Store     *store.Store
	// Rules returns the rules in force (reloaded on SIGHUP by the caller).
	Rules    func() reclaimrules.Rules
	Notifier Notifier // nil: no notices
	// Tenants returns the tenant map in force (tenants.json, reloaded on
	// SIGHUP by the caller); an account not in it, or every account when
	// Tenants is nil, is its own tenant.
	Tenants func() *tenantmap.Map
	// SignalBatchOnly sends checkpoint signals to the batch shell only
	// (scripts forward them); false signals every process of the job. It
	// applies to rules whose signal mode is skip-unless-requested (a job
	// that asked); modes batch and all-steps say where themselves.
	SignalBatchOnly bool
	// Health turns GPU node health on (health.go); nil leaves it off.
	Health  *Health
	Log     *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
	// Recovery classifies and retries failed jobs.
	Recovery Recovery
	// APIToken gives the bearer token every /v1 request of Handler must
	// carry (api.token_file, a secretfile.File's Get); nil refuses them all.
	APIToken func() ([]byte, error)
	// HandoverGap is the longest a GPU a reclaim freed may sit unused
	// before a job that starts on it no longer counts as one the reclaim
	// handed it to (0: worth.DefaultGap).
	HandoverGap time.Duration
	// Term is the lease term the controller acts under (fence.go): with
	// a standby on a shared PostgreSQL database, every change to Slurm,
	// notice and store write is fenced by it. The zero Term
	// (lease.Always, SQLite) is always held.
	Term lease.Term
	// Lease, when set, says how the lease stands, for /healthz.
	Lease func() lease.State
}

// Controller runs cycles.
type Controller struct {
	cfg Config

	mu         sync.Mutex
	since      time.Time
	jobs       []slurmrest.Job // last full answer, reused while unchanged
	unreadable []slurmrest.UnreadableJob
	last       Status
	interval   time.Duration
	// skips holds why each job of the last cycle got no action, for
	// GET /v1/jobs/{id}/reclaim.
	skips map[int64]SkipEntry
	// upcoming holds each job's next step if its GPUs stay idle, from
	// the last cycle.
	upcoming map[int64]reclaimapi.Upcoming
	// savedUpcoming is upcoming as last written to the store (nil: never
	// by this controller), so that only changes are written.
	savedUpcoming map[int64]reclaimapi.Upcoming
	// readOnly: the API of a controller that does not act (ReadAPI),
	// which reads each job's upcoming from the store.
	readOnly bool
	// drought is, by rule name, since when the rule has had jobs but
	// judged none of them (see noteDroughts).
	drought map[string]time.Time
	// accounted is the time up to which idle GPU time is counted.
	accounted time.Time
	// nodes are Slurm's nodes at the last cycle (node health only).
	nodes []slurmrest.Node
	// checking names the nodes whose health check runs; checks waits
	// for them.
	checking map[string]bool
	checks   sync.WaitGroup
	runCtx   context.Context // Run's: health checks end with it
	rec      recoveryState
	// lastNodes is the number of nodes of the last cycle's jobs, to size
	// the next cycle's set (Cycle, like drought and accounted).
	lastNodes int
	// jobInfo is the labels of each job's strata_reclaim_job_info series
	// (gauge, like lastNodes): only what changed is set or deleted.
	jobInfo map[int64][4]string
	// held is the windows kept in the store for a restart (held.go;
	// Cycle's, like lastNodes).
	held heldState
}

// SkipEntry says why a job got no action in the last cycle.
type SkipEntry struct {
	At     time.Time         `json:"at"`
	Reason decide.SkipReason `json:"reason"`
	Detail string            `json:"detail"`
	// Judged is false when the job's GPUs were not judged at all (stale
	// or missing samples, too young, exempt, no rule, unreadable record):
	// nothing will happen to it until that changes.
	Judged bool `json:"judged"`
}

// SkipUnreadable is why a job whose Slurm record could not be read got no
// action: it never reaches the decision.
const SkipUnreadable decide.SkipReason = "unreadable record"

// Status is the outcome of the last cycle, for /healthz.
type Status struct {
	At      time.Time `json:"at"`
	SlurmOK bool      `json:"slurm_ok"`
	Source  bool      `json:"source_ok"`
	Error   string    `json:"error,omitempty"`
	Jobs    int       `json:"jobs"`
	Actions int       `json:"actions"`
	// Lease is the controller lease as this process holds it (PostgreSQL
	// only: a SQLite database has one controller).
	Lease *lease.State `json:"lease,omitempty"`
}

// New makes a controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Slurm == nil || cfg.Collector == nil || cfg.Store == nil || cfg.Rules == nil {
		return nil, errors.New("controller: Slurm, Collector, Store and Rules are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if h := cfg.Health; h != nil {
		if h.MaxDrainedShare <= 0 || h.MaxDrainedShare > 1 || h.MaxFaultAge <= 0 || (len(h.Check) > 0 && (h.CheckInterval <= 0 || h.CheckTimeout <= 0)) {
			return nil, errors.New("controller: Health needs 0 < MaxDrainedShare <= 1, a MaxFaultAge, and with a Check an interval and a timeout")
		}
	}
	// Every change, notice and write under the term (a no-op for Always).
	cfg.Slurm = fencedSlurm{Slurm: cfg.Slurm, term: cfg.Term}
	if cfg.Notifier != nil {
		cfg.Notifier = fencedNotifier{Notifier: cfg.Notifier, term: cfg.Term}
	}
	cfg.Store = cfg.Store.Fenced(cfg.Term)
	if cfg.Recovery.Faults == nil {
		cfg.Recovery.Faults = storeFaults{cfg.Store}
	}
	return &Controller{cfg: cfg, drought: map[string]time.Time{}}, nil
}

// LastStatus is the outcome of the last cycle.
func (c *Controller) LastStatus() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Run runs a cycle every interval until ctx ends. Each cycle that ends
// beats the daemon's watchdog.
func (c *Controller) Run(ctx context.Context, interval time.Duration) error {
	c.interval = interval
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	if err := c.Recover(ctx); err != nil {
		c.cfg.Log.Error("finishing open intents failed", "error", err)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	defer c.WaitHealthChecks()
	for {
		if _, err := c.Cycle(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("reclaim cycle failed", "error", err)
		}
		daemon.Beat(ctx) // a cycle ended, failed or not: the loop is not stuck
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (c *Controller) tenant(account string) string {
	if c.cfg.Tenants == nil {
		return account
	}
	return c.cfg.Tenants().TenantOf(account)
}

// className reads the workload class from the job's comment
// ("strata:class=train") and falls back to the partition. Comment items
// are separated by spaces or commas ("strata:class=train,strata:serve=m"),
// as the job_submit plugin and strata-bridge read them.
func className(j slurmrest.Job) string {
	for _, f := range commentItems(j) {
		if v, ok := strings.CutPrefix(f, "strata:class="); ok {
			return v
		}
	}
	return j.Partition
}

func commentItems(j slurmrest.Job) []string {
	return strings.FieldsFunc(j.Comment, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// signalRequested reports whether the job asked for the rules' checkpoint
// signal with the item strata:signal in its comment: it traps the signal.
// slurmrestd shows nothing of sbatch --signal (the job record has no
// warning signal in data parsers v0.0.42 to v0.0.45), so the job says so.
func signalRequested(j slurmrest.Job) bool {
	return slices.Contains(commentItems(j), "strata:signal")
}

func (c *Controller) toDecide(j slurmrest.Job) decide.Job {
	d := decide.Job{ID: j.ID, User: j.User, Account: j.Account, Tenant: c.tenant(j.Account), Class: className(j),
		QOS: j.QOS, Partition: j.Partition, Start: j.StartTime, TimeLimit: j.TimeLimit, Requeues: j.RestartCount,
		NoRequeue: !j.Requeue, HetComponent: j.HetComponent(),
		HetLeader: j.HetComponent() && j.HetJobOffset == 0, SignalRequested: signalRequested(j)}
	for _, g := range j.GPUs {
		d.GPUs = append(d.GPUs, decide.GPUKey{Node: g.Node, Index: g.Index})
	}
	return d
}

// readJobs returns the running jobs with GPUs, asking slurmrestd only for
// what changed since the last cycle.
func (c *Controller) readJobs(ctx context.Context) ([]slurmrest.Job, error) {
	c.mu.Lock()
	since := c.since
	c.mu.Unlock()
	list, err := c.cfg.Slurm.Jobs(ctx, since)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !list.Unchanged {
		c.jobs, c.unreadable = list.Jobs, list.Unreadable
	}
	c.since = list.Updated
	out := make([]slurmrest.Job, 0, len(c.jobs))
	for _, j := range c.jobs {
		if j.Running() && len(j.GPUs) > 0 {
			out = append(out, j)
		}
	}
	return out, nil
}

// Cycle runs one cycle and returns the decision it carried out.
func (c *Controller) Cycle(ctx context.Context) (decide.Decision, error) {
	start := c.cfg.Now()
	defer func() { c.cfg.Metrics.CycleSeconds.Observe(time.Since(start).Seconds()) }()
	snap := decide.Snapshot{Taken: start, SlurmOK: true, SourceOK: true, States: map[int64]decide.JobState{}}
	var cycleErr []string
	jobs, err := c.readJobs(ctx)
	if err != nil {
		snap.SlurmOK = false
		c.cfg.Metrics.SlurmErrors.Inc()
		cycleErr = append(cycleErr, "slurmrestd: "+err.Error())
	}
	// Sized for the cycle: at 2,000 jobs, growing them was a tenth of
	// the cycle's memory.
	byID := make(map[int64]slurmrest.Job, len(jobs))
	nodeSet := make(map[string]bool, c.lastNodes)
	snap.Jobs = make([]decide.Job, 0, len(jobs))
	for _, j := range jobs {
		snap.Jobs = append(snap.Jobs, c.toDecide(j))
		byID[j.ID] = j
		for _, g := range j.GPUs {
			nodeSet[g.Node] = true
		}
	}
	var slurmNodes []slurmrest.Node
	if c.cfg.Health != nil {
		// Node health reads every GPU node's agent, busy or not.
		if slurmNodes, err = c.readNodes(ctx); err != nil {
			cycleErr = append(cycleErr, "slurmrestd nodes: "+err.Error())
		}
		for _, n := range slurmNodes {
			if n.GPUs > 0 {
				nodeSet[n.Name] = true
			}
		}
	}
	nodes := make([]string, 0, len(nodeSet))
	for n := range nodeSet {
		nodes = append(nodes, n)
	}
	c.lastNodes = len(nodes)
	rules := c.cfg.Rules()
	c.resumeHeld(ctx, rules, start)
	res, err := c.cfg.Collector.Collect(ctx, nodes)
	if err != nil {
		snap.SourceOK = false
		c.cfg.Metrics.SourceErrors.Inc()
		cycleErr = append(cycleErr, "metrics: "+err.Error())
	}
	for node, why := range res.Failed {
		if reason, ok := res.Refused[node]; ok {
			// Not believed: a forged or impossible snapshot is never read as idle.
			c.cfg.Metrics.AgentRefusals.WithLabelValues(reason).Inc()
			c.cfg.Log.Error("agent snapshot refused: its GPUs count as stale this cycle", "node", node, "reason", reason, "error", why)
			continue
		}
		c.cfg.Metrics.AgentErrors.Inc()
		c.cfg.Log.Warn("no GPU samples for a node: its GPUs count as stale this cycle", "node", node, "error", why)
	}
	if c.cfg.Health != nil {
		if err := c.health(ctx, res.Faults, slurmNodes, start); err != nil {
			c.cfg.Log.Error("node health failed this cycle", "error", err)
			cycleErr = append(cycleErr, "node health: "+err.Error())
		}
	} else if len(res.Faults) > 0 {
		// Without node health the faults are still kept: recovery classes
		// a run with a fault on its GPUs gpu_fault.
		if err := c.keepFaults(ctx, res.Faults, start); err != nil {
			c.cfg.Log.Error("keeping GPU faults failed this cycle", "error", err)
			cycleErr = append(cycleErr, "GPU faults: "+err.Error())
		}
	}
	snap.Samples, snap.Windows, snap.SampleInterval = res.Samples, res.Windows, res.Interval
	snap.Mismatched = gpuMapMismatchesFrom(res.MapFrom, jobs, res.Holders, res.Unattributed)
	snap.Placed = joinOnAgentMap(jobs, res.Holders, res.Unattributed, snap.Mismatched, res.Samples)
	if res.Windows != nil {
		joinOnAgentMap(jobs, res.Holders, res.Unattributed, snap.Mismatched, res.Windows)
	}
	for node, why := range snap.Mismatched {
		c.cfg.Log.Warn(mismatchLog(res.MapFrom), "node", node, "detail", why)
	}
	if !res.Newest.IsZero() {
		c.cfg.Metrics.DataAge.Set(start.Sub(res.Newest).Seconds())
	}
	stored, err := c.cfg.Store.States(ctx)
	if err != nil {
		return decide.Decision{}, fmt.Errorf("read states: %w", err)
	}
	snap.States = make(map[int64]decide.JobState, len(stored))
	for id, raw := range stored {
		var st decide.JobState
		if err := json.Unmarshal(raw, &st); err != nil {
			c.cfg.Log.Warn("stored state unreadable: starting the job afresh", "job_id", id, "error", err)
			continue
		}
		snap.States[id] = st
	}
	d := decide.Decide(snap, start, rules)
	c.noteSkips(d, snap, rules, start)
	c.saveUpcoming(ctx)

	// States first: a crash after this point finds the intents below and
	// does not decide the same warning twice.
	if snap.SlurmOK {
		// Only the states that changed are written (most jobs' stay as
		// they were, cycle after cycle): job_state's updated_at is when a
		// job's state last changed.
		raw := map[int64]json.RawMessage{}
		keep := make(map[int64]bool, len(d.States))
		for id, st := range d.States {
			b, err := json.Marshal(st)
			if err != nil {
				return d, err
			}
			if old, ok := stored[id]; !ok || !bytes.Equal(old, b) {
				raw[id] = b
			}
			keep[id] = true
		}
		if err := c.cfg.Store.SaveStates(ctx, raw, keep, start); err != nil {
			return d, fmt.Errorf("save states: %w", err)
		}
	}
	c.account(snap, d, byID, rules, start)
	if snap.SlurmOK {
		c.gauge(jobs, d.States)
	}
	for _, a := range d.Actions {
		if ok := c.execute(ctx, a, byID[a.JobID]); !ok {
			// Decide advanced the state as if the action had run; it did
			// not, so the job keeps its previous state and the next cycle
			// decides again.
			c.revertState(ctx, a.JobID, snap.States, start)
		}
	}
	if snap.SlurmOK {
		c.mu.Lock()
		all := c.jobs
		c.mu.Unlock()
		if err := c.recoverFailures(ctx, all, rules, start); err != nil {
			c.cfg.Log.Warn("recovery: some failed jobs were not handled this cycle; they are tried again next cycle", "error", err)
		}
		if err := c.observeWorth(ctx, all, start); err != nil {
			c.cfg.Log.Warn("the observed worth of reclaims was not brought up to date this cycle; the next cycle tries again", "error", err)
		}
	}
	if snap.SlurmOK {
		// Without the job list no node was asked for, and the collector
		// forgot them all; the rows kept are still a restart's best start.
		c.saveHeld(ctx, rules, nodes, start)
	}
	st := Status{At: start, SlurmOK: snap.SlurmOK, Source: snap.SourceOK, Jobs: len(snap.Jobs), Actions: len(d.Actions),
		Error: strings.Join(cycleErr, "; ")}
	c.mu.Lock()
	c.last = st
	c.mu.Unlock()
	if len(cycleErr) > 0 {
		return d, errors.New(st.Error)
	}
	return d, nil
}

// gauge sets the gauges of the cycle's jobs: the running GPU jobs by
// phase, their GPUs, and each one's info series; the pending jobs by
// tenant and reason.
func (c *Controller) gauge(running []slurmrest.Job, states map[int64]decide.JobState) {
	m := c.cfg.Metrics
	phases := map[decide.Phase]int{decide.Observed: 0, decide.Warned: 0, decide.Signalled: 0, decide.Notified: 0,
		decide.Recovered: 0, decide.Requeued: 0, decide.Cancelled: 0}
	// Counted in maps first: a few label sets, however many jobs.
	gpus := map[[2]string]int{}
	for _, j := range running {
		p := states[j.ID].Phase
		if p == "" {
			p = decide.Observed
		}
		phases[p]++
		gpus[[2]string{j.Partition, c.tenant(j.Account)}] += len(j.GPUs)
	}
	for p, n := range phases {
		m.Jobs.WithLabelValues(string(p)).Set(float64(n))
	}
	m.AllocatedGPUs.Reset()
	for k, n := range gpus {
		m.AllocatedGPUs.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
	c.gaugeJobInfo(running)
	c.mu.Lock()
	all := c.jobs
	c.mu.Unlock()
	pending := map[[2]string]int{}
	for _, j := range all {
		if !j.State.Has("PENDING") {
			continue
		}
		reason := j.StateReason
		if reason == "" {
			reason = "None"
		}
		pending[[2]string{c.tenant(j.Account), reason}]++
	}
	m.Pending.Reset()
	for k, n := range pending {
		m.Pending.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

// gaugeJobInfo keeps one strata_reclaim_job_info series per running GPU
// job. Most jobs run for many cycles unchanged, so only new jobs, jobs
// whose labels changed (a moved account) and ended jobs touch the vector.
func (c *Controller) gaugeJobInfo(running []slurmrest.Job) {
	m := c.cfg.Metrics
	now := make(map[int64][4]string, len(running))
	for _, j := range running {
		l := [4]string{strconv.FormatInt(j.ID, 10), c.tenant(j.Account), j.Account, j.Partition}
		now[j.ID] = l
		if old, ok := c.jobInfo[j.ID]; ok && old == l {
			continue
		} else if ok {
			m.JobInfo.DeleteLabelValues(old[:]...)
		}
		m.JobInfo.WithLabelValues(l[:]...).Set(1)
	}
	for id, old := range c.jobInfo {
		if _, ok := now[id]; !ok {
			m.JobInfo.DeleteLabelValues(old[:]...)
		}
	}
	c.jobInfo = now
}

// noteSkips counts the cycle's skips by reason, keeps each job's for the
// API, logs the jobs whose record could not be read, and notes the rules
// that judged nothing.
func (c *Controller) noteSkips(d decide.Decision, snap decide.Snapshot, rules reclaimrules.Rules, at time.Time) {
	c.mu.Lock()
	unreadable := c.unreadable
	c.mu.Unlock()
	skips := make(map[int64]SkipEntry, len(d.Skipped)+len(unreadable))
	for _, u := range unreadable {
		c.cfg.Log.Warn("job record unreadable: the job is skipped, the others are judged", "job_id", u.ID, "error", u.Err)
		c.cfg.Metrics.Skipped.WithLabelValues(SkipUnreadable.Label()).Inc()
		skips[u.ID] = SkipEntry{At: at, Reason: SkipUnreadable, Detail: u.Err.Error()}
	}
	for _, sk := range d.Skipped {
		c.cfg.Metrics.Skipped.WithLabelValues(sk.Reason.Label()).Inc()
		skips[sk.JobID] = SkipEntry{At: at, Reason: sk.Reason, Detail: sk.Detail, Judged: sk.Reason.Judged()}
	}
	c.noteDroughts(d, skips, rules, at)
	upcoming := make(map[int64]reclaimapi.Upcoming, len(d.Upcoming))
	for id, u := range d.Upcoming {
		upcoming[id] = reclaimapi.Upcoming{Action: string(u.Kind), At: u.At.UTC()}
	}
	c.mu.Lock()
	c.skips = skips
	c.upcoming = upcoming
	c.mu.Unlock()
}

// saveUpcoming writes what changed of each job's next step to the store,
// for a standby's API (ReadAPI). A failure is logged: the step is the
// API's to show, and the next cycle writes it again.
func (c *Controller) saveUpcoming(ctx context.Context) {
	c.mu.Lock()
	now, saved := c.upcoming, c.savedUpcoming
	c.mu.Unlock()
	set := map[int64]reclaimapi.Upcoming{}
	var gone []int64
	for id, u := range now {
		if old, ok := saved[id]; !ok || old.Action != u.Action || !old.At.Equal(u.At) {
			set[id] = u
		}
	}
	for id := range saved {
		if _, ok := now[id]; !ok {
			gone = append(gone, id)
		}
	}
	if err := c.cfg.Store.SaveUpcoming(ctx, set, gone, saved == nil); err != nil {
		c.cfg.Log.Warn("saving the jobs' next steps failed: a standby's API may show old ones", "error", err)
		return
	}
	c.mu.Lock()
	c.savedUpcoming = now
	c.mu.Unlock()
}

// noteDroughts logs, once per rule window, a rule that had jobs for a
// whole window and judged none of them: what an admin sees when the
// samples never cover the rule's window.
func (c *Controller) noteDroughts(d decide.Decision, skips map[int64]SkipEntry, rules reclaimrules.Rules, at time.Time) {
	type tally struct {
		jobs, judged int
		why          SkipEntry
	}
	byRule := map[string]*tally{}
	for id, st := range d.States {
		if st.Rule == "" {
			continue
		}
		t := byRule[st.Rule]
		if t == nil {
			t = &tally{}
			byRule[st.Rule] = t
		}
		t.jobs++
		sk, skipped := skips[id]
		if !skipped || sk.Judged {
			t.judged++
		} else if t.why.Reason == "" {
			t.why = sk
		}
	}
	for name := range c.drought {
		if t := byRule[name]; t == nil || t.judged > 0 {
			delete(c.drought, name)
		}
	}
	for _, rule := range rules.WithDefaults().Rules {
		t := byRule[rule.Name]
		if t == nil || t.judged > 0 {
			continue
		}
		since, ok := c.drought[rule.Name]
		if !ok {
			c.drought[rule.Name] = at
			continue
		}
		if window := rule.Idle.Window.Std(); at.Sub(since) >= window {
			c.cfg.Log.Warn("a rule has judged no job for a whole window", "rule", rule.Name, "window", window, "jobs", t.jobs,
				"reason", t.why.Reason, "detail", t.why.Detail)
			c.drought[rule.Name] = at
		}
	}
}

// account adds the cycle's idle GPU time to the metrics: for each job
// judged idle (warned, signalled or notified), the time its GPUs' new
// samples show idle (IdleGPUSeconds: observed idle time only, a sample
// standing for at most one sample interval before it) and the time it held
// its GPUs (JudgedIdleGPUSeconds, seen or not). Their ratio is how much of
// the time judged idle the idle figure rests on.
func (c *Controller) account(snap decide.Snapshot, d decide.Decision, byID map[int64]slurmrest.Job, rules reclaimrules.Rules, at time.Time) {
	since := c.accounted
	c.accounted = at
	if since.IsZero() {
		if c.interval <= 0 {
			return // the first cycle of a controller not run by Run: nothing to count from
		}
		since = at.Add(-c.interval)
	}
	iv := snap.SampleInterval
	if iv <= 0 {
		iv = decide.DefaultSampleInterval
	}
	idle := map[int64]bool{}
	for _, a := range d.Actions {
		if a.Kind != decide.Recover {
			idle[a.JobID] = true
		}
	}
	for id, st := range d.States {
		if st.Phase == decide.Warned || st.Phase == decide.Signalled || st.Phase == decide.Notified {
			idle[id] = true
		}
	}
	rules = rules.WithDefaults()
	for id := range idle {
		j, ok := byID[id]
		if !ok {
			continue
		}
		tenant := c.tenant(j.Account)
		c.cfg.Metrics.JudgedIdleGPUSeconds.WithLabelValues(tenant).Add(float64(len(j.GPUs)) * at.Sub(since).Seconds())
		rule, ok := rules.For(c.toDecide(j).Info())
		if !ok {
			continue
		}
		seen := 0.0
		for _, g := range j.GPUs {
			key := decide.GPUKey{Node: g.Node, Index: g.Index}
			if w, ok := snap.Windows[key]; ok {
				// A cycle reads a few new samples: they are among the
				// window's whole ones, unless more than WindowTail came
				// since the last (the time before those is not counted).
				before, recent := w.Recent()
				seen += idleSecondsAfter(before, recent, since, at, iv, rule.Idle)
				continue
			}
			seen += idleSeconds(snap.Samples[key], since, at, iv, rule.Idle)
		}
		c.cfg.Metrics.IdleGPUSeconds.WithLabelValues(tenant).Add(seen)
	}
}

// idleSeconds is the time the samples taken in (since, at] show idle
// under def: each stands for the time since the sample before it, and at
// most iv.
func idleSeconds(samples []decide.Sample, since, at time.Time, iv time.Duration, def reclaimrules.IdleDef) float64 {
	return idleSecondsAfter(time.Time{}, samples, since, at, iv, def)
}

// idleSecondsAfter is idleSeconds of samples that follow one taken at
// before (zero: none).
func idleSecondsAfter(before time.Time, samples []decide.Sample, since, at time.Time, iv time.Duration, def reclaimrules.IdleDef) float64 {
	total := 0.0
	for i, s := range samples {
		if !s.At.After(since) || s.At.After(at) {
			continue
		}
		from := s.At.Add(-iv)
		prev := before
		if i > 0 {
			prev = samples[i-1].At
		}
		if !prev.IsZero() && prev.After(from) {
			from = prev
		}
		if s.UtilPercent <= def.MaxUtilPercent && s.MemActivityPercent <= def.MaxMemActivityPercent {
			total += s.At.Sub(from).Seconds()
		}
	}
	return total
}

// revertState puts back the state a job had before this cycle.
func (c *Controller) revertState(ctx context.Context, id int64, prev map[int64]decide.JobState, at time.Time) {
	st, ok := prev[id]
	if !ok {
		st = decide.JobState{Phase: decide.Observed, Since: at}
	}
	b, err := json.Marshal(st)
	if err == nil {
		err = c.cfg.Store.SaveStates(ctx, map[int64]json.RawMessage{id: b}, nil, at)
	}
	if err != nil {
		c.cfg.Log.Error("restoring the state of a job whose action did not run failed", "job_id", id, "error", err)
	}
}

// execute carries out one action exactly once, or records why not. It
// reports whether the action ran (or was recorded as a dry run).
func (c *Controller) execute(ctx context.Context, a decide.Action, j slurmrest.Job) bool {
	log := c.cfg.Log
	rec := store.Record{JobID: a.JobID, Tenant: c.tenant(j.Account), Account: j.Account, User: j.User, Kind: string(a.Kind),
		Rule: a.Rule, Reason: a.Reason, DecidedAt: c.cfg.Now()}
	for _, g := range a.Evidence.GPUs {
		rec.GPUs = append(rec.GPUs, store.GPU{Node: g.GPU.Node, Index: g.GPU.Index})
	}
	rec.Evidence, _ = json.Marshal(a.Evidence)
	if a.DryRun {
		rec.Status = store.StatusDryRun
		if _, err := c.cfg.Store.Intent(ctx, rec); err != nil {
			log.Error("recording a dry-run decision failed", "job_id", a.JobID, "error", err)
		}
		log.Info("reclaim action (dry run: not carried out)", "action", a)
		c.cfg.Metrics.Actions.WithLabelValues(rec.Tenant, string(a.Kind), "dry-run").Inc()
		return true
	}
	id, err := c.cfg.Store.Intent(ctx, rec)
	if err != nil {
		// Without a recorded intent the action does not run: a crash
		// could otherwise repeat it unseen.
		log.Error("recording the intent failed: action not carried out", "job_id", a.JobID, "kind", a.Kind, "error", err)
		c.cfg.Metrics.Actions.WithLabelValues(rec.Tenant, string(a.Kind), "failed").Inc()
		return false
	}
	return c.carryOut(ctx, id, a, j, rec)
}

// carryOut re-reads the job, acts, and finishes the record. It reports
// whether the action ran.
func (c *Controller) carryOut(ctx context.Context, id int64, a decide.Action, j slurmrest.Job, rec store.Record) bool {
	log := c.cfg.Log
	finish := func(status, errText string) {
		if err := c.cfg.Store.Finish(ctx, id, status, errText, c.cfg.Now()); err != nil {
			log.Error("recording the outcome failed", "job_id", a.JobID, "record", id, "error", err)
		}
		c.cfg.Metrics.Actions.WithLabelValues(rec.Tenant, string(a.Kind), status).Inc()
	}
	now, err := c.cfg.Slurm.Job(ctx, a.JobID)
	if err != nil {
		log.Warn("reclaim action abandoned: the job could not be re-read", "action", a, "error", err)
		finish(store.StatusAbandoned, "re-read: "+err.Error())
		return false
	}
	if !now.Running() {
		log.Info("reclaim action abandoned: the job is no longer running", "action", a, "state", now.State.String())
		finish(store.StatusAbandoned, "job is "+now.State.String())
		return false
	}
	if err := a.StillApplies(c.toDecide(now)); err != nil {
		log.Info("reclaim action abandoned", "action", a, "why", err.Error())
		finish(store.StatusAbandoned, err.Error())
		return false
	}
	if err := c.act(ctx, a, now); err != nil {
		log.Error("reclaim action failed", "action", a, "error", err)
		finish(store.StatusFailed, err.Error())
		return false
	}
	log.Info("reclaim action", "action", a, "job", string(now.Ref()), "user", now.User, "account", now.Account, "tenant", rec.Tenant)
	finish(store.StatusDone, "")
	if a.Kind == decide.Requeue || a.Kind == decide.RequeueHold || a.Kind == decide.Cancel {
		at := c.cfg.Now()
		c.cfg.Metrics.ReclaimedGPUSeconds.WithLabelValues(rec.Tenant, a.Rule).Add(reclaimedSeconds(now, at))
		c.keepReclaim(ctx, id, rec, now, at)
	}
	return true
}

// reclaimedSeconds is the GPU time a reclaimed job would still have held:
// its GPUs times what was left of its time limit.
func reclaimedSeconds(j slurmrest.Job, now time.Time) float64 {
	if j.TimeLimit <= 0 || j.StartTime.IsZero() {
		return 0
	}
	left := j.StartTime.Add(j.TimeLimit).Sub(now)
	if left < 0 {
		return 0
	}
	return float64(len(j.GPUs)) * left.Seconds()
}

// act marks the job and does what the action says.
func (c *Controller) act(ctx context.Context, a decide.Action, j slurmrest.Job) error {
	// The re-read job's admin comment: an admin's note in it is kept.
	mark := decide.WithMarker(j.AdminComment, a.Marker())
	// Signals, requeues and cancels name an array task by its task ref:
	// the array's own record carries the array's ID, which reaches every
	// task. Updates are the other way round: slurmrestd takes them only by
	// a record's own ID, which reaches that record alone (a running record
	// holds no pending tasks), and reads "4300+1" as the leader 4300.
	ref, own := j.Ref(), slurmrest.RefOf(j.ID)
	if err := c.cfg.Slurm.UpdateRef(ctx, own, slurmrest.JobUpdate{AdminComment: &mark}); err != nil {
		return fmt.Errorf("mark job %s: %w", ref, err)
	}
	switch a.Kind {
	case decide.Signal:
		batchOnly := c.cfg.SignalBatchOnly // skip-unless-requested: a job that asked
		switch a.SignalMode {
		case reclaimrules.SignalBatch:
			batchOnly = true
		case reclaimrules.SignalAllSteps:
			batchOnly = false
		}
		if j.HetComponent() && j.HetJobOffset > 0 {
			batchOnly = false // the batch shell is the leader's: this component's steps get it
		}
		if err := c.cfg.Slurm.SignalRef(ctx, ref, a.Signal, batchOnly); err != nil {
			return err
		}
	case decide.Requeue, decide.RequeueHold:
		if j.HetComponent() {
			// Slurm requeues only whole heterogeneous jobs; Decide never
			// asks for this, and a re-read that finds one must not.
			return fmt.Errorf("job %s is a component of a heterogeneous job, which Slurm requeues only whole: not requeued", ref)
		}
		if !j.Requeue { // --no-requeue, and the rule's no_requeue is requeue
			if err := c.cfg.Slurm.UpdateRef(ctx, own, slurmrest.JobUpdate{Requeue: ptrTo(true)}); err != nil {
				return fmt.Errorf("make job %s requeueable: %w", ref, err)
			}
		}
		if err := c.cfg.Slurm.RequeueRef(ctx, ref, slurmrest.RequeueOptions{Hold: a.Kind == decide.RequeueHold, Reason: a.Reason}); err != nil {
			return err
		}
	case decide.Cancel:
		if j.HetComponent() && j.HetJobOffset == 0 {
			return fmt.Errorf("job %s leads a heterogeneous job and runs its batch script: cancelling it would end every component: not cancelled", ref)
		}
		if err := c.cfg.Slurm.CancelRef(ctx, ref); err != nil {
			return err
		}
	}
	if c.cfg.Notifier != nil {
		n := Notice{JobID: a.JobID, User: j.User, Account: j.Account, Tenant: c.tenant(j.Account), Action: string(a.Kind),
			Rule: a.Rule, Reason: a.Reason, At: c.cfg.Now()}
		if err := c.cfg.Notifier.Notify(ctx, n); err != nil {
			c.cfg.Log.Warn("notifying the owner failed", "job_id", a.JobID, "user", j.User, "error", err)
		}
	}
	return nil
}

// Recover finishes or abandons, exactly once, the intents a crash left
// open: an action whose effect is visible is recorded done; an action on a
// job that is still the same run is carried out now; the rest abandoned.
func (c *Controller) Recover(ctx context.Context) error {
	pending, err := c.cfg.Store.Pending(ctx)
	if err != nil {
		return err
	}
	var nodes map[string]slurmrest.Node // read once, for the first node record
	for _, rec := range pending {
		if rec.Kind == KindRetry || rec.Kind == KindHold {
			if err := c.recoverIntent(ctx, rec); err != nil {
				return err
			}
			continue
		}
		if rec.Node != "" {
			if nodes == nil {
				list, err := c.cfg.Slurm.Nodes(ctx)
				if err != nil {
					return fmt.Errorf("list nodes: %w", err)
				}
				nodes = make(map[string]slurmrest.Node, len(list))
				for _, n := range list {
					nodes[n.Name] = n
				}
			}
			if err := c.recoverNode(ctx, rec, nodes); err != nil {
				return err
			}
			continue
		}
		var ev decide.Evidence
		_ = json.Unmarshal(rec.Evidence, &ev)
		a := decide.Action{JobID: rec.JobID, Kind: decide.Kind(rec.Kind), Rule: rec.Rule, Reason: rec.Reason, Evidence: ev}
		if a.Kind == decide.Signal {
			a.Signal = c.signalOf(rec.Rule)
		}
		j, err := c.cfg.Slurm.Job(ctx, rec.JobID)
		status, why := "", ""
		switch {
		case errors.Is(err, slurmrest.ErrNotFound):
			status, why = store.StatusAbandoned, "job gone after a restart"
		case err != nil:
			return fmt.Errorf("re-read job %d: %w", rec.JobID, err)
		case a.Kind == decide.Cancel && j.State.Has("CANCELLED"),
			(a.Kind == decide.Requeue || a.Kind == decide.RequeueHold) && (j.RestartCount > 0 && !j.StartTime.Equal(ev.JobStart)):
			status, why = store.StatusDone, "found done after a restart"
		case a.Kind == decide.Signal || a.Kind == decide.Warn || a.Kind == decide.Notify || a.Kind == decide.Recover:
			// Whether a signal or a notice went out cannot be checked:
			// never send it twice.
			status, why = store.StatusAbandoned, "interrupted by a restart; not repeated, since it cannot be checked"
		}
		if status != "" {
			if err := c.cfg.Store.Finish(ctx, rec.ID, status, why, c.cfg.Now()); err != nil {
				return err
			}
			c.cfg.Log.Info("open intent settled after a restart", "job_id", rec.JobID, "kind", rec.Kind, "outcome", status, "why", why)
			continue
		}
		c.cfg.Log.Info("finishing an open intent after a restart", "job_id", rec.JobID, "kind", rec.Kind)
		c.carryOut(ctx, rec.ID, a, j, rec)
	}
	return nil
}

func (c *Controller) signalOf(rule string) string {
	for _, r := range c.cfg.Rules().Rules {
		if r.Name == rule {
			return r.Signal.Name
		}
	}
	return "USR1"
}

func ptrTo[T any](v T) *T { return &v }
