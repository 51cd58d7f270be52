package render

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// GresOptions steer GresConf.
type GresOptions struct {
	// CoresPerNode gives the number of physical cores of each node (CPUs
	// divided by threads per core, as Slurm counts them). A GPU's Cores=
	// is written only for nodes listed here: NVML reports logical CPUs,
	// and on a node with hyper-threads those numbers are not Slurm's core
	// numbers, so guessing would make slurmd reject gres.conf.
	CoresPerNode map[string]int
	// DevicePrefix is where the device files are; default "/dev/nvidia".
	DevicePrefix string
}

// GresConf renders one gres.conf line per GPU, in device minor order, so
// Slurm's GPU index on each node is the position of /dev/nvidiaN in the
// list, with NVLink counts (Links=) and CPU affinity (Cores=) where known.
func GresConf(nodes []nvml.Node, opt GresOptions, source string) ([]byte, error) {
	if opt.DevicePrefix == "" {
		opt.DevicePrefix = "/dev/nvidia"
	}
	ns := append([]nvml.Node(nil), nodes...)
	sort.Slice(ns, func(i, j int) bool { return ns[i].Hostname < ns[j].Hostname })
	if err := refuseMIG(ns); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(Header(source))
	b.WriteString("AutoDetect=off\n")
	for _, n := range ns {
		if !graph.ValidNodeName(n.Hostname) {
			// The name comes from a node description file; written raw it
			// would break gres.conf or name another node.
			return nil, fmt.Errorf("node description with host name %q: not a name Slurm accepts (letters, digits, '.', '_' and '-' only): fix the file or its collect --hostname", n.Hostname)
		}
		gpus := append([]nvml.GPU(nil), n.GPUs...)
		sort.Slice(gpus, func(i, j int) bool { return gpus[i].Minor < gpus[j].Minor })
		pos := map[int]int{} // NVML index -> position in this node's list
		for i, g := range gpus {
			if g.Minor < 0 {
				return nil, fmt.Errorf("node %s: GPU %d has no device minor number: cannot name its device file", n.Hostname, g.Index)
			}
			pos[g.Index] = i
		}
		fmt.Fprintf(&b, "# %s: %d GPUs\n", n.Hostname, len(gpus))
		for i, g := range gpus {
			fmt.Fprintf(&b, "NodeName=%s Name=gpu", n.Hostname)
			if g.Type != "" {
				fmt.Fprintf(&b, " Type=%s", g.Type)
			}
			fmt.Fprintf(&b, " File=%s%d", opt.DevicePrefix, g.Minor)
			if max, ok := opt.CoresPerNode[n.Hostname]; ok && g.CPUAffinity != "" {
				cores, err := coresBelow(g.CPUAffinity, max)
				if err != nil {
					return nil, fmt.Errorf("node %s GPU %d: %w", n.Hostname, g.Index, err)
				}
				if cores != "" {
					fmt.Fprintf(&b, " Cores=%s", cores)
				}
			}
			if len(g.NVLinks) > 0 {
				links := make([]string, len(gpus))
				for j := range links {
					links[j] = "0"
				}
				links[i] = "-1"
				// GPUs on NVSwitches (peer -1) reach every other GPU on the
				// node's switches with as many links as the poorer of the two
				// has, which is what nvidia-smi topo -m shows (NV18).
				if mine := switchLinks(g); mine > 0 {
					for j, o := range gpus {
						if theirs := switchLinks(o); j != i && theirs > 0 {
							links[j] = strconv.Itoa(min(mine, theirs))
						}
					}
				}
				for _, l := range g.NVLinks {
					if p, ok := pos[l.Peer]; ok && l.Peer >= 0 && p != i {
						links[p] = strconv.Itoa(l.Count)
					}
				}
				fmt.Fprintf(&b, " Links=%s", strings.Join(links, ","))
			}
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// coresBelow keeps the CPUs of a list ("0-47,96-143") below max and
// writes them back as a list.
func coresBelow(list string, max int) (string, error) {
	var keep []int
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return "", fmt.Errorf("CPU list %q: %q is not a number", list, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return "", fmt.Errorf("CPU list %q: bad range %q", list, r)
			}
		}
		for c := a; c <= b && c < max; c++ {
			keep = append(keep, c)
		}
	}
	sort.Ints(keep)
	var parts []string
	for i := 0; i < len(keep); {
		j := i
		for j+1 < len(keep) && keep[j+1] == keep[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(keep[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", keep[i], keep[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ","), nil
}

// switchLinks counts a GPU's NVLinks to NVSwitches.
func switchLinks(g nvml.GPU) int {
	n := 0
	for _, l := range g.NVLinks {
		if l.Peer < 0 {
			n += l.Count
		}
	}
	return n
}

// refuseMIG refuses nodes with MIG-enabled GPUs, all of them in one error.
// Slurm schedules a MIG GPU's instances, not the GPU: gres.conf needs one
// line per MIG device, typed by its profile (Type=1g.10gb) with
// MultipleFiles= naming the parent GPU's /dev/nvidiaN and the device's
// /dev/nvidia-caps files. The node descriptions carry only "MIG enabled",
// not the instances, their profiles or their caps minors, so writing the
// whole GPU (File=/dev/nvidiaN with AutoDetect=off) would hand jobs a GPU
// whose memory and SMs belong to instances: refuse instead, and say what
// to do.
func refuseMIG(nodes []nvml.Node) error {
	var bad []string
	for _, n := range nodes {
		var idx []string
		for _, g := range n.GPUs {
			if g.MIG {
				idx = append(idx, strconv.Itoa(g.Index))
			}
		}
		if len(idx) > 0 {
			bad = append(bad, fmt.Sprintf("%s (GPU %s)", n.Hostname, strings.Join(idx, ",")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("MIG is enabled on %s: gres.conf for MIG needs one line per MIG device, typed by its profile, "+
		"with MultipleFiles= for the GPU and its /dev/nvidia-caps files, which the node descriptions do not carry; "+
		"let Slurm find them (AutoDetect=nvml in a gres.conf of those nodes' own), or disable MIG there (nvidia-smi -mig 0)",
		strings.Join(bad, ", "))
}
