package source

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// allLinks is the scope id that asks NVML for a counter summed over all
// NVLinks of a GPU (nvml.h, "NVLink throughput counters field values").
const allLinks = math.MaxUint32

// NVML samples a node's GPUs through NVML. It keeps what the delta metrics
// need (GPM samples, NVLink counters) from one Sample to the next, so one
// NVML serves one agent; Sample is safe for concurrent use all the same.
//
// Required calls: the device count, each GPU's handle, UUID, name and memory
// information, its utilisation rates (unless MIG is on), its compute
// processes, and on a GPU in MIG mode its MIG devices' handles, ids, memory
// and processes. Their failure fails the whole Sample with an error that
// wraps the nvml.Return, so errors.Is works with nvml.ERROR_GPU_IS_LOST and
// the like: a node the agent cannot see fully must not look idle.
//
// Optional calls leave their field nil (or false): MIG mode, SM activity
// (GPM), PCIe and NVLink throughput. ERROR_NOT_SUPPORTED is the usual answer
// on GPUs that lack them.
type NVML struct {
	lib nvml.Interface

	// hasGPM: the library has the GPM symbols; calling a missing symbol
	// would crash the process rather than return an error.
	hasGPM bool
	// hasMIGGPM: GPM can also sample one GPU instance (nvmlGpmMigSampleGet).
	hasMIGGPM bool

	mu     sync.Mutex
	closed bool
	gpus   map[string]*gpuState // by UUID
	watch  faultWatch           // Faults' event set
}

// gpuState is what NVML keeps about one GPU between samples.
type gpuState struct {
	gpm       *bool          // nil until asked: the GPU supports GPM
	prev, cur nvml.GpmSample // prev is valid when prevOK
	prevOK    bool

	linkAt         time.Time // time of the NVLink counters below
	linkRx, linkTx uint64    // cumulative KiB
	linkOK         bool
}

// NewNVML initialises NVML through lib (nvml.New() on a GPU node) and returns
// a source over it. Close releases it.
func NewNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("initialise NVML (is the NVIDIA driver installed and loaded?): %w", ret)
	}
	has := func(symbol string) bool { return lib.Extensions().LookupSymbol(symbol) == nil }
	gpm := has("nvmlGpmQueryDeviceSupport") && has("nvmlGpmSampleAlloc") &&
		has("nvmlGpmSampleGet") && has("nvmlGpmMetricsGet") && has("nvmlGpmSampleFree")
	return &NVML{
		lib:       lib,
		hasGPM:    gpm,
		hasMIGGPM: gpm && has("nvmlGpmMigSampleGet"),
		gpus:      map[string]*gpuState{},
	}, nil
}

// Close frees the GPM samples and shuts NVML down. Sample fails after Close.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	for _, g := range n.gpus {
		g.free(n.lib)
	}
	n.gpus = nil
	n.watch.free()
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shut NVML down: %w", ret)
	}
	return nil
}

// Sample returns one Sample per GPU, ordered by index, all stamped now.
func (n *NVML) Sample(ctx context.Context, now time.Time) ([]Sample, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("sample GPUs: the NVML source is closed")
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs with NVML: %w", ret)
	}
	out := make([]Sample, 0, count)
	seen := make(map[string]bool, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sample GPU %d: %w", i, err)
		}
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get NVML handle of GPU %d: %w", i, ret)
		}
		s, err := n.sample(i, dev, now)
		if err != nil {
			return nil, err
		}
		seen[s.UUID] = true
		for _, m := range s.MIGInstances {
			seen[m.UUID] = true // its GPM samples are kept under its UUID
		}
		out = append(out, s)
	}
	// Forget GPUs that are gone, so that a GPU put back starts afresh.
	for uuid, g := range n.gpus {
		if !seen[uuid] {
			g.free(n.lib)
			delete(n.gpus, uuid)
		}
	}
	return out, nil
}

func (n *NVML) sample(i int, dev nvml.Device, now time.Time) (Sample, error) {
	s := Sample{GPU: i, At: now}
	var ret nvml.Return
	if s.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return Sample{}, fmt.Errorf("get UUID of GPU %d: %w", i, ret)
	}
	fail := func(what string, ret nvml.Return) (Sample, error) {
		return Sample{}, fmt.Errorf("get %s of GPU %d (%s): %w", what, i, s.UUID, ret)
	}
	if s.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
		return fail("name", ret)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return fail("memory information", ret)
	}
	s.MemUsedMiB, s.MemTotalMiB = mib(mem.Used), mib(mem.Total)
	if current, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS {
		s.MIG = current == nvml.DEVICE_MIG_ENABLE
	}

	g := n.gpus[s.UUID]
	if g == nil {
		g = &gpuState{}
		n.gpus[s.UUID] = g
	}

	if s.MIG {
		// The parent of MIG devices has no utilisation, and its process
		// list needs root; each MIG device answers for itself.
		g.prevOK = false // GPM of the whole GPU restarts when MIG goes off
		var err error
		if s.MIGInstances, err = migInstances(dev); err != nil {
			return Sample{}, fmt.Errorf("GPU %d (%s): %w", i, s.UUID, err)
		}
		for k, m := range s.MIGInstances {
			s.PIDs = append(s.PIDs, m.PIDs...)
			s.MIGInstances[k].UtilPercent, s.MIGInstances[k].MemActivityPercent = n.migActivity(dev, m)
		}
		slices.Sort(s.PIDs)
		s.PIDs = slices.Compact(s.PIDs)
	} else {
		util, ret := dev.GetUtilizationRates()
		if ret != nvml.SUCCESS {
			return fail("utilisation", ret)
		}
		s.UtilPercent, s.MemActivityPercent = ptr(float64(util.Gpu)), ptr(float64(util.Memory))
		procs, ret := dev.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			return fail("compute processes", ret)
		}
		s.PIDs = pids(procs)
		s.SMActivePercent = n.smActive(dev, g)
	}

	if v, ret := dev.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); ret == nvml.SUCCESS {
		s.PCIeRxKBs = ptr(float64(v))
	}
	if v, ret := dev.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); ret == nvml.SUCCESS {
		s.PCIeTxKBs = ptr(float64(v))
	}
	s.NVLinkRxKBs, s.NVLinkTxKBs = nvlink(dev, g, now)
	return s, nil
}

// smActive returns the share of busy SMs since the previous call, measured
// with GPM (GPU Performance Monitoring, Hopper and newer): the NVML
// counterpart of DCGM's SM_ACTIVE. GetSamples(GPU_UTILIZATION_SAMPLES) is not
// used: it is the kernel-time utilisation again, which one kernel on one SM
// drives to 100%.
func (n *NVML) smActive(dev nvml.Device, g *gpuState) *float64 {
	if !n.hasGPM {
		return nil
	}
	if g.gpm == nil {
		support, ret := dev.GpmQueryDeviceSupport()
		ok := ret == nvml.SUCCESS && support.IsSupportedDevice != 0
		g.gpm = &ok
	}
	if !*g.gpm {
		return nil
	}
	if g.cur == nil {
		s, ret := n.lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			return nil
		}
		g.cur = s
	}
	if ret := n.lib.GpmSampleGet(dev, g.cur); ret != nvml.SUCCESS {
		g.prevOK = false
		return nil
	}
	var value *float64
	if g.prevOK {
		m := nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: g.prev, Sample2: g.cur}
		m.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
		if ret := n.lib.GpmMetricsGet(&m); ret == nvml.SUCCESS && nvml.Return(m.Metrics[0].NvmlReturn) == nvml.SUCCESS {
			if v := m.Metrics[0].Value; v >= 0 && v <= 100 && !math.IsNaN(v) {
				value = ptr(v)
			}
		}
	}
	g.prev, g.cur = g.cur, g.prev
	g.prevOK = true
	return value
}

// migActivity returns the activity of one MIG device since the previous
// call, measured with GPM on its GPU instance (nvmlGpmMigSampleGet): the
// share of time its graphics engines were busy and of DRAM bandwidth it
// used, in percent. Neither the MIG device's handle nor its parent
// answers GetUtilizationRates in MIG mode, so where GPM cannot sample an
// instance (before Hopper, or an older driver) both are nil, and the
// instance reads as stale: never judged idle. Each instance's GPM samples
// are kept under its UUID.
func (n *NVML) migActivity(dev nvml.Device, m MIGInstance) (util, mem *float64) {
	if !n.hasMIGGPM {
		return nil, nil
	}
	g := n.gpus[m.UUID]
	if g == nil {
		g = &gpuState{}
		n.gpus[m.UUID] = g
	}
	if g.gpm == nil {
		support, ret := dev.GpmQueryDeviceSupport()
		ok := ret == nvml.SUCCESS && support.IsSupportedDevice != 0
		g.gpm = &ok
	}
	if !*g.gpm {
		return nil, nil
	}
	if g.cur == nil {
		s, ret := n.lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			return nil, nil
		}
		g.cur = s
	}
	if ret := n.lib.GpmMigSampleGet(dev, m.GPUInstance, g.cur); ret != nvml.SUCCESS {
		g.prevOK = false
		return nil, nil
	}
	if g.prevOK {
		mt := nvml.GpmMetricsGetType{NumMetrics: 2, Sample1: g.prev, Sample2: g.cur}
		mt.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_GRAPHICS_UTIL)
		mt.Metrics[1].MetricId = uint32(nvml.GPM_METRIC_DRAM_BW_UTIL)
		if ret := n.lib.GpmMetricsGet(&mt); ret == nvml.SUCCESS {
			u, okU := gpmPercent(mt.Metrics[0])
			d, okD := gpmPercent(mt.Metrics[1])
			if okU && okD {
				util, mem = ptr(u), ptr(d)
			}
		}
	}
	g.prev, g.cur = g.cur, g.prev
	g.prevOK = true
	return util, mem
}

// gpmPercent is one GPM metric's value, where NVML measured it and it is
// a percentage.
func gpmPercent(m nvml.GpmMetric) (float64, bool) {
	v := m.Value
	return v, nvml.Return(m.NvmlReturn) == nvml.SUCCESS && v >= 0 && v <= 100 && !math.IsNaN(v)
}

// free releases g's GPM samples.
func (g *gpuState) free(lib nvml.Interface) {
	for _, s := range []nvml.GpmSample{g.prev, g.cur} {
		if s != nil {
			_ = lib.GpmSampleFree(s) // nothing to do about a failure
		}
	}
	g.prev, g.cur, g.prevOK = nil, nil, false
}

// nvlink returns the NVLink data throughput since the previous call from the
// cumulative per-GPU counters; nil when the GPU has none, on the first call,
// and when a counter went backwards (a driver reload).
func nvlink(dev nvml.Device, g *gpuState, now time.Time) (rx, tx *float64) {
	values := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: allLinks},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: allLinks},
	}
	if ret := dev.GetFieldValues(values); ret != nvml.SUCCESS {
		g.linkOK = false
		return nil, nil
	}
	r, okR := fieldUint(values[0])
	t, okT := fieldUint(values[1])
	if !okR || !okT {
		g.linkOK = false
		return nil, nil
	}
	at := now
	if ts := values[0].Timestamp; ts > 0 {
		at = time.UnixMicro(ts) // when the driver read the counter
	}
	if g.linkOK && r >= g.linkRx && t >= g.linkTx {
		if dt := at.Sub(g.linkAt).Seconds(); dt > 0 {
			rx, tx = ptr(float64(r-g.linkRx)/dt), ptr(float64(t-g.linkTx)/dt)
		}
	}
	g.linkAt, g.linkRx, g.linkTx, g.linkOK = at, r, t, true
	return rx, tx
}

// fieldUint decodes an unsigned field value; false when NVML had none.
func fieldUint(v nvml.FieldValue) (uint64, bool) {
	if nvml.Return(v.NvmlReturn) != nvml.SUCCESS {
		return 0, false
	}
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG:
		return binary.NativeEndian.Uint64(v.Value[:]), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.NativeEndian.Uint32(v.Value[:4])), true
	}
	return 0, false
}

// migInstances describes the MIG devices of a GPU in MIG mode.
func migInstances(dev nvml.Device) ([]MIGInstance, error) {
	count, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count MIG devices: %w", ret)
	}
	out := []MIGInstance{}
	for k := range count {
		mig, ret := dev.GetMigDeviceHandleByIndex(k)
		if ret == nvml.ERROR_NOT_FOUND {
			continue // an empty slot
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get handle of MIG device %d: %w", k, ret)
		}
		var m MIGInstance
		if m.UUID, ret = mig.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get UUID of MIG device %d: %w", k, ret)
		}
		fail := func(what string, ret nvml.Return) ([]MIGInstance, error) {
			return nil, fmt.Errorf("get %s of MIG device %d (%s): %w", what, k, m.UUID, ret)
		}
		if m.GPUInstance, ret = mig.GetGpuInstanceId(); ret != nvml.SUCCESS {
			return fail("GPU instance id", ret)
		}
		if m.ComputeInstance, ret = mig.GetComputeInstanceId(); ret != nvml.SUCCESS {
			return fail("compute instance id", ret)
		}
		mem, ret := mig.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return fail("memory information", ret)
		}
		m.MemUsedMiB, m.MemTotalMiB = mib(mem.Used), mib(mem.Total)
		procs, ret := mig.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			return fail("compute processes", ret)
		}
		m.PIDs = pids(procs)
		out = append(out, m)
	}
	return out, nil
}

// pids returns the sorted, distinct process ids of procs.
func pids(procs []nvml.ProcessInfo) []int {
	out := make([]int, 0, len(procs))
	for _, p := range procs {
		out = append(out, int(p.Pid))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func mib(bytes uint64) float64 { return float64(bytes) / (1 << 20) }
