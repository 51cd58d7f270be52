// Package failure classifies a job's run that ended other than COMPLETED
// (node_fail, gpu_fault, oom, timeout, preempted, reclaimed, nccl,
// user_error, cancelled) and decides, under the job's recovery rule, what
// happens next: a retry (a requeue of the same job, its failed nodes
// excluded), a hold, or nothing. It is pure: the job's record as Slurm
// shows it, the GPU faults the node agents reported, the nodes down and
// the tail of the job's stderr come in; no clock, network or file.
package failure

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Class is a failure class.
type Class string

// The failure classes.
const (
	NodeFail  Class = "node_fail"  // NODE_FAIL, BOOT_FAIL, or a node down under the job
	GPUFault  Class = "gpu_fault"  // an Xid or uncorrectable ECC event on one of the job's GPUs during the run
	OOM       Class = "oom"        // OUT_OF_MEMORY
	Timeout   Class = "timeout"    // TIMEOUT or DEADLINE
	Preempted Class = "preempted"  // PREEMPTED
	Reclaimed Class = "reclaimed"  // requeued or cancelled by reclaimd itself (its admin comment mark)
	NCCL      Class = "nccl"       // stderr tail matches an NCCL/CUDA signature
	UserError Class = "user_error" // a non-zero exit with none of the above
	Cancelled Class = "cancelled"  // cancelled by its owner or an admin
)

// Classes lists every class, in the order of precedence Classify applies.
var Classes = []Class{Reclaimed, Cancelled, Preempted, GPUFault, NodeFail, OOM, Timeout, NCCL, UserError}

// Valid reports whether c is a class.
func (c Class) Valid() bool { return slices.Contains(Classes, c) }

// Fault is one GPU fault event a node agent reported: an Xid (Code) or an
// ECC, retired-page or row-remap failure (Kind says which).
type Fault struct {
	Time time.Time `json:"time"`
	Node string    `json:"node"`
	GPU  int       `json:"gpu"`
	Code int       `json:"code"` // Xid
	Kind string    `json:"kind"` // the agent's: xid, ecc_uncorrectable, retired_pages_pending, row_remap_failure
}

// GPU is one GPU of a run.
type GPU struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
}

// Run is a job's run that ended, as Slurm shows the job now and as the
// controller saw it running.
type Run struct {
	JobID int64
	// State is the job's state now ("FAILED"; "PENDING" for a job Slurm
	// requeued itself, with Requeued set).
	State       []string
	StateReason string
	ExitCode    int
	ExitSignal  int
	// Nodes and GPUs are where the run ran (from the last time the
	// controller saw it running: a requeued job's record has none).
	Nodes []string
	GPUs  []GPU
	// Start and End bound the run (End zero: not known, now).
	Start, End time.Time
	// AdminComment is the job's admin comment now.
	AdminComment string
	// Requeued: Slurm put the job back in the queue itself (its restart
	// count grew since the run was seen).
	Requeued bool
}

// Input is everything Classify reads.
type Input struct {
	Run Run
	// Faults are the GPU faults reported on the run's nodes; those on the
	// run's GPUs within [Start, End+FaultGrace] count.
	Faults []Fault
	// ApplicationXids are the Xids the job's own program causes
	// (DefaultApplicationXids, from the configuration): one of them is
	// evidence, not a gpu_fault, and the run is classed by the rest.
	ApplicationXids []int
	// DownNodes are the nodes down or failing now (of any job).
	DownNodes []string
	// StderrTail is the last lines of the job's standard error.
	StderrTail []string
}

// DefaultApplicationXids are the Xids that NVIDIA's Xid catalogue
// (https://docs.nvidia.com/deploy/xid-errors/) gives the application
// among their causes and whose first action is to fix or restart the
// application, not to service the GPU: 13 graphics engine exception (an
// illegal instruction or an out-of-range address in a kernel), 31 GPU
// memory page fault (an illegal memory access), 43 GPU stopped
// processing (a user program's fault ended its channel), 45 preemptive
// cleanup (the driver ended the program's channels after another error,
// or as it was killed) and 68 NVDEC error (a video decoder exception).
// They are the job's own errors: a job whose only Xids are these is
// classed as if it had none (user_error for a non-zero exit), and they
// never drain a node.
var DefaultApplicationXids = []int{13, 31, 43, 45, 68}

// FaultGrace is how long after a run's end a GPU fault still counts for
// it: the agent reports an event after the process it killed has gone.
const FaultGrace = 2 * time.Minute

// ReclaimedMark starts the admin comment mark of reclaimd's own requeues
// and cancels (decide.Action.Marker).
const ReclaimedMark = "strata: reclaimed ("

// Evidence is what a classification rests on, recorded and served.
type Evidence struct {
	State      string   `json:"state"`
	Reason     string   `json:"state_reason,omitempty"`
	ExitCode   int      `json:"exit_code"`
	Signal     int      `json:"signal,omitempty"`
	Nodes      []string `json:"nodes,omitempty"`
	Node       string   `json:"node,omitempty"` // the node at fault
	GPU        *int     `json:"gpu,omitempty"`  // the GPU at fault
	Xid        int      `json:"xid,omitempty"`
	FaultKind  string   `json:"fault_kind,omitempty"`
	LogLine    string   `json:"log_line,omitempty"`
	Signature  string   `json:"signature,omitempty"`
	DownNodes  []string `json:"down_nodes,omitempty"`
	Requeued   bool     `json:"requeued_by_slurm,omitempty"`
	FaultCount int      `json:"faults,omitempty"`
	// ApplicationXid is the first Xid the job's program caused on one of
	// its GPUs (an ApplicationXids code): evidence, not a GPU fault.
	ApplicationXid *Fault `json:"application_xid,omitempty"`
}

// Result is a classification.
type Result struct {
	Class    Class    `json:"class"`
	Evidence Evidence `json:"evidence"`
}

// Where says where the failure was, for marks and notices: "gpu3 (Xid
// 79)" (the GPU's index is in the evidence), "gpu2", "gpu1,gpu2".
func (r Result) Where() string {
	e := r.Evidence
	switch {
	case e.Node != "" && e.Xid > 0:
		return fmt.Sprintf("%s (Xid %d)", e.Node, e.Xid)
	case e.Node != "" && e.FaultKind != "":
		return fmt.Sprintf("%s (%s)", e.Node, e.FaultKind)
	case e.Node != "":
		return e.Node
	}
	return strings.Join(e.Nodes, ",")
}

// Classify classifies an ended run. It reports false for a run that
// needs none: COMPLETED, still running or pending, or requeued by
// someone other than reclaimd for no failure it can see (an admin's
// scontrol requeue).
func Classify(in Input, m *Matcher) (Result, bool) {
	r := in.Run
	st := func(s string) bool {
		return slices.ContainsFunc(r.State, func(x string) bool { return strings.EqualFold(x, s) })
	}
	ev := Evidence{State: strings.Join(r.State, ","), Reason: r.StateReason, ExitCode: r.ExitCode, Signal: r.ExitSignal,
		Nodes: r.Nodes, Requeued: r.Requeued}
	for _, n := range r.Nodes {
		if slices.Contains(in.DownNodes, n) {
			ev.DownNodes = append(ev.DownNodes, n)
		}
	}
	res := func(c Class) (Result, bool) { return Result{Class: c, Evidence: ev}, true }
	ended := !r.Requeued && !st("RUNNING") && !st("PENDING") && !st("SUSPENDED") && !st("COMPLETING") &&
		!st("CONFIGURING") && !st("REQUEUED") && !st("RESIZING")
	if !ended && !r.Requeued {
		return Result{}, false
	}
	if st("COMPLETED") && !r.Requeued {
		return Result{}, false
	}
	// reclaimd's own requeue or cancel: the mark, and a state that fits.
	if strings.Contains(r.AdminComment, ReclaimedMark) && (r.Requeued || st("CANCELLED")) {
		return res(Reclaimed)
	}
	if st("CANCELLED") {
		return res(Cancelled)
	}
	if st("PREEMPTED") {
		return res(Preempted)
	}
	f, n, app := gpuFault(in)
	if app.Code > 0 {
		ev.ApplicationXid = &app
	}
	if n > 0 {
		ev.Node, ev.GPU, ev.Xid, ev.FaultKind, ev.FaultCount = f.Node, &f.GPU, f.Code, f.Kind, n
		return res(GPUFault)
	}
	if st("NODE_FAIL") || st("BOOT_FAIL") || len(ev.DownNodes) > 0 {
		if len(ev.DownNodes) == 1 {
			ev.Node = ev.DownNodes[0]
		} else if len(r.Nodes) == 1 {
			ev.Node = r.Nodes[0]
		}
		return res(NodeFail)
	}
	if r.Requeued {
		// Requeued by Slurm or an admin, no node down, no fault: it runs
		// again; nothing to retry.
		return Result{}, false
	}
	if st("OUT_OF_MEMORY") {
		return res(OOM)
	}
	if st("TIMEOUT") || st("DEADLINE") {
		return res(Timeout)
	}
	if line, sig, ok := m.Match(in.StderrTail); ok {
		ev.LogLine, ev.Signature = line, sig
		return res(NCCL)
	}
	if st("FAILED") || r.ExitCode != 0 || r.ExitSignal != 0 {
		return res(UserError)
	}
	// Ended otherwise (a state this Slurm added): leave it to people.
	return res(UserError)
}

// gpuFault finds the first fault on one of the run's GPUs during it, and
// how many there were, leaving out the application Xids; app is the first
// of those (Code 0: none).
func gpuFault(in Input) (first Fault, n int, app Fault) {
	r := in.Run
	for _, f := range in.Faults {
		if !slices.Contains(r.GPUs, GPU{Node: f.Node, Index: f.GPU}) {
			continue
		}
		if !r.Start.IsZero() && f.Time.Before(r.Start) {
			continue
		}
		if !r.End.IsZero() && f.Time.After(r.End.Add(FaultGrace)) {
			continue
		}
		if f.Kind == FaultKindXid && slices.Contains(in.ApplicationXids, f.Code) {
			if app.Code == 0 || f.Time.Before(app.Time) {
				app = f
			}
			continue
		}
		if n == 0 || f.Time.Before(first.Time) {
			first = f
		}
		n++
	}
	return first, n, app
}

// FaultKindXid is the Fault.Kind of an Xid.
const FaultKindXid = "xid"
