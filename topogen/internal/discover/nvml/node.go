// Package nvml describes the GPUs of one node: their identity (index, minor
// number, UUID, PCI bus id, product and the Slurm GRES type derived from it),
// their CPU and NUMA affinity, their NVLinks to each other and to NVSwitches,
// and their multi-node NVLink fabric (GB200 NVL72 and the like).
//
// A Node comes either from NVML on the node itself (Collect, through
// go-nvml's nvml.Interface, which tests replace with go-nvml's mock servers)
// or from nvidia-smi output saved on disk (ParseQueryXML for `nvidia-smi -q
// -x`, ParseTopoMatrix and Node.Merge for `nvidia-smi topo -m`). Read and
// Write carry it as the JSON file `topogen collect` writes per node; both
// validate it, so a file that reaches the renderers has unique indices, minor
// numbers, UUIDs and bus ids and NVLink peers that exist.
//
// The parsers are pure functions of their input; only Collect talks to the
// driver, and it takes the library and the clock from its caller.
package nvml

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sources a Node can come from (Node.Source).
const (
	SourceNVML      = "nvml"
	SourceNvidiaSMI = "nvidia-smi"
)

// Fabric states (Fabric.State), as NVML's NVML_GPU_FABRIC_STATE_* and
// nvidia-smi's "Fabric > State" name them, lower-cased with underscores.
const (
	FabricCompleted    = "completed"
	FabricInProgress   = "in_progress"
	FabricNotStarted   = "not_started"
	FabricNotSupported = "not_supported"
)

// Node is what `topogen collect` writes per node as JSON.
type Node struct {
	Hostname    string    `json:"hostname"`
	CollectedAt time.Time `json:"collected_at"`
	Source      string    `json:"source"` // SourceNVML or SourceNvidiaSMI
	Driver      string    `json:"driver_version,omitempty"`
	CUDA        string    `json:"cuda_version,omitempty"` // "12.4": the newest CUDA the driver supports
	GPUs        []GPU     `json:"gpus"`                   // sorted by Minor, then Index
}

// GPU is one physical GPU. MIG instances are not listed: MIG only says the
// GPU is partitioned.
type GPU struct {
	// Index is NVML's (and nvidia-smi's) index: the position in PCI bus order
	// that CUDA_DEVICE_ORDER=PCI_BUS_ID also uses. It need not equal Minor.
	Index int `json:"index"`
	// Minor is the minor number of /dev/nvidia<minor>, the file gres.conf
	// names; -1 when unknown.
	Minor int    `json:"minor"`
	UUID  string `json:"uuid"`
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3".
	Name string `json:"name"`
	// Type is GRESType(Name), e.g. "h100".
	Type string `json:"type"`
	// PCIBusID is normalised: "0000:18:00.0", lower case, domain of at least 4 digits.
	PCIBusID string `json:"pci_bus_id"`
	// NUMANode is the NUMA node of the CPUs and memory nearest the GPU
	// (nvidia-smi's "NUMA Affinity"), not the NUMA node a Grace-coupled GPU's
	// own memory forms ("GPU NUMA ID"); -1 when unknown.
	NUMANode int `json:"numa_node"`
	// CPUAffinity lists the CPUs nearest the GPU in Slurm's (and Linux's)
	// list syntax, canonical: ascending, merged ranges, e.g. "0-47,96-143".
	CPUAffinity string  `json:"cpu_affinity,omitempty"`
	MemoryMiB   int64   `json:"memory_mib,omitempty"`
	MIG         bool    `json:"mig_enabled,omitempty"`
	Fabric      *Fabric `json:"fabric,omitempty"`  // nil when the GPU has no NVLink fabric
	NVLinks     []Link  `json:"nvlinks,omitempty"` // sorted by Peer
}

// Fabric is a GPU's place in a (multi-node) NVLink fabric as the fabric
// manager reports it. GPUs with the same non-empty ClusterUUID and the same
// CliqueID reach each other over NVLink, across nodes too.
type Fabric struct {
	// ClusterUUID is empty when the fabric manager reports the all-zero UUID,
	// as single-node NVSwitch systems do: such a GPU is in no multi-node domain.
	ClusterUUID string `json:"cluster_uuid"`
	CliqueID    uint32 `json:"clique_id"`
	State       string `json:"state"`            // one of the Fabric* constants
	Health      string `json:"health,omitempty"` // "healthy", "unhealthy", "limited_capacity"; empty when not reported
}

// Link counts the NVLinks from a GPU to one peer.
type Link struct {
	Peer  int `json:"peer"`  // Index of the peer GPU on this node, or -1 for NVSwitches
	Count int `json:"count"` // number of NVLinks to it (NV18 -> 18)
}

// Read decodes a Node written by Write. Unknown fields, trailing data and a
// node that does not validate are errors.
func Read(r io.Reader) (Node, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var n Node
	if err := dec.Decode(&n); err != nil {
		return Node{}, fmt.Errorf("decode node JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Node{}, errors.New("decode node JSON: data after the node object")
	}
	if n.GPUs == nil {
		n.GPUs = []GPU{} // as Collect and the parsers return a node without GPUs
	}
	sortGPUs(n.GPUs)
	if err := n.Validate(); err != nil {
		return Node{}, err
	}
	return n, nil
}

// Write validates n and encodes it as indented JSON with GPUs sorted by
// minor number. n is not modified.
func Write(w io.Writer, n Node) error {
	n.GPUs = slices.Clone(n.GPUs)
	if n.GPUs == nil {
		n.GPUs = []GPU{} // "gpus": [] rather than null
	}
	sortGPUs(n.GPUs)
	if err := n.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return fmt.Errorf("encode node %s: %w", n.Hostname, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write node %s: %w", n.Hostname, err)
	}
	return nil
}

// Validate returns every problem in n, each prefixed with the path of its
// field (for example "gpus[3].uuid"), joined; nil when n is valid.
func (n Node) Validate() error {
	var errs []error
	if strings.TrimSpace(n.Hostname) == "" {
		errs = append(errs, errors.New("hostname: empty; collect sets it from the node's name"))
	}
	if n.Source != SourceNVML && n.Source != SourceNvidiaSMI {
		errs = append(errs, fmt.Errorf("source: %q is neither %q nor %q", n.Source, SourceNVML, SourceNvidiaSMI))
	}
	errs = append(errs, validateGPUs(n.GPUs)...)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid node %q: %w", n.Hostname, errors.Join(errs...))
}

// validateGPUs checks what a parser can check without a hostname.
func validateGPUs(gpus []GPU) []error {
	var errs []error
	// Paths are positions in the JSON array; the GPU index is added for
	// people, who think in indices.
	add := func(i int, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("gpus[%d].%s (GPU index %d): %s", i, field, gpus[i].Index, fmt.Sprintf(format, args...)))
	}
	other := func(j int) string { return fmt.Sprintf("gpus[%d] (GPU index %d)", j, gpus[j].Index) }
	index := map[int]int{} // GPU index -> position in gpus
	minor := map[int]int{}
	uuid := map[string]int{}
	bus := map[string]int{}
	for i, g := range gpus {
		if g.Index < 0 {
			add(i, "index", "%d is negative", g.Index)
		} else if j, dup := index[g.Index]; dup {
			add(i, "index", "%d is also the index of %s", g.Index, other(j))
		} else {
			index[g.Index] = i
		}
		if g.Minor < -1 {
			add(i, "minor", "%d is neither a minor number nor -1 (unknown)", g.Minor)
		} else if j, dup := minor[g.Minor]; dup && g.Minor >= 0 {
			add(i, "minor", "%d is also the minor number of %s", g.Minor, other(j))
		} else {
			minor[g.Minor] = i
		}
		if g.UUID == "" {
			add(i, "uuid", "empty")
		} else if j, dup := uuid[g.UUID]; dup {
			add(i, "uuid", "%s is also the UUID of %s", g.UUID, other(j))
		} else {
			uuid[g.UUID] = i
		}
		if g.Name == "" {
			add(i, "name", "empty")
		}
		if g.Type == "" {
			add(i, "type", "empty; it is GRESType(name)")
		}
		if norm, err := NormalizeBusID(g.PCIBusID); err != nil {
			add(i, "pci_bus_id", "%v", err)
		} else if norm != g.PCIBusID {
			add(i, "pci_bus_id", "%q is not normalised; want %q", g.PCIBusID, norm)
		} else if j, dup := bus[g.PCIBusID]; dup {
			add(i, "pci_bus_id", "%s is also the bus id of %s", g.PCIBusID, other(j))
		} else {
			bus[g.PCIBusID] = i
		}
		if g.NUMANode < -1 {
			add(i, "numa_node", "%d is neither a NUMA node nor -1 (unknown)", g.NUMANode)
		}
		if g.CPUAffinity != "" {
			if _, err := ParseCPUList(g.CPUAffinity); err != nil {
				add(i, "cpu_affinity", "%v", err)
			}
		}
		if g.MemoryMiB < 0 {
			add(i, "memory_mib", "%d is negative", g.MemoryMiB)
		}
		if f := g.Fabric; f != nil {
			switch f.State {
			case FabricCompleted, FabricInProgress, FabricNotStarted, FabricNotSupported:
			default:
				add(i, "fabric.state", "%q is not one of %s, %s, %s, %s", f.State,
					FabricCompleted, FabricInProgress, FabricNotStarted, FabricNotSupported)
			}
		}
	}
	for i, g := range gpus {
		seen := map[int]bool{}
		for k, l := range g.NVLinks {
			field := fmt.Sprintf("nvlinks[%d]", k)
			switch _, known := index[l.Peer]; {
			case l.Peer == g.Index:
				add(i, field, "peer %d is the GPU itself", l.Peer)
			case l.Peer != -1 && !known:
				add(i, field, "peer %d is no GPU of this node (NVSwitches are -1)", l.Peer)
			case seen[l.Peer]:
				add(i, field, "peer %d is listed twice", l.Peer)
			}
			seen[l.Peer] = true
			if l.Count <= 0 {
				add(i, field, "count %d is not positive", l.Count)
			}
		}
	}
	return errs
}

// sortGPUs orders GPUs by minor number; unknown minors (-1) come first, and
// ties keep index order.
func sortGPUs(gpus []GPU) {
	slices.SortStableFunc(gpus, func(a, b GPU) int {
		return cmp.Or(cmp.Compare(a.Minor, b.Minor), cmp.Compare(a.Index, b.Index))
	})
}

func sortLinks(links []Link) {
	slices.SortFunc(links, func(a, b Link) int { return cmp.Compare(a.Peer, b.Peer) })
}

// NormalizeBusID returns a PCI address in the form Linux's sysfs uses,
// "0000:18:00.0": lower case, the domain with at least 4 hex digits, 2 for
// the bus and the device, 1 for the function. It accepts NVML's and
// nvidia-smi's 8-digit domain ("00000000:18:00.0") and an address without a
// domain ("18:00.0", domain 0).
func NormalizeBusID(s string) (string, error) {
	orig := s
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("PCI bus id %q: %s; want DOMAIN:BUS:DEVICE.FUNCTION such as 0000:18:00.0", orig, why)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return bad("empty")
	}
	parts := strings.Split(s, ":")
	domain := "0"
	switch len(parts) {
	case 2:
	case 3:
		domain, parts = parts[0], parts[1:]
	default:
		return bad("not two or three colon-separated fields")
	}
	devFn := strings.Split(parts[1], ".")
	if len(devFn) != 2 {
		return bad("no .FUNCTION")
	}
	d, err1 := strconv.ParseUint(domain, 16, 32)
	b, err2 := strconv.ParseUint(parts[0], 16, 8)
	dev, err3 := strconv.ParseUint(devFn[0], 16, 8)
	fn, err4 := strconv.ParseUint(devFn[1], 16, 8)
	if err := errors.Join(err1, err2, err3, err4); err != nil || len(domain) > 8 || len(parts[0]) > 2 ||
		len(devFn[0]) > 2 || len(devFn[1]) > 1 {
		return bad("a field is not hexadecimal or too long")
	}
	if dev > 0x1f || fn > 7 {
		return bad("device above 1f or function above 7")
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, dev, fn), nil
}

// cpuRange is an inclusive range of CPU numbers.
type cpuRange struct{ lo, hi int }

// maxCPU bounds CPU numbers so that a corrupt list cannot make us allocate
// or loop without end; Linux's NR_CPUS tops out at 8192.
const maxCPU = 1 << 16

// ParseCPUList parses a CPU list such as "0-55,112-167" (Linux's and Slurm's
// syntax) and returns it canonical: ranges ascending and merged.
func ParseCPUList(s string) (string, error) {
	rs, err := parseCPURanges(s)
	if err != nil {
		return "", err
	}
	return formatCPURanges(rs), nil
}

func parseCPURanges(s string) ([]cpuRange, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("CPU list is empty")
	}
	var rs []cpuRange
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("CPU list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("CPU list %q: range %s runs backwards", s, item)
			}
		}
		rs = append(rs, cpuRange{a, b})
	}
	slices.SortFunc(rs, func(x, y cpuRange) int { return cmp.Compare(x.lo, y.lo) })
	merged := rs[:1]
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if r.lo <= last.hi+1 {
			last.hi = max(last.hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

func parseCPU(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCPU {
		return 0, fmt.Errorf("CPU number %q is above %d", s, maxCPU)
	}
	return n, nil
}

func formatCPURanges(rs []cpuRange) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.lo))
		if r.hi != r.lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.hi))
		}
	}
	return b.String()
}

// cpuListFromMask renders a bitmask of CPUs, 64 (bits.UintSize) to a word
// with CPU 0 in bit 0 of word 0, as NVML returns it; "" when no bit is set.
func cpuListFromMask(words []uint, wordBits int) string {
	var rs []cpuRange
	for w, word := range words {
		for bit := range wordBits {
			if word&(1<<uint(bit)) == 0 {
				continue
			}
			cpu := w*wordBits + bit
			if n := len(rs); n > 0 && rs[n-1].hi == cpu-1 {
				rs[n-1].hi = cpu
			} else {
				rs = append(rs, cpuRange{cpu, cpu})
			}
		}
	}
	return formatCPURanges(rs)
}
