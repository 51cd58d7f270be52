package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// Health configures GPU node health: drain a node whose GPU reports a
// fatal fault, resume it once its health check passes, and never drain
// more than a share of a partition.
type Health struct {
	// FatalXids are the Xid codes that drain a node (DefaultFatalXids).
	FatalXids []int
	// DrainOn are the other fault kinds that drain a node
	// (source.FaultECC, FaultRetiredPages, FaultRowRemap).
	DrainOn []source.FaultKind
	// MaxDrainedShare is the share of a partition's nodes that Strata
	// may hold drained at once, 0 < share <= 1: a drain that would pass
	// it is not made, and admins are told.
	MaxDrainedShare float64
	// MaxFaultAge is how old a fault may be and still drain a node: an
	// agent's whole snapshot repeats the faults it keeps.
	MaxFaultAge time.Duration
	// Check is the health command, argv with {node} for the node's name
	// (such as ssh {node} dcgmi diag -r 1), run by the controller on a
	// drained node every CheckInterval; exit status 0 resumes the node.
	// Empty: Strata never resumes a node itself (an admin does).
	Check         []string
	CheckInterval time.Duration
	CheckTimeout  time.Duration
	// Runner runs the check; ExecRunner when nil.
	Runner Runner
	// DryRun records and logs each drain and resume it would make, and
	// makes none.
	DryRun bool
}

// DefaultFatalXids are the Xids that drain a node by default (NVIDIA's
// Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/): each means
// the GPU needs a reset or service, not that one job erred.
var DefaultFatalXids = []int{48, 63, 64, 74, 79, 92, 94, 95, 119, 120}

// xidMeanings are NVIDIA's names of the Xids admins meet most (the Xid
// catalogue, https://docs.nvidia.com/deploy/xid-errors/), for drain
// reasons and notices.
var xidMeanings = map[int]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remap recorded",
	64:  "ECC page retirement or row remap failed",
	68:  "NVDEC error",
	74:  "NVLink error",
	79:  "GPU fell off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
}

// XidMeaning is NVIDIA's name of an Xid; "" when unknown here.
func XidMeaning(code int) string { return xidMeanings[code] }

// Runner runs a health command and returns its combined output.
type Runner interface {
	Run(ctx context.Context, argv []string) ([]byte, error)
}

// ExecRunner runs the command itself (os/exec), with no shell.
type ExecRunner struct{}

// Run runs argv and returns its combined output.
func (ExecRunner) Run(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("no health command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// A child that outlives a killed command (ssh's, a shell's) must not
	// hold the output open for ever.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// The kinds of the records of node health.
const (
	KindDrain  = "drain"
	KindResume = "resume"
)

// Admin notices of node health (Notice.Action, with Admin set).
const (
	NoticeDrained = "node-drained"
	NoticeResumed = "node-resumed"
	NoticeCapHit  = "drain-cap-hit"
)

// maxCheckOutput is how much of a check's output is kept: its tail.
const maxCheckOutput = 4096

// drainEvidence is what a drain record keeps of its cause.
type drainEvidence struct {
	Fault store.Fault `json:"fault"`
}

// fatal reports whether f drains a node.
func (h *Health) fatal(f store.Fault) bool {
	if source.FaultKind(f.Kind) == source.FaultXid {
		return slices.Contains(h.FatalXids, f.Code)
	}
	return slices.Contains(h.DrainOn, source.FaultKind(f.Kind))
}

// drainReason is the reason Slurm shows for a drain: "strata: Xid 79 on
// GPU 3 (GPU fell off the bus)".
func drainReason(f store.Fault) string {
	switch source.FaultKind(f.Kind) {
	case source.FaultXid:
		if m := XidMeaning(f.Code); m != "" {
			return fmt.Sprintf("strata: Xid %d on GPU %d (%s)", f.Code, f.GPU, m)
		}
		return fmt.Sprintf("strata: Xid %d on GPU %d", f.Code, f.GPU)
	case source.FaultECC:
		return fmt.Sprintf("strata: uncorrectable ECC error on GPU %d", f.GPU)
	case source.FaultRetiredPages:
		return fmt.Sprintf("strata: retired pages pending on GPU %d (reset needed)", f.GPU)
	case source.FaultRowRemap:
		return fmt.Sprintf("strata: row remap failure on GPU %d (service needed)", f.GPU)
	}
	return fmt.Sprintf("strata: %s on GPU %d", f.Kind, f.GPU)
}

// drainLabel is the reason label of strata_recovery_drains_total: xid_79,
// ecc_uncorrectable, ...; as few values as the configured fatal faults.
func drainLabel(f store.Fault) string {
	if source.FaultKind(f.Kind) == source.FaultXid {
		return "xid_" + strconv.Itoa(f.Code)
	}
	return f.Kind
}

// drained reports whether Slurm shows the node drained (DRAIN, with
// DRAINING or DRAINED).
func drained(n slurmrest.Node) bool {
	for _, s := range n.State {
		if s == "DRAIN" || s == "DRAINED" || s == "DRAINING" {
			return true
		}
	}
	return false
}

// noteNode changes the node list kept for the API as a drain or resume
// changed the node, until the next cycle reads it again.
func (c *Controller) noteNode(name string, change func(*slurmrest.Node)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := slices.Clone(c.nodes)
	for i := range nodes {
		if nodes[i].Name == name {
			change(&nodes[i])
		}
	}
	c.nodes = nodes
}

// busy reports whether jobs still run on the node: its health check
// waits for them to finish, since a diagnostic may load the GPUs.
func busy(n slurmrest.Node) bool {
	for _, s := range n.State {
		if s == "ALLOCATED" || s == "MIXED" || s == "COMPLETING" {
			return true
		}
	}
	return false
}

// readNodes lists the nodes for node health and keeps them for the API.
func (c *Controller) readNodes(ctx context.Context) ([]slurmrest.Node, error) {
	nodes, err := c.cfg.Slurm.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nodes = nodes
	c.mu.Unlock()
	return nodes, nil
}

// health is one cycle of node health: keep the agents' faults, notice
// what admins did, drain the nodes with a fatal fault (under the cap),
// start the due health checks, and resume the nodes whose check passed.
// nodes is nil when slurmrestd could not list them: then the faults are
// kept and nothing is done.
func (c *Controller) health(ctx context.Context, faults []collect.Fault, nodes []slurmrest.Node, at time.Time) error {
	h, m, log := c.cfg.Health, c.cfg.Metrics, c.cfg.Log
	in := make([]store.Fault, 0, len(faults))
	for _, f := range faults {
		in = append(in, store.Fault{Node: f.Node, GPU: f.GPU, UUID: f.UUID, Kind: string(f.Kind), Code: f.Code, At: f.At})
	}
	added, err := c.cfg.Store.AddFaults(ctx, in, at)
	if err != nil {
		return err
	}
	for _, f := range added {
		m.GPUFaults.WithLabelValues(f.Kind, strconv.Itoa(f.Code)).Inc()
		log.Warn("GPU fault", "node", f.Node, "gpu_index", f.GPU, "uuid", f.UUID, "kind", f.Kind, "code", f.Code,
			"meaning", XidMeaning(f.Code), "at", f.At, "fatal", h.fatal(f))
	}
	if nodes == nil {
		return nil
	}
	states, err := c.cfg.Store.NodeHealth(ctx)
	if err != nil {
		return err
	}
	byName := make(map[string]slurmrest.Node, len(nodes))
	total := map[string]int{}
	for _, n := range nodes {
		byName[n.Name] = n
		for _, p := range n.Partitions {
			total[p]++
		}
	}
	held := map[string]int{} // partition -> nodes drained by Strata
	for name, st := range states {
		if !st.Drained {
			continue
		}
		n, ok := byName[name]
		switch {
		case !ok:
			// Not listed (removed from slurm.conf?): still counted.
		case !drained(n) || n.Reason != st.Reason:
			// An admin resumed it, or drained it again with a reason of
			// their own: it is theirs now, and Strata lets go of it.
			log.Info("node taken over outside Strata: no longer drained by Strata", "node", name, "state", strings.Join(n.State, "+"),
				"reason", n.Reason)
			st.Drained = false
			t := at
			st.ResumedAt = &t
			if err := c.cfg.Store.SaveNodeHealth(ctx, st); err != nil {
				return err
			}
			states[name] = st
			continue
		}
		for _, p := range byName[name].Partitions {
			held[p]++
		}
	}

	// The fatal faults since each node was last resumed.
	recent, err := c.cfg.Store.FaultsBetween(ctx, "", at.Add(-h.MaxFaultAge), at.Add(time.Millisecond))
	if err != nil {
		return err
	}
	type cand struct {
		node  string
		fault store.Fault
	}
	var cands []cand
	newest := map[string]time.Time{} // node -> its newest fatal fault
	seen := map[string]bool{}
	for _, f := range recent {
		if !h.fatal(f) {
			continue
		}
		if f.At.After(newest[f.Node]) {
			newest[f.Node] = f.At
		}
		st := states[f.Node]
		if seen[f.Node] || st.Drained || (st.ResumedAt != nil && !f.At.After(*st.ResumedAt)) {
			continue
		}
		if _, ok := byName[f.Node]; !ok {
			continue // not a Slurm node: nothing to drain
		}
		seen[f.Node] = true
		cands = append(cands, cand{f.Node, f}) // recent is in time order: the first fatal fault
	}
	for _, cd := range cands {
		st := states[cd.node]
		st.Node = cd.node
		n := byName[cd.node]
		if st.HeldFault == cd.fault.ID {
			// Already noted (held back by the cap, a dry run, or drained by
			// someone else): looked at again only when the cap allows.
			if h.DryRun || drained(n) {
				continue
			}
		}
		if drained(n) {
			log.Info("GPU fault on a node already drained outside Strata: left to its owner", "node", cd.node,
				"reason", n.Reason, "fault", drainReason(cd.fault))
			st.HeldFault = cd.fault.ID
			if err := c.cfg.Store.SaveNodeHealth(ctx, st); err != nil {
				return err
			}
			continue
		}
		if p, allowed, ok := c.underCap(n, held, total); !ok {
			if st.HeldFault != cd.fault.ID {
				m.DrainCapHit.WithLabelValues(p).Inc()
				log.Error("blast-radius cap: node not drained", "node", cd.node, "partition", p, "drained_by_strata", held[p],
					"allowed", allowed, "partition_nodes", total[p], "fault", drainReason(cd.fault))
				c.adminNotice(ctx, Notice{Action: NoticeCapHit, Node: cd.node, Partition: p, At: at,
					Reason: fmt.Sprintf("%s: not drained, since Strata already holds %d of the %d nodes of partition %s drained (at most %d)",
						drainReason(cd.fault), held[p], total[p], p, allowed)})
				st.HeldFault = cd.fault.ID
				if err := c.cfg.Store.SaveNodeHealth(ctx, st); err != nil {
					return err
				}
			}
			continue
		}
		done, err := c.drain(ctx, n, st, cd.fault, at)
		if err != nil {
			return err
		}
		if done {
			for _, p := range n.Partitions {
				held[p]++
			}
			states[cd.node], _ = c.nodeState(ctx, cd.node)
		}
	}

	for name, st := range states {
		if !st.Drained || len(h.Check) == 0 {
			continue
		}
		last := newest[name]
		// A check counts for the drain it ended after (or in the same
		// millisecond as), and for the faults before it.
		if st.CheckOK != nil && *st.CheckOK && st.CheckAt != nil && st.DrainedAt != nil && !st.CheckAt.Before(*st.DrainedAt) &&
			st.CheckAt.After(last) {
			if err := c.resume(ctx, byName[name], st, at); err != nil {
				return err
			}
			continue
		}
		due := st.CheckAt == nil || (st.DrainedAt != nil && st.CheckAt.Before(*st.DrainedAt)) || at.Sub(*st.CheckAt) >= h.CheckInterval
		if n, ok := byName[name]; due && ok && !busy(n) {
			c.startCheck(name)
		}
	}
	m.NodesDrained.Reset()
	for p := range total {
		m.NodesDrained.WithLabelValues(p).Set(float64(held[p]))
	}
	return nil
}

// underCap reports whether one more drained node of n's partitions stays
// within the cap; when not, the partition that would pass it and how
// many it allows.
func (c *Controller) underCap(n slurmrest.Node, held, total map[string]int) (string, int, bool) {
	for _, p := range n.Partitions {
		allowed := int(math.Floor(c.cfg.Health.MaxDrainedShare*float64(total[p]) + 1e-9))
		if held[p]+1 > allowed {
			return p, allowed, false
		}
	}
	return "", 0, true
}

func (c *Controller) nodeState(ctx context.Context, node string) (store.NodeHealth, error) {
	all, err := c.cfg.Store.NodeHealth(ctx)
	return all[node], err
}

// drain records the intent, drains the node through slurmrestd, keeps its
// state and finishes the record. It reports whether the node was drained;
// an error is the store's.
func (c *Controller) drain(ctx context.Context, n slurmrest.Node, st store.NodeHealth, f store.Fault, at time.Time) (bool, error) {
	h, log := c.cfg.Health, c.cfg.Log
	reason := drainReason(f)
	ev, _ := json.Marshal(drainEvidence{Fault: f})
	rec := store.Record{Node: n.Name, Kind: KindDrain, Reason: reason, Evidence: ev, GPUs: []store.GPU{{Node: n.Name, Index: f.GPU}},
		DecidedAt: at}
	if h.DryRun {
		rec.Status = store.StatusDryRun
		if _, err := c.cfg.Store.Intent(ctx, rec); err != nil {
			return false, err
		}
		log.Info("node drain (dry run: not carried out)", "node", n.Name, "reason", reason)
		st.HeldFault = f.ID
		return false, c.cfg.Store.SaveNodeHealth(ctx, st)
	}
	id, err := c.cfg.Store.Intent(ctx, rec)
	if err != nil {
		return false, err
	}
	if err := c.cfg.Slurm.UpdateNode(ctx, n.Name, slurmrest.NodeDrain, reason); err != nil {
		log.Error("node drain failed", "node", n.Name, "reason", reason, "error", err)
		return false, c.cfg.Store.Finish(ctx, id, store.StatusFailed, err.Error(), c.cfg.Now())
	}
	t := at
	st.Node, st.Drained, st.Reason, st.FaultID, st.DrainedAt, st.HeldFault = n.Name, true, reason, f.ID, &t, 0
	if err := c.cfg.Store.SaveNodeHealth(ctx, st); err != nil {
		return false, err
	}
	if err := c.cfg.Store.Finish(ctx, id, store.StatusDone, "", c.cfg.Now()); err != nil {
		return false, err
	}
	c.noteNode(n.Name, func(x *slurmrest.Node) { x.State, x.Reason = append(slices.Clone(x.State), "DRAIN"), reason })
	c.cfg.Metrics.Drains.WithLabelValues(drainLabel(f)).Inc()
	log.Warn("node drained", "node", n.Name, "reason", reason, "gpu_index", f.GPU, "uuid", f.UUID, "kind", f.Kind, "code", f.Code,
		"fault_at", f.At, "partitions", strings.Join(n.Partitions, ","))
	c.adminNotice(ctx, Notice{Action: NoticeDrained, Node: n.Name, Partition: strings.Join(n.Partitions, ","), Reason: reason, At: at})
	return true, nil
}

// resume records the intent, resumes the node and finishes the record.
func (c *Controller) resume(ctx context.Context, n slurmrest.Node, st store.NodeHealth, at time.Time) error {
	log := c.cfg.Log
	reason := fmt.Sprintf("strata: health check passed at %s after: %s", st.CheckAt.UTC().Format(time.RFC3339),
		strings.TrimPrefix(st.Reason, "strata: "))
	rec := store.Record{Node: st.Node, Kind: KindResume, Reason: reason, DecidedAt: at}
	if c.cfg.Health.DryRun {
		return nil // a dry run drains nothing, so it has nothing to resume
	}
	id, err := c.cfg.Store.Intent(ctx, rec)
	if err != nil {
		return err
	}
	if err := c.cfg.Slurm.UpdateNode(ctx, st.Node, slurmrest.NodeResume, ""); err != nil {
		log.Error("node resume failed", "node", st.Node, "error", err)
		return c.cfg.Store.Finish(ctx, id, store.StatusFailed, err.Error(), c.cfg.Now())
	}
	t := at
	st.Drained, st.ResumedAt = false, &t
	if err := c.cfg.Store.SaveNodeHealth(ctx, st); err != nil {
		return err
	}
	if err := c.cfg.Store.Finish(ctx, id, store.StatusDone, "", c.cfg.Now()); err != nil {
		return err
	}
	c.noteNode(st.Node, func(x *slurmrest.Node) {
		x.State = slices.DeleteFunc(slices.Clone(x.State), func(s string) bool { return s == "DRAIN" })
		x.Reason = ""
	})
	c.cfg.Metrics.Resumes.Inc()
	log.Info("node resumed", "node", st.Node, "after", st.Reason, "check_at", st.CheckAt)
	c.adminNotice(ctx, Notice{Action: NoticeResumed, Node: st.Node, Partition: strings.Join(n.Partitions, ","), Reason: reason, At: at})
	return nil
}

// startCheck runs the health command of a drained node in the
// background, once at a time per node; its result is kept for the next
// cycle (WaitHealthChecks waits for it).
func (c *Controller) startCheck(node string) {
	h := c.cfg.Health
	c.mu.Lock()
	if c.checking == nil {
		c.checking = map[string]bool{}
	}
	if c.checking[node] {
		c.mu.Unlock()
		return
	}
	c.checking[node] = true
	c.mu.Unlock()
	argv := make([]string, len(h.Check))
	for i, a := range h.Check {
		argv[i] = strings.ReplaceAll(a, "{node}", node)
	}
	runner := h.Runner
	if runner == nil {
		runner = ExecRunner{}
	}
	c.checks.Add(1)
	go func() {
		defer c.checks.Done()
		defer func() { c.mu.Lock(); delete(c.checking, node); c.mu.Unlock() }()
		base := c.checkBase()
		ctx, cancel := context.WithTimeout(base, h.CheckTimeout)
		defer cancel()
		out, err := runner.Run(ctx, argv)
		if base.Err() != nil {
			c.cfg.Log.Info("node health check cut short by shutdown: not kept", "node", node)
			return
		}
		result := "pass"
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			result = "timeout"
			err = fmt.Errorf("no answer within %s: %w", h.CheckTimeout, ctx.Err())
		case err != nil && errors.As(err, new(*exec.ExitError)):
			result = "fail"
		case err != nil:
			result = "error" // the command could not run
		}
		if len(out) > maxCheckOutput {
			out = out[len(out)-maxCheckOutput:]
		}
		text := strings.TrimSpace(string(out))
		if err != nil {
			text = strings.TrimSpace(text + "\n" + err.Error())
		}
		c.cfg.Metrics.HealthChecks.WithLabelValues(result).Inc()
		c.cfg.Log.Info("node health check", "node", node, "result", result, "command", strings.Join(argv, " "), "output", text)
		if err := c.cfg.Store.SaveCheck(context.Background(), node, c.cfg.Now(), result == "pass", text); err != nil {
			c.cfg.Log.Error("keeping a health check's result failed", "node", node, "error", err)
		}
	}()
}

// checkBase is the context health checks run under: Run's, so that a
// shutdown ends them.
func (c *Controller) checkBase() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runCtx != nil {
		return c.runCtx
	}
	return context.Background()
}

// WaitHealthChecks waits for the health checks in progress to end and
// their results to be kept.
func (c *Controller) WaitHealthChecks() { c.checks.Wait() }

// adminNotice tells the admins; a failure is logged.
func (c *Controller) adminNotice(ctx context.Context, n Notice) {
	if c.cfg.Notifier == nil {
		return
	}
	n.Admin = true
	if err := c.cfg.Notifier.Notify(ctx, n); err != nil {
		c.cfg.Log.Warn("notifying the admins failed", "action", n.Action, "node", n.Node, "error", err)
	}
}

// recoverNode settles, exactly once, a drain or resume a crash left open:
// one whose effect Slurm shows is done (and its state kept); one it does
// not show is abandoned, and the next cycle decides again.
func (c *Controller) recoverNode(ctx context.Context, rec store.Record, nodes map[string]slurmrest.Node) error {
	n, listed := nodes[rec.Node]
	st, err := c.nodeState(ctx, rec.Node)
	if err != nil {
		return err
	}
	st.Node = rec.Node
	status, why := store.StatusAbandoned, "interrupted by a restart before slurmrestd took it; the next cycle decides again"
	switch {
	case !listed:
		why = "the node is no longer listed by Slurm"
	case rec.Kind == KindDrain && drained(n) && n.Reason == rec.Reason:
		var ev drainEvidence
		_ = json.Unmarshal(rec.Evidence, &ev)
		t := rec.DecidedAt
		status, why = store.StatusDone, "found done after a restart"
		st.Drained, st.Reason, st.FaultID, st.DrainedAt, st.HeldFault = true, rec.Reason, ev.Fault.ID, &t, 0
	case rec.Kind == KindResume && !drained(n):
		t := rec.DecidedAt
		status, why = store.StatusDone, "found done after a restart"
		st.Drained, st.ResumedAt = false, &t
	}
	if status == store.StatusDone {
		if err := c.cfg.Store.SaveNodeHealth(ctx, st); err != nil {
			return err
		}
	}
	if err := c.cfg.Store.Finish(ctx, rec.ID, status, why, c.cfg.Now()); err != nil {
		return err
	}
	c.cfg.Log.Info("open node intent settled after a restart", "node", rec.Node, "kind", rec.Kind, "outcome", status, "why", why)
	return nil
}

// NodeHealthEntry is one node of GET /v1/nodes/health (reclaimd's API
// contract).
type NodeHealthEntry = reclaimapi.NodeHealth

// HealthCheck is the last health check of a node.
type HealthCheck = reclaimapi.HealthCheck

// NodesHealth is GET /v1/nodes/health: every node of the last cycle, and
// every node Strata has acted on, by name.
func (c *Controller) NodesHealth(ctx context.Context) ([]NodeHealthEntry, error) {
	if c.cfg.Health == nil {
		return nil, errors.New("node health is off (health.enabled: false)")
	}
	c.mu.Lock()
	nodes := c.nodes
	c.mu.Unlock()
	states, err := c.cfg.Store.NodeHealth(ctx)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	faults, err := c.cfg.Store.FaultsBetween(ctx, "", now.Add(-c.cfg.Health.MaxFaultAge), now.Add(time.Millisecond))
	if err != nil {
		return nil, err
	}
	entries := map[string]*NodeHealthEntry{}
	entry := func(name string) *NodeHealthEntry {
		e := entries[name]
		if e == nil {
			e = &NodeHealthEntry{Node: name, State: []string{}, Partitions: []string{}, Faults: []store.Fault{}}
			entries[name] = e
		}
		return e
	}
	for _, n := range nodes {
		e := entry(n.Name)
		e.State, e.Reason, e.Partitions = slices.Clone(n.State), n.Reason, slices.Clone(n.Partitions)
	}
	for name, st := range states {
		e := entry(name)
		e.DrainedByStrata, e.DrainedAt, e.ResumedAt = st.Drained, st.DrainedAt, st.ResumedAt
		if st.Drained {
			e.StrataReason = st.Reason
		}
		if st.CheckAt != nil && st.CheckOK != nil {
			e.LastCheck = &HealthCheck{At: *st.CheckAt, Passed: *st.CheckOK, Output: st.CheckOutput}
		}
	}
	for _, f := range faults {
		e := entry(f.Node)
		e.Faults = append(e.Faults, f)
	}
	out := make([]NodeHealthEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// FaultsBetween returns the GPU faults the agents reported for node
// (every node when "") that happened in [from, to), oldest first: the
// evidence a failure classifier needs of a job's run.
func (c *Controller) FaultsBetween(ctx context.Context, node string, from, to time.Time) ([]store.Fault, error) {
	return c.cfg.Store.FaultsBetween(ctx, node, from, to)
}

// keepFaults keeps the faults the agents reported (each once), when node
// health is off, for recovery's classification.
func (c *Controller) keepFaults(ctx context.Context, faults []collect.Fault, at time.Time) error {
	in := make([]store.Fault, 0, len(faults))
	for _, f := range faults {
		in = append(in, store.Fault{Node: f.Node, GPU: f.GPU, UUID: f.UUID, Kind: string(f.Kind), Code: f.Code, At: f.At})
	}
	added, err := c.cfg.Store.AddFaults(ctx, in, at)
	for _, f := range added {
		c.cfg.Metrics.GPUFaults.WithLabelValues(f.Kind, strconv.Itoa(f.Code)).Inc()
	}
	return err
}

// storeFaults gives recovery the GPU faults kept in the store: the
// default Recovery.Faults.
type storeFaults struct{ s *store.Store }

func (f storeFaults) Faults(ctx context.Context, nodes []string, since, until time.Time) ([]failure.Fault, error) {
	var out []failure.Fault
	for _, n := range nodes {
		got, err := f.s.FaultsBetween(ctx, n, since, until)
		if err != nil {
			return nil, err
		}
		for _, g := range got {
			out = append(out, failure.Fault{Time: g.At, Node: g.Node, GPU: g.GPU, Code: g.Code, Kind: g.Kind})
		}
	}
	return out, nil
}
