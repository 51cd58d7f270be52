package nvml

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// How many CPUs and NUMA nodes Collect asks NVML about. The masks cost a bit
// each, and Linux kernels are built for at most 8192 CPUs.
const (
	affinityCPUs  = 8192
	affinityNodes = 1024
)

// Collect describes the node's GPUs through NVML. lib is gonvml.New() on a
// GPU node and one of go-nvml's mock servers in tests; Collect calls Init and
// Shutdown itself. hostname and now become the Node's Hostname and
// CollectedAt.
//
// Init, DeviceGetCount and a device's handle, UUID, name and PCI info are
// required: their failure is an error that wraps the nvml.Return (errors.Is
// works with nvml.ERROR_LIBRARY_NOT_FOUND and the like). Everything else is
// optional: a call that fails (ERROR_NOT_SUPPORTED on a GPU without NVLink or
// fabric, say) leaves its field empty or -1. Calls that older drivers lack
// (fabric info, CPU affinity within a scope) are made only when the library
// has the symbol, since go-nvml would otherwise jump to a missing function.
func Collect(ctx context.Context, lib gonvml.Interface, hostname string, now time.Time) (Node, error) {
	if strings.TrimSpace(hostname) == "" {
		return Node{}, errors.New("collect GPUs: empty hostname; pass the node's name as Slurm knows it")
	}
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return Node{}, fmt.Errorf("initialise NVML (is the NVIDIA driver installed and loaded?): %w", ret)
	}
	// Shutdown only drops NVML's reference count; its failure costs nothing.
	defer func() { _ = lib.Shutdown() }()

	n := Node{Hostname: hostname, CollectedAt: now, Source: SourceNVML, GPUs: []GPU{}}
	if v, ret := lib.SystemGetDriverVersion(); ret == gonvml.SUCCESS {
		n.Driver = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == gonvml.SUCCESS && v > 0 {
		n.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10) // 12040 -> 12.4
	}
	count, ret := lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return Node{}, fmt.Errorf("count GPUs with NVML: %w", ret)
	}

	ext := lib.Extensions()
	has := func(symbol string) bool { return ext.LookupSymbol(symbol) == nil }
	c := collector{
		fabricV4:      has("nvmlDeviceGetGpuFabricInfo_v4"),
		fabricV1:      has("nvmlDeviceGetGpuFabricInfo"),
		affinityScope: has("nvmlDeviceGetCpuAffinityWithinScope"),
	}
	devs := make([]gonvml.Device, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return Node{}, fmt.Errorf("collect GPU %d: %w", i, err)
		}
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			return Node{}, fmt.Errorf("get NVML handle of GPU %d: %w", i, ret)
		}
		g, err := c.gpu(i, dev)
		if err != nil {
			return Node{}, err
		}
		devs[i] = dev
		n.GPUs = append(n.GPUs, g)
	}

	// NVLink ends are reported as PCI bus ids; map them back to indices.
	byBus := make(map[string]int, count)
	for _, g := range n.GPUs {
		byBus[g.PCIBusID] = g.Index
	}
	for i, dev := range devs {
		if err := ctx.Err(); err != nil {
			return Node{}, fmt.Errorf("collect NVLinks of GPU %d: %w", i, err)
		}
		n.GPUs[i].NVLinks = nvlinks(dev, i, byBus)
	}

	sortGPUs(n.GPUs)
	if errs := validateGPUs(n.GPUs); len(errs) > 0 {
		return Node{}, fmt.Errorf("NVML described inconsistent GPUs (a driver fault; check nvidia-smi -q): %w", errors.Join(errs...))
	}
	return n, nil
}

// collector holds what Collect learnt about the library once.
type collector struct {
	fabricV4, fabricV1, affinityScope bool
}

func (c collector) gpu(i int, dev gonvml.Device) (GPU, error) {
	g := GPU{Index: i, Minor: -1, NUMANode: -1}
	var ret gonvml.Return
	if g.UUID, ret = dev.GetUUID(); ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("get UUID of GPU %d: %w", i, ret)
	}
	if g.Name, ret = dev.GetName(); ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("get name of GPU %d (%s): %w", i, g.UUID, ret)
	}
	g.Type = GRESType(g.Name)
	pci, ret := dev.GetPciInfo()
	if ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("get PCI info of GPU %d (%s): %w", i, g.UUID, ret)
	}
	bus, err := NormalizeBusID(cString(pci.BusId[:]))
	if err != nil {
		return GPU{}, fmt.Errorf("GPU %d (%s): %w", i, g.UUID, err)
	}
	g.PCIBusID = bus

	if minor, ret := dev.GetMinorNumber(); ret == gonvml.SUCCESS {
		g.Minor = minor
	}
	if mem, ret := dev.GetMemoryInfo(); ret == gonvml.SUCCESS {
		g.MemoryMiB = int64(mem.Total >> 20)
	}
	if current, _, ret := dev.GetMigMode(); ret == gonvml.SUCCESS {
		g.MIG = current == gonvml.DEVICE_MIG_ENABLE
	}

	// Affinity within the NUMA node, as nvidia-smi topo -m shows it; plain
	// GetCpuAffinity (the "ideal" affinity) is what drivers before R470 have.
	var mask []uint
	if c.affinityScope {
		mask, ret = dev.GetCpuAffinityWithinScope(affinityCPUs, gonvml.AFFINITY_SCOPE_NODE)
	} else {
		mask, ret = dev.GetCpuAffinity(affinityCPUs)
	}
	if ret == gonvml.SUCCESS {
		g.CPUAffinity = cpuListFromMask(mask, bits.UintSize)
	}
	// GetNumaNodeId is not used: it is the NUMA node a GPU's own memory forms
	// on Grace systems ("GPU NUMA ID"), not the node nearest to it.
	if nodes, ret := dev.GetMemoryAffinity(affinityNodes, gonvml.AFFINITY_SCOPE_NODE); ret == gonvml.SUCCESS {
		g.NUMANode = singleBit(nodes, bits.UintSize)
	}
	g.Fabric = c.fabric(dev)
	return g, nil
}

// fabric asks for the v4 structure (health and cliques) where the driver has
// it and falls back to v1 (no health); nil when the GPU has no fabric.
func (c collector) fabric(dev gonvml.Device) *Fabric {
	if c.fabricV4 {
		info, ret := dev.GetGpuFabricInfo_v4()
		switch ret {
		case gonvml.SUCCESS:
			// The legacy clique id is the first unicast-pointer clique
			// (nvml.h, nvmlGpuFabricInfo_v4_t); entries are sorted by type.
			var clique uint32
			for _, cl := range info.Cliques[:min(int(info.NumCliques), len(info.Cliques))] {
				if cl.Type == gonvml.GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER {
					clique = cl.Id
					break
				}
			}
			return newFabric(info.ClusterUuid, clique, info.State, info.HealthSummary)
		case gonvml.ERROR_NOT_SUPPORTED:
			return nil
		}
	}
	if c.fabricV1 {
		if info, ret := dev.GetGpuFabricInfo(); ret == gonvml.SUCCESS {
			return newFabric(info.ClusterUuid, info.CliqueId, info.State, gonvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED)
		}
	}
	return nil
}

func newFabric(cluster [16]uint8, clique uint32, state uint8, health uint8) *Fabric {
	f := &Fabric{CliqueID: clique}
	switch state {
	case gonvml.GPU_FABRIC_STATE_COMPLETED:
		f.State = FabricCompleted
	case gonvml.GPU_FABRIC_STATE_IN_PROGRESS:
		f.State = FabricInProgress
	case gonvml.GPU_FABRIC_STATE_NOT_STARTED:
		f.State = FabricNotStarted
	default: // GPU_FABRIC_STATE_NOT_SUPPORTED and states newer than this code
		return nil
	}
	switch health {
	case gonvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY:
		f.Health = "healthy"
	case gonvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY:
		f.Health = "unhealthy"
	case gonvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY:
		f.Health = "limited_capacity"
	}
	if cluster != [16]uint8{} {
		f.ClusterUUID = fmt.Sprintf("%x-%x-%x-%x-%x", cluster[0:4], cluster[4:6], cluster[6:8], cluster[8:10], cluster[10:16])
	}
	return f
}

// nvlinks counts the active NVLinks of dev by the GPU at their far end; ends
// that are no GPU of this node are NVSwitches (peer -1).
func nvlinks(dev gonvml.Device, self int, byBus map[string]int) []Link {
	count := map[int]int{}
	for l := range gonvml.NVLINK_MAX_LINKS {
		state, ret := dev.GetNvLinkState(l)
		if ret == gonvml.ERROR_NOT_SUPPORTED && l == 0 {
			return nil // a GPU without NVLink
		}
		if ret != gonvml.SUCCESS || state != gonvml.FEATURE_ENABLED {
			continue // links past the GPU's last answer ERROR_INVALID_ARGUMENT
		}
		peer := -1
		if pci, ret := dev.GetNvLinkRemotePciInfo(l); ret == gonvml.SUCCESS {
			if bus, err := NormalizeBusID(cString(pci.BusId[:])); err == nil {
				if i, ok := byBus[bus]; ok {
					peer = i
				}
			}
		}
		if peer == self {
			continue
		}
		count[peer]++
	}
	var links []Link
	for peer, k := range count {
		links = append(links, Link{Peer: peer, Count: k})
	}
	sortLinks(links)
	return links
}

// singleBit returns the number of the only bit set in mask, or -1 when none
// or several are.
func singleBit(mask []uint, wordBits int) int {
	found := -1
	for w, word := range mask {
		if word == 0 {
			continue
		}
		if found >= 0 || bits.OnesCount(word) != 1 {
			return -1
		}
		found = w*wordBits + bits.TrailingZeros(word)
	}
	return found
}

// cString converts a NUL-terminated C char array to a string.
func cString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
