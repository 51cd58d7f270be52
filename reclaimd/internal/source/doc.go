// Package source produces the GPU samples that the reclaimd node agent keeps
// in its rolling windows.
//
// A source has one method, Sample(ctx, now) ([]Sample, error), which returns
// one Sample per GPU of the node, ordered by GPU index. The agent declares
// that interface where it uses it; this package provides the sources:
//
//   - NVML samples the node's GPUs through go-nvml (nvml.New() on a GPU node,
//     one of go-nvml's mock servers in tests).
//   - Replay plays back a Recording: samples recorded on a real node by a
//     Recorder, or written by hand, in the CSV format described at
//     ParseRecording. The demo and the controller's tests use it.
//
// Faults are the other half: NVML.Faults reports the Xid critical errors,
// uncorrectable ECC errors and DRAM retirement (row remap) events of the
// GPUs, and a FaultFile injects faults by hand beside a Replay (the
// format is at FaultFile). The agent reads them every round.
//
// A value NVML cannot measure on a GPU is a nil pointer, never zero: zero
// utilisation means idle to the controller, and an unknown must never look
// idle.
package source
