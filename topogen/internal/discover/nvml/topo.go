package nvml

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Topo is the GPU part of `nvidia-smi topo -m`.
type Topo struct {
	GPUs []TopoGPU // in matrix order
}

// TopoGPU is one GPU row of the matrix.
type TopoGPU struct {
	Index int // n of the row's "GPU<n>"
	// Peers holds the row's cell for every other GPU, keyed by that GPU's
	// index: "NV18" (18 bonded NVLinks), "PIX", "PXB", "PHB", "NODE", "SYS",
	// or whatever else the driver prints there.
	Peers map[int]string
	// CPUAffinity is the "CPU Affinity" column as a canonical CPU list; ""
	// when the column is absent or N/A.
	CPUAffinity string
	// NUMA is the "NUMA Affinity" column; -1 when it is absent, N/A, or names
	// more than one node.
	NUMA int
}

// Columns after the device columns of the header, each one value per row.
// "GPU NUMA ID" is the NUMA node a Grace-coupled GPU's memory forms; it is
// read past, not kept.
var topoTrailing = map[string][]string{
	"cpu":      {"CPU", "Affinity"},
	"numa":     {"NUMA", "Affinity"},
	"gpu_numa": {"GPU", "NUMA", "ID"},
}

var (
	gpuName = regexp.MustCompile(`^GPU([0-9]+)$`)
	ansiCSI = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")
	// A cell: X, NV<k>, or an upper-case word (SYS, NODE, PHB, PXB, PIX,
	// SOC in old drivers).
	topoCell = regexp.MustCompile(`^(X|NV[0-9]+|[A-Z][A-Z0-9]*)$`)
)

// maxTopoLine bounds a line of the matrix; a node with 64 GPUs and 64 NICs
// needs about 1 KiB.
const maxTopoLine = 1 << 20

// ParseTopoMatrix reads the output of `nvidia-smi topo -m`: the header, the
// GPU rows, and nothing after the first blank line (the legends). Rows of
// other devices (NIC0, mlx5_0) are skipped, as are the columns for them.
// Terminal escapes, which nvidia-smi uses to underline the header, are
// removed first.
//
// It checks what a misread would break: every GPU column has exactly one
// row and the reverse, the diagonal is X, and the matrix is symmetric.
func ParseTopoMatrix(r io.Reader) (Topo, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxTopoLine)
	var header []string
	var rows [][]string
	for sc.Scan() {
		line := strings.TrimRight(ansiCSI.ReplaceAllString(sc.Text(), ""), " \t\r")
		if header == nil {
			if strings.TrimSpace(line) != "" {
				header = strings.Fields(line)
			}
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "Legend") {
			break
		}
		rows = append(rows, strings.Fields(line))
	}
	if err := sc.Err(); err != nil {
		return Topo{}, fmt.Errorf("read nvidia-smi topo -m output: %w", err)
	}
	if header == nil {
		return Topo{}, errors.New("nvidia-smi topo -m: no header line")
	}
	devices, trailing, err := topoHeader(header)
	if err != nil {
		return Topo{}, err
	}
	gpuCol := map[int]int{} // GPU index -> column
	var colGPU []int        // column -> GPU index, -1 for other devices
	for c, d := range devices {
		idx := -1
		if m := gpuName.FindStringSubmatch(d); m != nil {
			if idx, err = strconv.Atoi(m[1]); err != nil || idx > 1<<16 {
				return Topo{}, fmt.Errorf("nvidia-smi topo -m: header column %q: index out of range", d)
			}
			if _, dup := gpuCol[idx]; dup {
				return Topo{}, fmt.Errorf("nvidia-smi topo -m: header names %s twice", d)
			}
			gpuCol[idx] = c
		}
		colGPU = append(colGPU, idx)
	}
	if len(gpuCol) == 0 {
		return Topo{}, errors.New("nvidia-smi topo -m: the header names no GPU column (GPU0, GPU1, ...)")
	}

	var t Topo
	cells := map[int][]string{} // GPU index -> its row's device cells
	var errs []error
	for _, f := range rows {
		m := gpuName.FindStringSubmatch(f[0])
		if m == nil {
			continue // NIC0, mlx5_0, ...
		}
		idx, err := strconv.Atoi(m[1])
		col, ok := gpuCol[idx]
		if err != nil || !ok {
			errs = append(errs, fmt.Errorf("row %s: no such column in the header", f[0]))
			continue
		}
		if _, dup := cells[idx]; dup {
			errs = append(errs, fmt.Errorf("row %s: appears twice", f[0]))
			continue
		}
		vals := f[1:]
		if len(vals) < len(devices) || len(vals) > len(devices)+len(trailing) {
			errs = append(errs, fmt.Errorf("row %s: %d values for %d device and %d affinity columns",
				f[0], len(vals), len(devices), len(trailing)))
			continue
		}
		g := TopoGPU{Index: idx, Peers: map[int]string{}, NUMA: -1}
		for c, v := range vals[:len(devices)] {
			if !topoCell.MatchString(v) {
				errs = append(errs, fmt.Errorf("row %s, column %s: %q is no link type", f[0], devices[c], v))
			}
			if c == col && v != "X" {
				errs = append(errs, fmt.Errorf("row %s: %q on the diagonal where X belongs", f[0], v))
			}
			if c != col && v == "X" {
				errs = append(errs, fmt.Errorf("row %s, column %s: X off the diagonal", f[0], devices[c]))
			}
			if peer := colGPU[c]; peer >= 0 && c != col {
				g.Peers[peer] = v
			}
		}
		for k, v := range vals[len(devices):] {
			v = notApplicable(v)
			switch trailing[k] {
			case "cpu":
				if v != "" {
					if g.CPUAffinity, err = ParseCPUList(v); err != nil {
						errs = append(errs, fmt.Errorf("row %s, CPU Affinity: %w", f[0], err))
					}
				}
			case "numa":
				g.NUMA = topoNUMA(v)
			}
		}
		cells[idx] = vals[:len(devices)]
		t.GPUs = append(t.GPUs, g)
	}
	for idx := range gpuCol {
		if _, ok := cells[idx]; !ok {
			errs = append(errs, fmt.Errorf("column GPU%d has no row", idx))
		}
	}
	if len(errs) == 0 {
		for _, g := range t.GPUs {
			for peer, v := range g.Peers {
				if back := cells[peer][gpuCol[g.Index]]; back != v {
					errs = append(errs, fmt.Errorf("GPU%d to GPU%d is %s but GPU%d to GPU%d is %s",
						g.Index, peer, v, peer, g.Index, back))
				}
			}
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return Topo{}, fmt.Errorf("nvidia-smi topo -m: %w", errors.Join(errs...))
	}
	return t, nil
}

// topoHeader splits the header into device columns and the names of the
// trailing columns ("cpu", "numa", "gpu_numa") in their order.
func topoHeader(words []string) (devices, trailing []string, err error) {
	i := 0
	for ; i < len(words); i++ {
		if trailingAt(words, i) != "" {
			break
		}
		devices = append(devices, words[i])
	}
	for i < len(words) {
		name := trailingAt(words, i)
		if name == "" {
			return nil, nil, fmt.Errorf("nvidia-smi topo -m: header word %q after the affinity columns is no known column", words[i])
		}
		if slices.Contains(trailing, name) {
			return nil, nil, fmt.Errorf("nvidia-smi topo -m: header names %s twice", strings.Join(topoTrailing[name], " "))
		}
		trailing = append(trailing, name)
		i += len(topoTrailing[name])
	}
	return devices, trailing, nil
}

// trailingAt names the trailing column whose words start at words[i], or "".
func trailingAt(words []string, i int) string {
	for name, ws := range topoTrailing {
		if i+len(ws) <= len(words) && slices.Equal(words[i:i+len(ws)], ws) {
			return name
		}
	}
	return ""
}

// topoNUMA reads a "NUMA Affinity" cell: one node, or -1 for N/A and lists.
func topoNUMA(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// nvLinks returns k for a cell "NV<k>".
func nvLinks(cell string) (int, bool) {
	k, err := strconv.Atoi(strings.TrimPrefix(cell, "NV"))
	if !strings.HasPrefix(cell, "NV") || err != nil || k <= 0 {
		return 0, false
	}
	return k, true
}

// Merge adds what `nvidia-smi topo -m` knows and `nvidia-smi -q -x` does not
// to n's GPUs, matched by index: NVLinks from the NV<k> cells (replacing any
// n had), the CPU affinity and the NUMA node (where the matrix has them). It
// changes nothing and returns an error when the GPU counts or indices differ.
//
// The matrix counts the links between two GPUs even when they run through
// NVSwitches, so on an HGX H100 every pair is NV18; Collect reports the same
// board as 18 links to peer -1.
func (n *Node) Merge(t Topo) error {
	if len(t.GPUs) != len(n.GPUs) {
		return fmt.Errorf("merge topology into node %q: the matrix has %d GPUs, the node %d; "+
			"were nvidia-smi -q -x and topo -m run on the same node, both without -i?",
			n.Hostname, len(t.GPUs), len(n.GPUs))
	}
	pos := make(map[int]int, len(n.GPUs))
	for i, g := range n.GPUs {
		pos[g.Index] = i
	}
	type update struct {
		links []Link
		tg    TopoGPU
	}
	seen := make(map[int]bool, len(t.GPUs))
	for _, tg := range t.GPUs {
		if _, ok := pos[tg.Index]; !ok {
			return fmt.Errorf("merge topology into node %q: the matrix has GPU%d, the node no GPU of index %d",
				n.Hostname, tg.Index, tg.Index)
		}
		if seen[tg.Index] {
			return fmt.Errorf("merge topology into node %q: the matrix has GPU%d twice", n.Hostname, tg.Index)
		}
		seen[tg.Index] = true
	}
	updates := make(map[int]update, len(t.GPUs))
	for _, tg := range t.GPUs {
		i := pos[tg.Index]
		var links []Link
		for peer, cell := range tg.Peers {
			k, ok := nvLinks(cell)
			if !ok {
				continue
			}
			if _, known := pos[peer]; !known || peer == tg.Index {
				return fmt.Errorf("merge topology into node %q: GPU%d has %s to GPU%d, which the node lacks",
					n.Hostname, tg.Index, cell, peer)
			}
			links = append(links, Link{Peer: peer, Count: k})
		}
		sortLinks(links)
		updates[i] = update{links, tg}
	}
	for i, u := range updates {
		g := &n.GPUs[i]
		g.NVLinks = u.links
		if u.tg.CPUAffinity != "" {
			g.CPUAffinity = u.tg.CPUAffinity
		}
		if u.tg.NUMA >= 0 {
			g.NUMANode = u.tg.NUMA
		}
	}
	return nil
}
