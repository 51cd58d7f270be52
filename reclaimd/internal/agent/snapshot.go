package agent

import (
	"slices"
	"time"
)

// SnapshotVersion is the version of the Snapshot document this agent
// writes. Version 2 added cursors (version, cursor, after, full,
// max_samples); a document without "version" is version 1, always the
// whole window. A reader must refuse a version it does not know.
const SnapshotVersion = 2

// Snapshot is the JSON document of GET /v1/snapshot: the node's rolling
// windows, for the reclaimd controller. Times are RFC 3339 in UTC with
// nanoseconds; percentages run from 0 to 100; a value the GPU cannot measure
// is null, never 0, because 0 means idle. Lists are [] when empty, never
// null.
//
//	{
//	  "node": "gpu01",                         // as Slurm knows it
//	  "taken_at": "2026-03-01T12:10:00Z",      // when this document was made
//	  "interval_seconds": 10,                  // between samples
//	  "window_seconds": 600,                   // how far back samples reach
//	  "source_ok": true,                       // the last sampling worked
//	  "last_error": "",                        // its error when it did not
//	  "last_sample_at": "2026-03-01T12:10:00Z", // last good sample; null before the first
//	  "version": 2,                            // of this document (absent: 1)
//	  "cursor": "m8x1k2p0.360",                // GET /v1/snapshot?after=<cursor> next time
//	  "full": false,                           // true: the whole window; false: only what follows "after"
//	  "after": "m8x1k2p0.357",                 // the cursor the samples follow; "" when full
//	  "max_samples": 361,                      // the agent keeps at most this many samples a GPU
//	  "gpus": [{
//	    "index": 0, "uuid": "GPU-…", "model": "NVIDIA A100-SXM4-40GB",
//	    "mem_total_mib": 40960, "mig": false,
//	    "samples": [{                          // oldest first
//	      "at": "2026-03-01T12:09:50Z",
//	      "util": 97,                          // kernel time; null in MIG mode
//	      "mem_activity": 42,                  // memory controller busy; null in MIG mode
//	      "sm_active": null,                   // busy SMs (Hopper+); null when unknown
//	      "mem_used_mib": 30500,
//	      "pcie_rx_kbs": 1000, "pcie_tx_kbs": 500,       // KiB/s; null when unknown
//	      "nvlink_rx_kbs": null, "nvlink_tx_kbs": null,  // KiB/s; null when unknown
//	      "processes": 1,                      // compute processes on the GPU
//	      "job_ids": [1001],                   // Slurm jobs of those processes
//	      "mig_instances": [{                  // only in MIG mode
//	        "gpu_instance": 1, "compute_instance": 0, "uuid": "MIG-…",
//	        "util": 35, "mem_activity": 12,  // the MIG device's own (GPM); null when unknown
//	        "mem_used_mib": 5000, "mem_total_mib": 9856, "processes": 2, "job_ids": [1003]
//	      }]
//	    }]
//	  }],
//	  "started_at": "2026-03-01T11:00:00Z"     // this agent's first good sample; null before it
//	}
//
// Fault events (since version 2, without a change of version: a reader
// that does not know "faults" loses nothing it read before) are the
// GPUs' Xid critical errors, uncorrectable ECC errors and DRAM
// retirement (row remap) events, oldest first, each once per answer:
//
//	"faults": [{
//	  "at": "2026-03-01T12:09:55Z",          // when the agent read it
//	  "gpu": 3, "uuid": "GPU-…",             // NVML index; uuid "" when unknown
//	  "kind": "xid",                         // xid | ecc_uncorrectable | retired_pages_pending | row_remap_failure
//	  "code": 79                             // the Xid; 0 for the other kinds
//	}]
//
// An answer after a cursor holds the faults read since that cursor; a
// whole answer holds every fault the agent keeps (the newest
// max_faults, by default 256, whatever their age), so a reader must take
// the same fault twice as one (same node, gpu, kind, code and at). A
// document without "faults" comes from an agent that reports none.
// A new version is only for a change a reader that skips unknown keys
// would misread; added keys like this one keep the version.
//
// A reader that keeps the windows itself asks with ?after= the cursor of
// its last document and gets, with full false, only the samples taken
// since (a few per GPU instead of the whole window); it appends them to
// what it holds and drops, as the agent does, the samples older than
// window_seconds before taken_at and the oldest beyond max_samples. When
// the agent cannot answer a cursor (it restarted, a GPU was replaced, the
// cursor is not its own) it sends the whole window with full true, and
// the reader starts over from it.
//
// A GPU with processes but no job ids runs something outside Slurm (or a
// process whose job the agent could not read). The controller should not
// act on a snapshot whose source_ok is false or whose samples stop short of
// taken_at by more than a few intervals, nor one with a sample older than
// started_at (a history the agent cannot have). With a secret, the answer
// carries a signature (auth.go).
type Snapshot struct {
	Node            string      `json:"node"`
	TakenAt         time.Time   `json:"taken_at"`
	IntervalSeconds float64     `json:"interval_seconds"`
	WindowSeconds   float64     `json:"window_seconds"`
	SourceOK        bool        `json:"source_ok"`
	LastError       string      `json:"last_error"`
	LastSampleAt    *time.Time  `json:"last_sample_at"`
	GPUs            []GPUWindow `json:"gpus"`
	Version         int         `json:"version"`
	Cursor          string      `json:"cursor"`
	Full            bool        `json:"full"`
	After           string      `json:"after"`
	MaxSamples      int         `json:"max_samples"`

	// StartedAt is when this agent's history begins: the controller
	// refuses a snapshot with a sample older than it.
	StartedAt *time.Time `json:"started_at"`

	// Faults are the GPU fault events since After (all kept when Full).
	Faults []FaultEvent `json:"faults"`
}

// FaultEvent is one fault of one GPU (source.Fault).
type FaultEvent struct {
	At   time.Time `json:"at"`
	GPU  int       `json:"gpu"`
	UUID string    `json:"uuid"`
	Kind string    `json:"kind"`
	Code int       `json:"code"`
}

// GPUWindow is one GPU's window, described as its latest sample found it.
type GPUWindow struct {
	Index       int     `json:"index"`
	UUID        string  `json:"uuid"`
	Model       string  `json:"model"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MIG         bool    `json:"mig"`
	Samples     []Point `json:"samples"`
}

// Point is one sample of one GPU in a window.
type Point struct {
	At          time.Time `json:"at"`
	Util        *float64  `json:"util"`
	MemActivity *float64  `json:"mem_activity"`
	SMActive    *float64  `json:"sm_active"`
	MemUsedMiB  float64   `json:"mem_used_mib"`
	PCIeRxKBs   *float64  `json:"pcie_rx_kbs"`
	PCIeTxKBs   *float64  `json:"pcie_tx_kbs"`
	NVLinkRxKBs *float64  `json:"nvlink_rx_kbs"`
	NVLinkTxKBs *float64  `json:"nvlink_tx_kbs"`
	Processes   int       `json:"processes"`
	JobIDs      []int64   `json:"job_ids"`
	// Unattributed counts the processes on the GPU that belong to no
	// Slurm job the agent could find (neither their cgroup nor their
	// SLURM_JOB_ID names one): while there are any, the GPU's jobs are
	// not known, and the controller judges nothing on the node.
	Unattributed int        `json:"unattributed_processes,omitempty"`
	MIGInstances []MIGPoint `json:"mig_instances,omitempty"`
}

// MIGPoint is one MIG device of a GPU in MIG mode at one sample.
type MIGPoint struct {
	GPUInstance     int    `json:"gpu_instance"`
	ComputeInstance int    `json:"compute_instance"`
	UUID            string `json:"uuid"`
	// Util and MemActivity are the MIG device's own activity (GPM: its
	// graphics engines busy, and its share of DRAM bandwidth, in percent,
	// since the sample before); null where NVML cannot measure them (GPM
	// is Hopper and newer) and on the first sample. The controller judges
	// a MIG device by them, as a whole GPU by util and mem_activity.
	Util        *float64 `json:"util"`
	MemActivity *float64 `json:"mem_activity"`
	MemUsedMiB  float64  `json:"mem_used_mib"`
	MemTotalMiB float64  `json:"mem_total_mib"`
	Processes   int      `json:"processes"`
	JobIDs      []int64  `json:"job_ids"`
}

// clone returns a deep copy of p.
func (p Point) clone() Point {
	c := p
	for _, f := range []**float64{&c.Util, &c.MemActivity, &c.SMActive, &c.PCIeRxKBs, &c.PCIeTxKBs, &c.NVLinkRxKBs, &c.NVLinkTxKBs} {
		if *f != nil {
			v := **f
			*f = &v
		}
	}
	c.JobIDs = slices.Clone(p.JobIDs)
	if p.MIGInstances != nil {
		c.MIGInstances = make([]MIGPoint, len(p.MIGInstances))
		for i, m := range p.MIGInstances {
			m.JobIDs = slices.Clone(m.JobIDs)
			for _, f := range []**float64{&m.Util, &m.MemActivity} {
				if *f != nil {
					v := **f
					*f = &v
				}
			}
			c.MIGInstances[i] = m
		}
	}
	return c
}
