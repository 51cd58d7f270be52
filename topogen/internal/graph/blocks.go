package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
)

// BlockOptions steer Blocks.
type BlockOptions struct {
	// Prefix of block names: "nvl" gives nvl1, nvl2, ...
	Prefix string
	// Degraded says what to do with a node whose NVLink domain is not
	// whole (fabric state not "completed", or fewer GPUs than its
	// domain's other nodes): "exclude" (default: leave it out of every
	// block, so no job spans a broken domain) or "include".
	Degraded string
	// Sizes overrides the inferred BlockSizes.
	Sizes []int
}

// Block is one NVLink domain as a Slurm block.
type Block struct {
	Name    string   `json:"name"`
	Domain  string   `json:"domain"` // cluster UUID / clique ID
	Nodes   []string `json:"nodes"`
	GPUs    int      `json:"gpus"`
	Partial bool     `json:"partial,omitempty"` // holds nodes from a degraded domain (Degraded=include)
}

// BlockPlan is the block topology of a cluster.
type BlockPlan struct {
	Blocks   []Block   `json:"blocks"`
	Sizes    []int     `json:"block_sizes"`
	Findings []Finding `json:"findings,omitempty"`
}

// Blocks groups nodes into Slurm blocks by multi-node NVLink domain: all
// GPUs of a node must share one cluster UUID and clique ID. Nodes without
// fabric info are not in any block (a finding says so).
func Blocks(nodes []nvml.Node, opt BlockOptions) (BlockPlan, error) {
	if opt.Prefix == "" {
		opt.Prefix = "nvl"
	}
	if opt.Degraded == "" {
		opt.Degraded = "exclude"
	}
	if opt.Degraded != "exclude" && opt.Degraded != "include" {
		return BlockPlan{}, fmt.Errorf("degraded %q: want exclude or include", opt.Degraded)
	}
	if SanitizeName(opt.Prefix) != opt.Prefix {
		return BlockPlan{}, fmt.Errorf("block prefix %q: use letters, digits, '.', '_' and '-' only", opt.Prefix)
	}
	var plan BlockPlan
	note := func(sev Severity, kind, subject, format string, args ...any) {
		plan.Findings = append(plan.Findings, Finding{sev, kind, subject, fmt.Sprintf(format, args...)})
	}
	domains := map[string][]member{}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Hostname] {
			return BlockPlan{}, fmt.Errorf("node %s is described twice", n.Hostname)
		}
		seen[n.Hostname] = true
		if !ValidNodeName(n.Hostname) {
			// Node descriptions are files written on the nodes; a name
			// Slurm refuses would break block.conf, or a script's line.
			note(Warning, "bad-node-name", n.Hostname, "host name %q is not one Slurm accepts (letters, digits, '.', '_' and '-' only): not in any block; fix its node description", n.Hostname)
			continue
		}
		if len(n.GPUs) == 0 {
			note(Warning, "no-gpus", n.Hostname, "no GPUs found: not in any block")
			continue
		}
		dom, why := "", ""
		for _, g := range n.GPUs {
			if g.Fabric == nil || g.Fabric.ClusterUUID == "" {
				why = fmt.Sprintf("GPU %d has no multi-node NVLink fabric", g.Index)
				dom = ""
				break
			}
			d := fmt.Sprintf("%s/%d", g.Fabric.ClusterUUID, g.Fabric.CliqueID)
			if dom != "" && d != dom {
				why = fmt.Sprintf("its GPUs are in two NVLink domains (%s and %s)", dom, d)
				break
			}
			dom = d
			if g.Fabric.State != "completed" && why == "" {
				why = fmt.Sprintf("GPU %d fabric state is %q, not completed", g.Index, g.Fabric.State)
			}
		}
		if dom == "" {
			note(Info, "no-nvlink-domain", n.Hostname, "%s: not in any block", why)
			continue
		}
		domains[dom] = append(domains[dom], member{n.Hostname, len(n.GPUs), why})
	}
	keys := make([]string, 0, len(domains))
	for k := range domains {
		keys = append(keys, k)
	}
	// Blocks are numbered in the order of their first node, so names stay
	// stable as domains come and go elsewhere.
	sort.Slice(keys, func(i, j int) bool { return firstMember(domains[keys[i]]) < firstMember(domains[keys[j]]) })
	for _, k := range keys {
		ms := domains[k]
		maxGPUs := 0
		for _, m := range ms {
			if m.gpus > maxGPUs {
				maxGPUs = m.gpus
			}
		}
		b := Block{Domain: k}
		for _, m := range ms {
			why := m.degraded
			if why == "" && m.gpus < maxGPUs {
				why = fmt.Sprintf("%d GPUs where the domain's other nodes have %d", m.gpus, maxGPUs)
			}
			if why != "" {
				if opt.Degraded == "exclude" {
					note(Warning, "degraded-domain", m.node, "NVLink domain %s is degraded here (%s): left out of the block", k, why)
					continue
				}
				note(Warning, "degraded-domain", m.node, "NVLink domain %s is degraded here (%s): kept in the block as asked", k, why)
				b.Partial = true
			}
			b.Nodes = append(b.Nodes, m.node)
			b.GPUs += m.gpus
		}
		if len(b.Nodes) == 0 {
			continue
		}
		sort.Strings(b.Nodes)
		b.Name = fmt.Sprintf("%s%d", opt.Prefix, len(plan.Blocks)+1)
		plan.Blocks = append(plan.Blocks, b)
	}
	if len(plan.Blocks) == 0 {
		return plan, fmt.Errorf("no node is in a complete multi-node NVLink domain: a block topology needs at least one")
	}
	plan.Sizes = opt.Sizes
	if len(plan.Sizes) == 0 {
		plan.Sizes = inferSizes(plan.Blocks)
	}
	for i, s := range plan.Sizes {
		if s <= 0 || (i > 0 && s <= plan.Sizes[i-1]) {
			return plan, fmt.Errorf("block sizes %v: want increasing positive numbers", plan.Sizes)
		}
	}
	return plan, nil
}

type member struct {
	node     string
	gpus     int
	degraded string // why the node's domain is not whole here, or ""
}

func firstMember(ms []member) string {
	first := ""
	for _, m := range ms {
		if first == "" || m.node < first {
			first = m.node
		}
	}
	return first
}

// inferSizes picks Slurm's BlockSizes: the smallest block is the base
// size, and each doubling of it up to the whole cluster is an aggregated
// size (Slurm's rule: every size is the base times a power of two).
func inferSizes(blocks []Block) []int {
	base, total := 0, 0
	for _, b := range blocks {
		if base == 0 || len(b.Nodes) < base {
			base = len(b.Nodes)
		}
		total += len(b.Nodes)
	}
	sizes := []int{base}
	for s := base * 2; s <= total; s *= 2 {
		sizes = append(sizes, s)
	}
	return sizes
}

// String lists the plan's blocks for logs.
func (p BlockPlan) String() string {
	var parts []string
	for _, b := range p.Blocks {
		parts = append(parts, fmt.Sprintf("%s=%d nodes", b.Name, len(b.Nodes)))
	}
	return strings.Join(parts, ", ")
}
