package slurmrest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// JobGPUs pairs a job's node list with its gres_detail, which slurmrestd
// gives as one string per allocated node in the order of the expanded node
// list, e.g. nodes "gpu[2-3]" and ["gpu:h100:4(IDX:0-3)", "gpu:h100:2(IDX:4-5)"].
// A pending job has no detail and no GPUs.
func JobGPUs(nodes string, detail []string) ([]GPU, error) {
	if len(detail) == 0 {
		return nil, nil
	}
	names, err := hostlist.Expand(unset(&nodes))
	if err != nil {
		return nil, fmt.Errorf("job nodes: %w", err)
	}
	if len(names) != len(detail) {
		return nil, fmt.Errorf("gres_detail has %d entries for %d nodes (%q): refusing to guess which GPUs belong where",
			len(detail), len(names), nodes)
	}
	var out []GPU
	for i, d := range detail {
		gpus, err := ParseGRESDetail(names[i], d)
		if err != nil {
			return nil, err
		}
		out = append(out, gpus...)
	}
	return out, nil
}

// ParseGRESDetail parses one node's GRES allocation as Slurm prints it in
// gres_detail or a node's gres_used: "gpu:h100:4(IDX:0-3)", "gpu:2(IDX:0,2)",
// "gpu:h100:2(IDX:0-1),nic:1(IDX:0)", "gpu:h100:0(IDX:N/A)". Only GPUs are
// returned.
func ParseGRESDetail(node, s string) ([]GPU, error) {
	var out []GPU
	for _, item := range splitTop(s) {
		item = strings.TrimSpace(item)
		if isUnset(item) {
			continue
		}
		spec, rest, _ := strings.Cut(item, "(")
		fields := strings.Split(spec, ":")
		if fields[0] != "gpu" {
			continue
		}
		typ := ""
		if len(fields) == 3 {
			typ = fields[1]
		} else if len(fields) > 3 {
			return nil, fmt.Errorf("node %s: GRES %q: too many ':' fields", node, item)
		}
		_, idx, ok := strings.Cut(rest, "IDX:")
		if !ok {
			return nil, fmt.Errorf("node %s: GRES %q has no IDX list", node, item)
		}
		idx, _, _ = strings.Cut(idx, ")")
		if isUnset(idx) {
			continue
		}
		indices, err := parseIndexList(idx)
		if err != nil {
			return nil, fmt.Errorf("node %s: GRES %q: %w", node, item, err)
		}
		for _, n := range indices {
			out = append(out, GPU{Node: node, Index: n, Type: typ})
		}
	}
	return out, nil
}

// splitTop splits on commas that are not inside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// maxGPUIndex bounds an index list; no node has more devices than this.
const maxGPUIndex = 4096

func parseIndexList(s string) ([]int, error) {
	var out []int
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > maxGPUIndex {
			return nil, fmt.Errorf("index %q is not a GPU index", r)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > maxGPUIndex {
				return nil, fmt.Errorf("index range %q is not valid", r)
			}
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	return out, nil
}

// countGPUs returns the GPU count and first type of a node's GRES string
// ("gpu:h100:8", "gpu:h100:4(IDX:0-3)", "gpu:2,nic:1").
func countGPUs(s string) (int, string) {
	total, typ := 0, ""
	for _, item := range splitTop(s) {
		spec, _, _ := strings.Cut(strings.TrimSpace(item), "(")
		f := strings.Split(spec, ":")
		if f[0] != "gpu" || len(f) < 2 {
			continue
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil || n < 0 || n > maxGPUIndex {
			// Not a count a node has: summing it could wrap to a
			// negative total.
			continue
		}
		total += n
		if len(f) == 3 && typ == "" {
			typ = f[1]
		}
	}
	return total, typ
}
