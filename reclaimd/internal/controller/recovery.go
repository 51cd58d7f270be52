package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/userfile"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// Record kinds of recovery's actions (store.Record.Kind).
const (
	KindRetry = "retry"
	KindHold  = "retry-hold"
)

// Notice actions of recovery.
const (
	NoticeRetry      = "retry"
	NoticeHold       = "retry-hold"
	NoticeNotRetried = "not-retried"
)

// FaultSource gives the GPU faults (Xid, ECC) the node agents reported on
// the given nodes in [since, until].
type FaultSource interface {
	Faults(ctx context.Context, nodes []string, since, until time.Time) ([]failure.Fault, error)
}

// Recovery configures failure classification and retries.
type Recovery struct {
	// Faults gives the GPU faults (nil: none are known, so no run is a
	// gpu_fault).
	Faults FaultSource
	// Matcher holds the nccl signatures (nil: the defaults).
	Matcher *failure.Matcher
	// ApplicationXids are the Xids the job's own program causes, never a
	// gpu_fault (nil: failure.DefaultApplicationXids; empty: none).
	ApplicationXids []int
	// LogRoot is where the jobs' stderr paths are read beneath ("": no
	// stderr is read, and no run is nccl). "/" on a host that mounts the
	// jobs' file systems where the nodes do.
	LogRoot string
	// StderrLines is how many lines of stderr's end are read, matched and
	// sent with notices (0: 20).
	StderrLines int
}

// recoveryState is what recovery keeps between cycles: the runs seen
// running (a job Slurm requeues shows its nodes no more) and the runs
// already classified.
type recoveryState struct {
	loaded bool
	runs   map[int64]store.Run // the latest run seen of each job
	done   map[runKey]bool
}

type runKey struct {
	job   int64
	start int64
}

// runMemory is how long a run seen running is remembered.
const runMemory = 7 * 24 * time.Hour

// recoveryEvidence is the evidence of a retry or hold record.
type recoveryEvidence struct {
	Failure  failure.Result   `json:"failure"`
	Decision failure.Decision `json:"decision"`
	RunStart time.Time        `json:"run_start"`
	Restarts int              `json:"restarts"`
	// SlurmRequeued: Slurm had requeued the job itself (it was pending).
	SlurmRequeued bool      `json:"requeued_by_slurm,omitempty"`
	FailedAt      time.Time `json:"failed_at"`
}

func (c *Controller) loadRecovery(ctx context.Context, now time.Time) error {
	if c.rec.loaded {
		return nil
	}
	runs, err := c.cfg.Store.Runs(ctx, now.Add(-runMemory))
	if err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	c.rec.runs, c.rec.done = map[int64]store.Run{}, map[runKey]bool{}
	for _, r := range runs {
		c.rec.runs[r.JobID] = r // ordered by start: the latest stays
	}
	if err := c.cfg.Store.PruneRuns(ctx, now.Add(-runMemory)); err != nil {
		return err
	}
	c.rec.loaded = true
	return nil
}

// recoverFailures classifies, once, every run of the job list that ended
// other than COMPLETED, and retries, holds or leaves it as its recovery
// rule says. It returns the problems it met; none stops the cycle.
func (c *Controller) recoverFailures(ctx context.Context, jobs []slurmrest.Job, rules reclaimrules.Rules, now time.Time) error {
	if err := c.loadRecovery(ctx, now); err != nil {
		return err
	}
	// A job Slurm requeued itself (a node failure) shows the time it may
	// start again as its start, and may already run again when the next
	// cycle comes: its ended run is the one seen before, found by the
	// restart count.
	before := map[int64]store.Run{}
	for _, j := range jobs {
		if r, ok := c.rec.runs[j.ID]; ok && j.RestartCount > r.Restarts && (j.Running() || j.State.Has("PENDING")) {
			before[j.ID] = r
		}
	}
	var errs []error
	if err := c.seenRunning(ctx, jobs, now); err != nil {
		errs = append(errs, err)
	}
	var down []string
	downRead := false
	for _, j := range jobs {
		seen, requeued := before[j.ID]
		if !requeued && (j.StartTime.IsZero() || j.Running() || j.State.Has("PENDING")) {
			continue // never ran, running its own run, or waiting
		}
		if j.State.Has("COMPLETED") || j.State.Has("COMPLETING") {
			continue
		}
		start := j.StartTime
		if requeued {
			start = seen.Start
		}
		key := runKey{j.ID, start.Unix()}
		if c.rec.done[key] {
			continue
		}
		classified, err := c.cfg.Store.Classified(ctx, j.ID, start)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if classified {
			c.rec.done[key] = true
			continue
		}
		if !requeued {
			seen, _ = c.rec.runs[j.ID]
			if !seen.Start.Equal(start.UTC().Truncate(time.Second)) {
				seen = store.Run{} // the run ended unseen: the record's nodes are its
			}
		}
		if !downRead {
			down, err = c.downNodes(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("read nodes: %w", err))
				break // classified next cycle: without the nodes' state, a node_fail reads as a user error
			}
			downRead = true
		}
		if err := c.recoverOne(ctx, j, seen, start, requeued, down, rules, now); err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", j.ID, err))
			continue
		}
		c.rec.done[key] = true
	}
	c.forget(jobs)
	return errors.Join(errs...)
}

// forget drops what is kept of jobs no longer in the listing (Slurm
// forgets a finished job after MinJobAge): the memory stays the size of
// the listing. The runs stay in the store for a restart.
func (c *Controller) forget(jobs []slurmrest.Job) {
	listed := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		listed[j.ID] = true
	}
	for k := range c.rec.done {
		if !listed[k.job] {
			delete(c.rec.done, k)
		}
	}
	for id := range c.rec.runs {
		if !listed[id] {
			delete(c.rec.runs, id)
		}
	}
}

// seenRunning remembers the runs seen running for the first time (in
// one transaction: a cluster's first cycle sees thousands) and closes
// the failures they end.
func (c *Controller) seenRunning(ctx context.Context, jobs []slurmrest.Job, now time.Time) error {
	var fresh []store.Run
	byID := map[int64]slurmrest.Job{}
	for _, j := range jobs {
		if !j.Running() || j.StartTime.IsZero() {
			continue
		}
		start := j.StartTime.UTC().Truncate(time.Second)
		if r, ok := c.rec.runs[j.ID]; ok && r.Start.Equal(start) {
			continue
		}
		r := store.Run{JobID: j.ID, Start: start, Restarts: j.RestartCount, Nodes: j.Nodes}
		for _, g := range j.GPUs {
			r.GPUs = append(r.GPUs, store.GPU{Node: g.Node, Index: g.Index})
		}
		fresh = append(fresh, r)
		byID[j.ID] = j
	}
	if len(fresh) == 0 {
		return nil
	}
	again, err := c.cfg.Store.SaveRuns(ctx, fresh, now)
	if err != nil {
		return err
	}
	for _, r := range fresh {
		c.rec.runs[r.JobID] = r
	}
	for _, f := range again {
		j := byID[f.JobID]
		c.cfg.Metrics.RecoveryTimeToRunning.Observe(j.StartTime.Sub(f.FailedAt).Seconds())
		c.cfg.Log.Info("job running again after a failure", "job_id", j.ID, "class", f.Class, "node", strings.Join(j.Nodes, ","),
			"after", j.StartTime.Sub(f.FailedAt).Round(time.Second).String())
	}
	return nil
}

func (c *Controller) downNodes(ctx context.Context) ([]string, error) {
	nodes, err := c.cfg.Slurm.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		for _, s := range n.State {
			if s == "DOWN" || s == "FAIL" || s == "NOT_RESPONDING" || s == "FAILING" {
				out = append(out, n.Name)
				break
			}
		}
	}
	return out, nil
}

// recoverOne classifies one ended run, records it, and carries out the
// decision.
func (c *Controller) recoverOne(ctx context.Context, j slurmrest.Job, seen store.Run, start time.Time, requeued bool, down []string,
	rules reclaimrules.Rules, now time.Time) error {
	run := failure.Run{JobID: j.ID, State: j.State, StateReason: j.StateReason, ExitCode: j.ExitCode, ExitSignal: j.ExitSignal,
		Nodes: j.Nodes, Start: start, End: j.EndTime, AdminComment: j.AdminComment, Requeued: requeued}
	runningAgain := requeued && j.Running()
	if runningAgain {
		run.State, run.Nodes = slurmrest.JobState{"PENDING"}, nil // as it was between its runs
	}
	for _, g := range j.GPUs {
		run.GPUs = append(run.GPUs, failure.GPU{Node: g.Node, Index: g.Index})
	}
	// An ended job's record keeps its nodes but not its GPUs (no
	// gres_detail): the run seen running has them, for its GPU faults.
	if !seen.Start.IsZero() && (len(run.Nodes) == 0 || requeued || len(run.GPUs) == 0) {
		run.Nodes = seen.Nodes
		run.GPUs = nil
		for _, g := range seen.GPUs {
			run.GPUs = append(run.GPUs, failure.GPU{Node: g.Node, Index: g.Index})
		}
	}
	if requeued || run.End.IsZero() || run.End.After(now) {
		run.End = now // a requeued record's end time is its time limit's
	}
	in := failure.Input{Run: run, DownNodes: down, ApplicationXids: c.cfg.Recovery.ApplicationXids}
	if in.ApplicationXids == nil {
		in.ApplicationXids = failure.DefaultApplicationXids
	}
	if c.cfg.Recovery.Faults != nil && len(run.Nodes) > 0 {
		f, err := c.cfg.Recovery.Faults.Faults(ctx, run.Nodes, run.Start, run.End.Add(failure.FaultGrace))
		if err != nil {
			// Unknown faults would read as a user error or nccl: try
			// again next cycle.
			return fmt.Errorf("read GPU faults: %w", err)
		}
		in.Faults = f
	}
	in.StderrTail = c.stderrTail(j)
	res, ok := failure.Classify(in, c.cfg.Recovery.Matcher)
	if !ok {
		return nil
	}
	tenant := c.tenant(j.Account)
	info := c.toDecide(j).Info()
	rule, hasRule := rules.RecoveryFor(info)
	past, err := c.pastFailures(ctx, j.ID)
	if err != nil {
		return err
	}
	required, _ := hostlist.Expand(j.RequiredNodes)
	excluded, _ := hostlist.Expand(j.ExcludedNodes)
	fj := failure.Job{Rule: rule, HasRule: hasRule, Account: j.Account, Past: past, ExcludedNodes: excluded,
		RequiredNodes:  required,
		NotRequeueable: !requeued && !j.Requeue, HetComponent: j.HetComponent()}
	dec := failure.Decide(res, fj)
	if runningAgain && dec.Action != failure.Leave {
		// Slurm requeued it and it started again before a cycle saw it
		// waiting: it was retried; its failed node is down.
		dec = failure.Decision{Action: failure.Leave, Rule: dec.Rule, Owner: dec.Owner, Admins: dec.Admins,
			Reason: fmt.Sprintf("requeued by Slurm after %s on %s and running again on %s", res.Class, res.Where(), strings.Join(j.Nodes, ","))}
	}
	if dec.Action != failure.Leave {
		gone, err := c.accountGone(ctx, j.Account)
		if err != nil {
			return fmt.Errorf("read accounts: %w", err)
		}
		if gone {
			fj.AccountGone = true
			dec = failure.Decide(res, fj)
		}
	}
	c.cfg.Metrics.RecoveryFailures.WithLabelValues(tenant, string(res.Class)).Inc()
	evRaw, _ := json.Marshal(res.Evidence)
	decRaw, _ := json.Marshal(dec)
	f := store.Failure{JobID: j.ID, Start: start, Tenant: tenant, Account: j.Account, User: j.User, Class: string(res.Class),
		Evidence: evRaw, Decision: decRaw, Action: string(dec.Action), Reason: dec.Reason, FailedAt: run.End, ClassifiedAt: now}
	log := c.cfg.Log.With("job_id", j.ID, "class", res.Class, "where", res.Where(), "state", j.State.String(), "exit_code", j.ExitCode,
		"decision", dec.Action, "reason", dec.Reason)
	if dec.Action == failure.Leave {
		if _, added, err := c.cfg.Store.AddFailure(ctx, f); err != nil || !added {
			return err
		}
		log.Info("job failure classified: left as it is", "log_line", res.Evidence.LogLine)
		if res.Class != failure.Reclaimed {
			result := retryResult(dec)
			if runningAgain {
				result = "requeued"
			}
			c.cfg.Metrics.RecoveryRetries.WithLabelValues(string(res.Class), result).Inc()
		}
		if res.Class != failure.Reclaimed && res.Class != failure.Cancelled && dec.Rule != "" && !rules.DryRun {
			c.recoveryNotice(ctx, j, tenant, NoticeNotRetried, res, dec, in.StderrTail)
		}
		return nil
	}
	// A retry or hold: the intent first, then the failure that names it,
	// then the action; a crash between any two is settled by Recover.
	ev := recoveryEvidence{Failure: res, Decision: dec, RunStart: start, Restarts: j.RestartCount, SlurmRequeued: requeued,
		FailedAt: run.End}
	raw, _ := json.Marshal(ev)
	kind := KindRetry
	if dec.Action == failure.Hold {
		kind = KindHold
	}
	rec := store.Record{JobID: j.ID, Tenant: tenant, Account: j.Account, User: j.User, Kind: kind, Rule: dec.Rule, Reason: dec.Reason,
		Evidence: raw, DecidedAt: now}
	if rules.DryRun {
		// The rules' dry run holds for recovery too: decided and
		// recorded, nothing done, nobody told.
		rec.Status = store.StatusDryRun
	}
	id, err := c.cfg.Store.Intent(ctx, rec)
	if err != nil {
		return fmt.Errorf("record the intent: %w", err)
	}
	f.RecordID = &id
	if _, _, err := c.cfg.Store.AddFailure(ctx, f); err != nil {
		return err
	}
	if rules.DryRun {
		log.Info("recovery action (dry run: not carried out)", "exclude", strings.Join(dec.Exclude, ","), "log_line", res.Evidence.LogLine)
		return nil
	}
	c.carryOutRecovery(ctx, id, j, ev, rec, in.StderrTail)
	return nil
}

// carryOutRecovery requeues (held), updates and releases the job as the
// decision says, and finishes its record.
func (c *Controller) carryOutRecovery(ctx context.Context, id int64, j slurmrest.Job, ev recoveryEvidence, rec store.Record, tail []string) {
	dec, res := ev.Decision, ev.Failure
	log := c.cfg.Log.With("job_id", j.ID, "class", res.Class, "decision", dec.Action, "reason", dec.Reason)
	err := c.applyRecovery(ctx, j, ev, !ev.SlurmRequeued)
	status, errText := store.StatusDone, ""
	if err != nil {
		status, errText = store.StatusFailed, err.Error()
		log.Error("recovery action failed", "error", err)
		c.cfg.Metrics.RecoveryRetries.WithLabelValues(string(res.Class), "failed").Inc()
	} else {
		log.Info("recovery action", "exclude", strings.Join(dec.Exclude, ","), "backoff", dec.Backoff.String(), "log_line", res.Evidence.LogLine)
		c.cfg.Metrics.RecoveryRetries.WithLabelValues(string(res.Class), retryResult(dec)).Inc()
	}
	if ferr := c.cfg.Store.Finish(ctx, id, status, errText, c.cfg.Now()); ferr != nil {
		log.Error("recording the outcome failed", "record", id, "error", ferr)
	}
	if err == nil {
		action := NoticeRetry
		if dec.Action == failure.Hold {
			action = NoticeHold
		}
		c.recoveryNotice(ctx, j, rec.Tenant, action, res, dec, tail)
	}
}

// applyRecovery does a decision to a job: put it back in the queue held
// (a requeue of a finished job, or a hold of one Slurm requeued), mark it
// and exclude its failed nodes, and, for a retry, release it. Each step
// can be made again: Recover repeats them after a crash.
func (c *Controller) applyRecovery(ctx context.Context, j slurmrest.Job, ev recoveryEvidence, requeue bool) error {
	dec := ev.Decision
	ref, own := j.Ref(), slurmrest.RefOf(j.ID)
	if requeue {
		// Held, so that it cannot start before its failed nodes are
		// excluded: a finished job takes no update until it is pending.
		if err := c.cfg.Slurm.RequeueRef(ctx, ref, slurmrest.RequeueOptions{Hold: true, Reason: dec.Reason}); err != nil {
			return fmt.Errorf("requeue: %w", err)
		}
	} else if err := c.cfg.Slurm.UpdateRef(ctx, own, slurmrest.JobUpdate{Hold: ptrTo(true)}); err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	mark := decide.WithMarker(j.AdminComment, dec.Mark())
	upd := slurmrest.JobUpdate{AdminComment: &mark}
	if len(dec.Exclude) > 0 {
		ex := slices.Clone(dec.Exclude)
		upd.ExcludedNodes = &ex
	}
	if dec.Backoff > 0 && dec.Action == failure.Retry {
		begin := c.cfg.Now().Add(dec.Backoff)
		upd.BeginTime = &begin
	}
	if err := c.cfg.Slurm.UpdateRef(ctx, own, upd); err != nil {
		return fmt.Errorf("mark and exclude nodes: %w", err)
	}
	if dec.Action == failure.Retry {
		if err := c.cfg.Slurm.UpdateRef(ctx, own, slurmrest.JobUpdate{Hold: ptrTo(false)}); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// recoverIntent settles, after a restart, a retry or hold whose outcome
// was not recorded: done when the job was requeued since (the rest of
// its steps made again), carried out when it still shows the failed run,
// abandoned when it is gone or ran again.
func (c *Controller) recoverIntent(ctx context.Context, rec store.Record) error {
	var ev recoveryEvidence
	if err := json.Unmarshal(rec.Evidence, &ev); err != nil {
		return c.settle(ctx, rec, store.StatusAbandoned, "evidence unreadable after a restart")
	}
	// The failure names this intent: a crash between the two leaves
	// none, and the run must not be classified again.
	evRaw, _ := json.Marshal(ev.Failure.Evidence)
	decRaw, _ := json.Marshal(ev.Decision)
	id := rec.ID
	if _, _, err := c.cfg.Store.AddFailure(ctx, store.Failure{JobID: rec.JobID, Start: ev.RunStart, Tenant: rec.Tenant, Account: rec.Account,
		User: rec.User, Class: string(ev.Failure.Class), Evidence: evRaw, Decision: decRaw, Action: string(ev.Decision.Action),
		Reason: ev.Decision.Reason, RecordID: &id, FailedAt: ev.FailedAt, ClassifiedAt: rec.DecidedAt}); err != nil {
		return err
	}
	j, err := c.cfg.Slurm.Job(ctx, rec.JobID)
	switch {
	case errors.Is(err, slurmrest.ErrNotFound):
		return c.settle(ctx, rec, store.StatusAbandoned, "job gone after a restart")
	case err != nil:
		return fmt.Errorf("re-read job %d: %w", rec.JobID, err)
	case j.Running() && j.RestartCount > ev.Restarts:
		return c.settle(ctx, rec, store.StatusDone, "found running again after a restart")
	case j.Running():
		return c.settle(ctx, rec, store.StatusAbandoned, "the job ran again before the restart")
	case j.State.Has("PENDING") && (j.RestartCount > ev.Restarts || ev.SlurmRequeued):
		// Requeued (by this intent, or by Slurm before it): the steps
		// after the requeue are made again.
		if err := c.applyRecovery(ctx, j, ev, false); err != nil {
			c.cfg.Log.Error("finishing a recovery action after a restart failed", "job_id", rec.JobID, "error", err)
			return c.settle(ctx, rec, store.StatusFailed, err.Error())
		}
		return c.settle(ctx, rec, store.StatusDone, "found requeued after a restart; marked and released")
	}
	if !j.StartTime.Equal(ev.RunStart) {
		return c.settle(ctx, rec, store.StatusAbandoned, "the job ran again before the restart")
	}
	c.cfg.Log.Info("finishing an open recovery intent after a restart", "job_id", rec.JobID, "kind", rec.Kind)
	c.carryOutRecovery(ctx, rec.ID, j, ev, rec, nil)
	return nil
}

func (c *Controller) settle(ctx context.Context, rec store.Record, status, why string) error {
	if err := c.cfg.Store.Finish(ctx, rec.ID, status, why, c.cfg.Now()); err != nil {
		return err
	}
	c.cfg.Log.Info("open intent settled after a restart", "job_id", rec.JobID, "kind", rec.Kind, "outcome", status, "why", why)
	return nil
}

// retryResult is a decision's result label of strata_recovery_retries_total.
func retryResult(d failure.Decision) string {
	switch {
	case d.Action == failure.Retry:
		return "requeued"
	case strings.HasPrefix(d.Reason, "retries exhausted") || strings.Contains(d.Reason, "distinct nodes"):
		return "exhausted"
	}
	return "refused"
}

func (c *Controller) pastFailures(ctx context.Context, jobID int64) ([]failure.Past, error) {
	fs, err := c.cfg.Store.JobFailures(ctx, jobID)
	if err != nil {
		return nil, err
	}
	var out []failure.Past
	for _, f := range fs {
		var ev failure.Evidence
		_ = json.Unmarshal(f.Evidence, &ev)
		p := failure.Past{Class: failure.Class(f.Class), Node: ev.Node, Nodes: ev.Nodes, Action: failure.Action(f.Action)}
		if len(ev.DownNodes) > 0 && p.Node == "" {
			p.Nodes = ev.DownNodes
		}
		out = append(out, p)
	}
	return out, nil
}

// accountGone reports whether account is no longer in slurmdbd.
func (c *Controller) accountGone(ctx context.Context, account string) (bool, error) {
	if account == "" {
		return false, nil
	}
	accts, err := c.cfg.Slurm.Accounts(ctx)
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(accts, func(a slurmrest.Account) bool { return a.Name == account }), nil
}

// stderrTail reads the last lines of the job's stderr (its stdout when
// stderr goes there), beneath the log root, as the job's user: a file the
// user does not own, a link or a device is not read.
func (c *Controller) stderrTail(j slurmrest.Job) []string {
	root := c.cfg.Recovery.LogRoot
	if root == "" {
		return nil
	}
	path := j.StdErr
	if path == "" {
		path = j.StdOut
	}
	path = expandPattern(path, j)
	if path == "" || !filepath.IsAbs(path) {
		return nil
	}
	name := strings.TrimPrefix(filepath.Clean(path), "/")
	f, err := userfile.Open(root, name, userfile.Policy{UID: uint32(j.UserID)})
	if err != nil {
		c.cfg.Log.Debug("job stderr not read", "job_id", j.ID, "error", err)
		return nil
	}
	defer f.Close()
	const maxTail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		if _, err := f.Seek(st.Size()-maxTail, io.SeekStart); err != nil {
			return nil
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTail))
	if err != nil {
		return nil
	}
	n := c.cfg.Recovery.StderrLines
	if n <= 0 {
		n = 20
	}
	lines := failure.Tail(b, n)
	for i, l := range lines {
		if len(l) > failure.MaxLineBytes {
			lines[i] = l[:failure.MaxLineBytes]
		}
	}
	return lines
}

// expandPattern expands the filename patterns of sbatch's --output and
// --error that a job record keeps unexpanded: %j %J %u %x %A %a %N %%.
func expandPattern(p string, j slurmrest.Job) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 == len(p) {
			b.WriteByte(p[i])
			continue
		}
		i++
		// A width ("%4j") pads numbers with zeros.
		width := 0
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			width = width*10 + int(p[i]-'0')
			i++
		}
		if i == len(p) {
			break
		}
		num := func(n int64) string {
			s := strconv.FormatInt(n, 10)
			for len(s) < width {
				s = "0" + s
			}
			return s
		}
		switch p[i] {
		case 'j', 'J':
			b.WriteString(num(j.ID))
		case 'A':
			if j.ArrayJobID > 0 {
				b.WriteString(num(j.ArrayJobID))
			} else {
				b.WriteString(num(j.ID))
			}
		case 'a':
			if j.ArrayTaskID >= 0 && j.ArrayJobID > 0 {
				b.WriteString(num(j.ArrayTaskID))
			} else {
				b.WriteString(num(0x0fffffff))
			}
		case 'u':
			b.WriteString(j.User)
		case 'x':
			b.WriteString(j.Name)
		case 'N':
			if j.BatchHost != "" {
				b.WriteString(j.BatchHost)
			} else if len(j.Nodes) > 0 {
				b.WriteString(j.Nodes[0])
			}
		case '%':
			b.WriteByte('%')
		default:
			return "" // a pattern this does not know: the path is not guessed
		}
	}
	return b.String()
}

// recoveryNotice tells the owner (and the admins, when the rule says so)
// what recovery did, with the evidence and stderr's tail.
func (c *Controller) recoveryNotice(ctx context.Context, j slurmrest.Job, tenant, action string, res failure.Result, dec failure.Decision, tail []string) {
	if c.cfg.Notifier == nil {
		return
	}
	ev, _ := json.Marshal(res.Evidence)
	n := Notice{JobID: j.ID, User: j.User, Account: j.Account, Tenant: tenant, Action: action, Rule: dec.Rule, Reason: dec.Reason,
		At: c.cfg.Now(), FailureClass: string(res.Class), Evidence: ev, StderrTail: tail}
	send := func(n Notice) {
		if err := c.cfg.Notifier.Notify(ctx, n); err != nil {
			c.cfg.Log.Warn("recovery notice failed", "job_id", j.ID, "admins", n.Admin, "error", err)
		}
	}
	if dec.Owner {
		send(n)
	}
	if dec.Admins {
		n.Admin = true
		send(n)
	}
}
