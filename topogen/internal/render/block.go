package render

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// BlockConf renders topology.conf for topology/block.
func BlockConf(p graph.BlockPlan, source string) []byte {
	var b bytes.Buffer
	b.WriteString(Header(source))
	for _, bl := range p.Blocks {
		fmt.Fprintf(&b, "BlockName=%s Nodes=%s\n", bl.Name, List(bl.Nodes))
	}
	fmt.Fprintf(&b, "BlockSizes=%s\n", joinInts(p.Sizes))
	return b.Bytes()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// TopologyYAML renders topology.yaml (Slurm 25.05 and later), which holds
// several named topologies: the tree as "fabric" (the cluster default) and,
// when there are NVLink blocks, the blocks as "nvl", for partitions that
// ask for it with Topology=nvl. Either may be missing.
func TopologyYAML(g *graph.Graph, p *graph.BlockPlan, source string) []byte {
	var b bytes.Buffer
	b.WriteString(Header(source))
	if g != nil {
		b.WriteString("- topology: fabric\n  cluster_default: true\n  tree:\n    switches:\n")
		for _, f := range g.Fabrics {
			for _, s := range sortedSwitches(f) {
				fmt.Fprintf(&b, "      - switch: %s\n", s.Name)
				if len(s.Children) > 0 {
					fmt.Fprintf(&b, "        children: %s\n", List(s.Children))
				}
				if len(s.Hosts) > 0 {
					fmt.Fprintf(&b, "        nodes: %s\n", List(s.Hosts))
				}
			}
		}
	}
	if p != nil {
		fmt.Fprintf(&b, "- topology: nvl\n  cluster_default: %v\n  block:\n    block_sizes:\n", g == nil)
		for _, s := range p.Sizes {
			fmt.Fprintf(&b, "      - %d\n", s)
		}
		b.WriteString("    blocks:\n")
		for _, bl := range p.Blocks {
			fmt.Fprintf(&b, "      - block: %s\n        nodes: %s\n", bl.Name, List(bl.Nodes))
		}
	}
	return b.Bytes()
}

func sortedSwitches(f *graph.Fabric) []*graph.Switch {
	sw := append([]*graph.Switch(nil), f.Switches...)
	sortSwitches(sw)
	return sw
}
