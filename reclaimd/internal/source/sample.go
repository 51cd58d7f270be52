package source

import (
	"slices"
	"time"
)

// Sample is what one GPU did at one moment. Percentages run from 0 to 100;
// throughputs are in KiB/s (NVML's "KB" is 1024 bytes).
type Sample struct {
	GPU   int    // NVML index
	UUID  string // "GPU-…"; empty in a replay file without a uuid column
	Model string // product name as NVML gives it, e.g. "NVIDIA H100 80GB HBM3"
	At    time.Time

	// UtilPercent is the share of the last sample period (1/6 s to 1 s,
	// by model) in which a kernel ran; MemActivityPercent the share in which
	// device memory was read or written. Both are nil on a GPU in MIG mode,
	// where NVML measures neither for the whole GPU.
	UtilPercent, MemActivityPercent *float64
	// SMActivePercent is the share of streaming multiprocessors that were
	// busy between this sample and the last (GPM, Hopper and newer); nil
	// where the driver lacks it and on a source's first sample.
	SMActivePercent *float64

	MemUsedMiB, MemTotalMiB float64

	// PCIe throughput as NVML measures it over 20 ms; nil when unsupported.
	PCIeRxKBs, PCIeTxKBs *float64
	// NVLink data throughput (all links, payload only) averaged since the
	// previous sample; nil on GPUs without NVLink and on a first sample.
	NVLinkRxKBs, NVLinkTxKBs *float64

	// PIDs are the compute processes on the GPU (on all its MIG instances
	// when MIG is on), in ascending order.
	PIDs []int
	// JobIDs are the Slurm jobs using the GPU, in ascending order, where the
	// source knows them (a replay file's jobs column); the agent adds the
	// jobs it finds for PIDs.
	JobIDs []int64
	// Unattributed counts the PIDs the agent could tie to no Slurm job
	// (filled in by the agent).
	Unattributed int

	MIG          bool          // MIG mode is on
	MIGInstances []MIGInstance // the GPU's MIG devices when MIG is on
}

// MIGInstance is one MIG device of a GPU in MIG mode.
type MIGInstance struct {
	GPUInstance, ComputeInstance int
	UUID                         string // "MIG-…"
	// UtilPercent and MemActivityPercent are the MIG device's own
	// activity, from GPM (Hopper and newer): the share of the time since
	// the last sample its graphics engines were busy (DCGM's
	// GR_ENGINE_ACTIVE of a GPU instance), and the share of DRAM bandwidth
	// it used. nil where GPM cannot measure the instance (older GPUs or
	// drivers) and on the first sample: it then reads as stale.
	UtilPercent, MemActivityPercent *float64
	MemUsedMiB, MemTotalMiB         float64
	PIDs                            []int
	JobIDs                          []int64 // filled in by the agent
}

// Clone returns a deep copy of s, so that a caller may keep or change it
// while the source goes on.
func (s Sample) Clone() Sample {
	c := s
	c.UtilPercent = clonePtr(s.UtilPercent)
	c.MemActivityPercent = clonePtr(s.MemActivityPercent)
	c.SMActivePercent = clonePtr(s.SMActivePercent)
	c.PCIeRxKBs, c.PCIeTxKBs = clonePtr(s.PCIeRxKBs), clonePtr(s.PCIeTxKBs)
	c.NVLinkRxKBs, c.NVLinkTxKBs = clonePtr(s.NVLinkRxKBs), clonePtr(s.NVLinkTxKBs)
	c.PIDs = slices.Clone(s.PIDs)
	c.JobIDs = slices.Clone(s.JobIDs)
	if s.MIGInstances != nil {
		c.MIGInstances = make([]MIGInstance, len(s.MIGInstances))
		for i, m := range s.MIGInstances {
			m.UtilPercent, m.MemActivityPercent = clonePtr(m.UtilPercent), clonePtr(m.MemActivityPercent)
			m.PIDs = slices.Clone(m.PIDs)
			m.JobIDs = slices.Clone(m.JobIDs)
			c.MIGInstances[i] = m
		}
	}
	return c
}

func clonePtr(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// ptr returns a pointer to a copy of v.
func ptr(v float64) *float64 { return &v }
