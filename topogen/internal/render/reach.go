package render

import (
	"fmt"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// Reach checks what a tree topology.conf leaves out of Slurm's reach, the
// two mistakes topology.conf(5) warns of, and returns the errors and the
// warnings. It checks nothing of a file without SwitchName lines.
//
//   - Cluster nodes under no switch are an error. topology.conf(5): "All
//     nodes in the network must be connected to at least one switch."
//     slurmctld only logs "switches lack access to N nodes", but
//     topology/tree chooses nodes switch by switch (it starts from the
//     switches' node sets), so such a node is never given to a job, and a
//     job that asks for it by name finds no switch above it and cannot
//     start: jobs are refused, not merely placed worse.
//   - Leaf switches with no common ancestor are a warning. topology.conf(5):
//     "Jobs can only span nodes connected by the same switch fabric, even
//     if there are available idle nodes in other areas of the cluster";
//     slurmctld logs "TOPOLOGY: no switch can reach all nodes through its
//     descendants. If this is not intentional, fix the topology.conf
//     file." It starts, and every job runs inside one tree: placement is
//     limited, and it is legal (the topology guide's own example of one
//     slurmctld for several physical clusters), so it is not refused.
//
// knownNodes is the cluster's node list; nil skips the first check.
func (tc *TopoConf) Reach(knownNodes []string) (errs, warns []ConfError) {
	if len(tc.Switches) == 0 {
		return nil, nil
	}
	placed := map[string]bool{}
	for _, s := range tc.Switches {
		for _, n := range s.Nodes {
			placed[n] = true
		}
	}
	if knownNodes != nil {
		var out []string
		for _, n := range knownNodes {
			if !placed[n] {
				out = append(out, n)
			}
		}
		if len(out) > 0 {
			errs = append(errs, ConfError{0, fmt.Sprintf("%d of the cluster's %d nodes are under no switch: %s; topology/tree never gives them "+
				"to a job (slurmctld logs \"switches lack access to %d nodes\"): put each under its leaf switch", len(out), len(knownNodes),
				hostlist.Compress(out), len(out))})
		}
	}
	// The nodes below each switch, through its children; a cycle (reported
	// by Validate) is cut where it closes.
	byName := map[string]ConfSwitch{}
	hasParent := map[string]bool{}
	for _, s := range tc.Switches {
		if _, dup := byName[s.Name]; !dup {
			byName[s.Name] = s
		}
		for _, c := range s.Switches {
			hasParent[c] = true
		}
	}
	var trees []reachTree
	for _, s := range tc.Switches {
		if hasParent[s.Name] || byName[s.Name].Line != s.Line {
			continue
		}
		t := reachTree{root: s.Name, nodes: map[string]bool{}}
		seen := map[string]bool{}
		var walk func(string)
		walk = func(name string) {
			sw, ok := byName[name]
			if !ok || seen[name] {
				return
			}
			seen[name] = true
			if len(sw.Nodes) > 0 {
				t.leaves++
			}
			for _, n := range sw.Nodes {
				t.nodes[n] = true
			}
			for _, c := range sw.Switches {
				walk(c)
			}
		}
		walk(s.Name)
		if len(t.nodes) == len(placed) {
			return errs, nil // one switch is above every node
		}
		trees = append(trees, t)
	}
	if len(trees) < 2 {
		return errs, nil // no root at all is a cycle, which Validate reports
	}
	sort.SliceStable(trees, func(i, j int) bool { return len(trees[i].nodes) > len(trees[j].nodes) })
	var parts []string
	for i, t := range trees {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(trees)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", t.root, count(t.leaves, "leaf", "leaves"), count(len(t.nodes), "node", "nodes")))
	}
	warns = append(warns, ConfError{0, fmt.Sprintf("no switch is above every leaf: the switches form %d trees with no common ancestor, %s; "+
		"no job spans two of them (slurmctld logs \"no switch can reach all nodes through its descendants\"): "+
		"if the fabric joins them, add the switch that does (SwitchName=... Switches=%s)",
		len(trees), strings.Join(parts, ", "), rootList(trees))})
	return errs, warns
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// reachTree is the part of a topology below one root switch.
type reachTree struct {
	root   string
	leaves int
	nodes  map[string]bool
}

// rootList is the roots of trees as a host list.
func rootList(trees []reachTree) string {
	roots := make([]string, len(trees))
	for i, t := range trees {
		roots[i] = t.root
	}
	return hostlist.Compress(roots)
}
