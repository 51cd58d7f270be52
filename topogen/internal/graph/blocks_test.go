package graph_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// NVLink domains of the tests: a cluster UUID and a clique ID.
const (
	uuidA = "aaaaaaaa-0000-0000-0000-000000000001"
	uuidB = "bbbbbbbb-0000-0000-0000-000000000002"
)

// gb200 is a node with n GPUs, all in the domain uuid/clique with fabric
// state state ("" gives no fabric at all).
func gb200(host string, n int, uuid string, clique uint32, state string) nvml.Node {
	node := nvml.Node{Hostname: host, Source: nvml.SourceNVML}
	for i := range n {
		g := nvml.GPU{Index: i, Minor: i}
		if state != "" {
			g.Fabric = &nvml.Fabric{ClusterUUID: uuid, CliqueID: clique, State: state}
		}
		node.GPUs = append(node.GPUs, g)
	}
	return node
}

func complete(host string, uuid string, clique uint32) nvml.Node {
	return gb200(host, 4, uuid, clique, nvml.FabricCompleted)
}

var blocksTests = map[string]struct {
	nodes        []nvml.Node
	opt          graph.BlockOptions
	want         graph.BlockPlan // Findings compared through wantFindings
	wantFindings []string        // "kind subject", in order
	wantMsg      map[string]string
	wantErr      string
}{
	"two complete domains, numbered by their first node": {
		// Domain B is listed first, but domain A holds gpu1.
		nodes: []nvml.Node{
			complete("gpu4", uuidB, 1), complete("gpu3", uuidB, 1),
			complete("gpu2", uuidA, 7), complete("gpu1", uuidA, 7),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{
				{Name: "nvl1", Domain: uuidA + "/7", Nodes: []string{"gpu1", "gpu2"}, GPUs: 8},
				{Name: "nvl2", Domain: uuidB + "/1", Nodes: []string{"gpu3", "gpu4"}, GPUs: 8},
			},
			// Base 2 (the smallest block), doubled up to the 4 nodes.
			Sizes: []int{2, 4},
		},
	},
	"one cluster UUID, two cliques are two domains": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1), complete("gpu2", uuidA, 2),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{
				{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1"}, GPUs: 4},
				{Name: "nvl2", Domain: uuidA + "/2", Nodes: []string{"gpu2"}, GPUs: 4},
			},
			Sizes: []int{1, 2},
		},
	},
	"uneven blocks: base is the smallest, doubling stops at the total": {
		// Blocks of 3 and 1 nodes: base 1, then 2 and 4 (= total).
		nodes: []nvml.Node{
			complete("a1", uuidA, 1), complete("a2", uuidA, 1), complete("a3", uuidA, 1),
			complete("b1", uuidB, 1),
		},
		opt: graph.BlockOptions{Prefix: "rack"},
		want: graph.BlockPlan{
			Blocks: []graph.Block{
				{Name: "rack1", Domain: uuidA + "/1", Nodes: []string{"a1", "a2", "a3"}, GPUs: 12},
				{Name: "rack2", Domain: uuidB + "/1", Nodes: []string{"b1"}, GPUs: 4},
			},
			Sizes: []int{1, 2, 4},
		},
	},
	"three blocks of two: 6 nodes are not a doubling of 4": {
		nodes: []nvml.Node{
			complete("a1", uuidA, 1), complete("a2", uuidA, 1),
			complete("b1", uuidA, 2), complete("b2", uuidA, 2),
			complete("c1", uuidB, 1), complete("c2", uuidB, 1),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{
				{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"a1", "a2"}, GPUs: 8},
				{Name: "nvl2", Domain: uuidA + "/2", Nodes: []string{"b1", "b2"}, GPUs: 8},
				{Name: "nvl3", Domain: uuidB + "/1", Nodes: []string{"c1", "c2"}, GPUs: 8},
			},
			Sizes: []int{2, 4},
		},
	},
	"sizes given override the inferred ones": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1), complete("gpu2", uuidA, 1),
			complete("gpu3", uuidB, 1), complete("gpu4", uuidB, 1),
		},
		opt: graph.BlockOptions{Sizes: []int{2}},
		want: graph.BlockPlan{
			Blocks: []graph.Block{
				{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1", "gpu2"}, GPUs: 8},
				{Name: "nvl2", Domain: uuidB + "/1", Nodes: []string{"gpu3", "gpu4"}, GPUs: 8},
			},
			Sizes: []int{2},
		},
	},
	"fabric in progress: node left out by default": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1),
			gb200("gpu2", 4, uuidA, 1, nvml.FabricInProgress),
			complete("gpu3", uuidA, 1),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1", "gpu3"}, GPUs: 8}},
			Sizes:  []int{2},
		},
		wantFindings: []string{"degraded-domain gpu2"},
		wantMsg:      map[string]string{"degraded-domain gpu2": `GPU 0 fabric state is "in_progress", not completed): left out of the block`},
	},
	"fabric in progress: node kept with degraded include, block partial": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1),
			gb200("gpu2", 4, uuidA, 1, nvml.FabricInProgress),
			complete("gpu3", uuidA, 1),
		},
		opt: graph.BlockOptions{Degraded: "include"},
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1", "gpu2", "gpu3"}, GPUs: 12, Partial: true}},
			Sizes:  []int{3},
		},
		wantFindings: []string{"degraded-domain gpu2"},
		wantMsg:      map[string]string{"degraded-domain gpu2": "kept in the block as asked"},
	},
	"node with fewer GPUs than the rest of its domain": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1),
			gb200("gpu2", 3, uuidA, 1, nvml.FabricCompleted),
			complete("gpu3", uuidA, 1),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1", "gpu3"}, GPUs: 8}},
			Sizes:  []int{2},
		},
		wantFindings: []string{"degraded-domain gpu2"},
		wantMsg:      map[string]string{"degraded-domain gpu2": "3 GPUs where the domain's other nodes have 4"},
	},
	"nodes without fabric info, or without GPUs, are in no block": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1),
			gb200("h100-1", 8, "", 0, ""),                      // no fabric at all
			gb200("h100-2", 8, "", 0, nvml.FabricNotSupported), // all-zero cluster UUID: single-node NVSwitch
			{Hostname: "login1", Source: nvml.SourceNVML},
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1"}, GPUs: 4}},
			Sizes:  []int{1},
		},
		wantFindings: []string{"no-nvlink-domain h100-1", "no-nvlink-domain h100-2", "no-gpus login1"},
		wantMsg:      map[string]string{"no-nvlink-domain h100-1": "GPU 0 has no multi-node NVLink fabric"},
	},
	"host names Slurm refuses are in no block": {
		nodes: []nvml.Node{
			complete("gpu1", uuidA, 1),
			complete("gpu2;touch x", uuidA, 1),
			complete("gpü3", uuidA, 1),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1"}, GPUs: 4}},
			Sizes:  []int{1},
		},
		wantFindings: []string{"bad-node-name gpu2;touch x", "bad-node-name gpü3"},
	},
	"GPUs of one node in two domains": {
		nodes: func() []nvml.Node {
			split := complete("gpu2", uuidA, 1)
			split.GPUs[3].Fabric = &nvml.Fabric{ClusterUUID: uuidB, CliqueID: 1, State: nvml.FabricCompleted}
			return []nvml.Node{complete("gpu1", uuidA, 1), split, complete("gpu3", uuidA, 1)}
		}(),
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidA + "/1", Nodes: []string{"gpu1", "gpu3"}, GPUs: 8}},
			Sizes:  []int{2},
		},
		wantFindings: []string{"degraded-domain gpu2"},
		wantMsg:      map[string]string{"degraded-domain gpu2": "its GPUs are in two NVLink domains (" + uuidA + "/1 and " + uuidB + "/1)"},
	},
	"a domain whose every node is degraded makes no block, and numbering has no gap": {
		nodes: []nvml.Node{
			gb200("a1", 4, uuidA, 1, nvml.FabricInProgress),
			complete("b1", uuidB, 1),
		},
		want: graph.BlockPlan{
			Blocks: []graph.Block{{Name: "nvl1", Domain: uuidB + "/1", Nodes: []string{"b1"}, GPUs: 4}},
			Sizes:  []int{1},
		},
		wantFindings: []string{"degraded-domain a1"},
	},
	"no block at all": {
		nodes:        []nvml.Node{gb200("h100-1", 8, "", 0, "")},
		wantErr:      "no node is in a complete multi-node NVLink domain",
		wantFindings: []string{"no-nvlink-domain h100-1"},
	},
	"bad prefix": {
		nodes:   []nvml.Node{complete("gpu1", uuidA, 1)},
		opt:     graph.BlockOptions{Prefix: "nvl[1]"},
		wantErr: `block prefix "nvl[1]": use letters, digits`,
	},
	"bad degraded": {
		nodes:   []nvml.Node{complete("gpu1", uuidA, 1)},
		opt:     graph.BlockOptions{Degraded: "drop"},
		wantErr: `degraded "drop": want exclude or include`,
	},
	"decreasing sizes": {
		nodes:   []nvml.Node{complete("gpu1", uuidA, 1), complete("gpu2", uuidA, 1)},
		opt:     graph.BlockOptions{Sizes: []int{4, 2}},
		wantErr: "block sizes [4 2]: want increasing positive numbers",
	},
	"zero size": {
		nodes:   []nvml.Node{complete("gpu1", uuidA, 1)},
		opt:     graph.BlockOptions{Sizes: []int{0, 2}},
		wantErr: "want increasing positive numbers",
	},
	"duplicate hostnames": {
		nodes:   []nvml.Node{complete("gpu1", uuidA, 1), complete("gpu1", uuidA, 1)},
		wantErr: "node gpu1 is described twice",
	},
}

func TestBlocks(t *testing.T) {
	for name, tc := range blocksTests {
		t.Run(name, func(t *testing.T) {
			got, err := graph.Blocks(tc.nodes, tc.opt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Blocks error = %v, want it to contain %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Blocks: %v", err)
			} else {
				if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(graph.BlockPlan{}, "Findings")); diff != "" {
					t.Errorf("plan (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantFindings, findingKeys(got.Findings), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("findings (-want +got):\n%s\nall: %v", diff, got.Findings)
			}
			for key, want := range tc.wantMsg {
				found := false
				for _, f := range got.Findings {
					if f.Kind+" "+f.Subject == key {
						found = true
						if !strings.Contains(f.Message, want) {
							t.Errorf("finding %s: message %q does not contain %q", key, f.Message, want)
						}
					}
				}
				if !found {
					t.Errorf("no finding %s", key)
				}
			}
		})
	}
}

func TestBlockPlanString(t *testing.T) {
	p := graph.BlockPlan{Blocks: []graph.Block{
		{Name: "nvl1", Nodes: []string{"gpu1", "gpu2"}},
		{Name: "nvl2", Nodes: []string{"gpu3"}},
	}}
	if got, want := p.String(), "nvl1=2 nodes, nvl2=1 nodes"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
