package render_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the renderers' output (review the diff before committing)")

// golden compares got with testdata/golden/name, or rewrites the file
// with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-golden +got); if the change is right, run go test -update and review the diff:\n%s", path, diff)
	}
}

// source is what the generated files' header names.
const source = "test fabric"

// treeGraph is the input of the tree goldens. fabric1 is a two-level
// tree whose switches are listed out of order (the renderers sort them:
// leaves first, then by level and name); fabric2 has GUID-named leaves
// (long digit runs, listed plainly rather than as bracket ranges) joined
// by a synthetic root.
func treeGraph() *graph.Graph {
	return &graph.Graph{
		Fabrics: []*graph.Fabric{
			{Name: "fabric1", Root: "spine1", Switches: []*graph.Switch{
				{Name: "spine1", Level: 1, GUIDs: []string{"5000000000000003"}, Desc: "MF0;spine1:MQM9700/U1", Children: []string{"leaf1", "leaf2"}},
				{Name: "leaf2", Level: 0, GUIDs: []string{"5000000000000002"}, Desc: "MF0;leaf2:MQM9700/U1", Hosts: []string{"gpu10", "gpu11"}},
				{Name: "leaf1", Level: 0, GUIDs: []string{"5000000000000001"}, Desc: "MF0;leaf1:MQM9700/U1", Hosts: []string{"gpu1", "gpu2", "gpu3", "gpu7"}},
			}},
			{Name: "fabric2", Root: "fabric2-root", Switches: []*graph.Switch{
				{Name: "S-0002c90200417670", Level: 0, GUIDs: []string{"0002c90200417670"}, Hosts: []string{"node-a"}},
				{Name: "S-0002c90200417680", Level: 0, GUIDs: []string{"0002c90200417680"}, Hosts: []string{"node-b"}},
				{Name: "fabric2-root", Level: 1, Children: []string{"S-0002c90200417670", "S-0002c90200417680"}},
			}},
		},
		Findings: []graph.Finding{{
			Severity: graph.Info, Kind: "synthetic-root", Subject: "fabric2-root",
			Message: "fabric2 has several top switches; a root switch that exists only in topology.conf joins them",
		}},
	}
}

// blockPlan is the input of the block goldens: two NVLink domains of 4
// and 2 nodes, so the inferred sizes are 2 (the smallest) and 4 (its
// doubling; 8 would be above the 6 nodes).
func blockPlan() *graph.BlockPlan {
	return &graph.BlockPlan{
		Blocks: []graph.Block{
			{Name: "nvl1", Domain: "aaaaaaaa-0000-0000-0000-000000000001/1", Nodes: []string{"gpu1", "gpu2", "gpu3", "gpu7"}, GPUs: 16},
			{Name: "nvl2", Domain: "bbbbbbbb-0000-0000-0000-000000000002/1", Nodes: []string{"gpu10", "gpu11"}, GPUs: 8, Partial: true},
		},
		Sizes: []int{2, 4},
		Findings: []graph.Finding{{
			Severity: graph.Warning, Kind: "degraded-domain", Subject: "gpu11",
			Message: "NVLink domain bbbbbbbb-0000-0000-0000-000000000002/1 is degraded here (3 GPUs where the domain's other nodes have 4): kept in the block as asked",
		}},
	}
}

func TestTreeConf(t *testing.T) {
	g := treeGraph()
	out := render.TreeConf(g, source)
	// tree.conf, line by line:
	//   leaf1 holds gpu1-3 and gpu7: "gpu[1-3,7]"; leaf2 gpu10-11;
	//   spine1 is above leaf1 and leaf2: "leaf[1-2]";
	//   fabric2's leaves end in 11-digit runs: listed one by one.
	golden(t, "tree.conf", out)

	// What is written reads back to the graph's placement and validates.
	tc, errs := render.ParseTopoConf(out)
	errs = append(errs, tc.Validate(g.Hosts())...)
	if len(errs) > 0 {
		t.Errorf("tree.conf does not validate: %v", errs)
	}
	if diff := cmp.Diff(graphPlacement(g), tc.Placement()); diff != "" {
		t.Errorf("placement of tree.conf (-graph +file):\n%s", diff)
	}
}

// graphPlacement is the placement the graph means: each host at its leaf,
// each switch under its parent.
func graphPlacement(g *graph.Graph) render.Placement {
	p := render.Placement{}
	for _, f := range g.Fabrics {
		for _, s := range f.Switches {
			for _, h := range s.Hosts {
				p["node "+h] = s.Name
			}
			for _, c := range s.Children {
				p["switch "+c] = s.Name
			}
		}
	}
	return p
}

func TestBlockConf(t *testing.T) {
	p := blockPlan()
	out := render.BlockConf(*p, source)
	// block.conf: nvl1 = gpu[1-3,7], nvl2 = gpu[10-11], BlockSizes=2,4.
	golden(t, "block.conf", out)

	tc, errs := render.ParseTopoConf(out)
	errs = append(errs, tc.Validate(nil)...)
	if len(errs) > 0 {
		t.Errorf("block.conf does not validate: %v", errs)
	}
	if diff := cmp.Diff(p.Sizes, tc.BlockSizes); diff != "" {
		t.Errorf("BlockSizes read back (-plan +file):\n%s", diff)
	}
	want := render.Placement{}
	for _, b := range p.Blocks {
		for _, n := range b.Nodes {
			want["node "+n] = b.Name
		}
	}
	if diff := cmp.Diff(want, tc.Placement()); diff != "" {
		t.Errorf("placement of block.conf (-plan +file):\n%s", diff)
	}
}

func TestTopologyYAML(t *testing.T) {
	tests := map[string]struct {
		g    *graph.Graph
		p    *graph.BlockPlan
		file string
	}{
		// The tree alone is "fabric", the cluster default.
		"tree only": {g: treeGraph(), file: "topology-tree.yaml"},
		// Blocks alone are "nvl", and then the cluster default.
		"blocks only": {p: blockPlan(), file: "topology-block.yaml"},
		// Both: "fabric" is the default, partitions ask for Topology=nvl.
		"tree and blocks": {g: treeGraph(), p: blockPlan(), file: "topology-both.yaml"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			golden(t, tc.file, render.TopologyYAML(tc.g, tc.p, source))
		})
	}
}

func TestGraphJSON(t *testing.T) {
	out, err := render.GraphJSON(treeGraph(), blockPlan())
	if err != nil {
		t.Fatal(err)
	}
	// The graph as given (switch order included), then the blocks, with
	// the findings of each.
	golden(t, "graph.json", out)

	out, err = render.GraphJSON(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "{}\n"; got != want {
		t.Errorf("GraphJSON(nil, nil) = %q, want %q", got, want)
	}
}

func TestHeader(t *testing.T) {
	got := render.Header("ibnetdiscover.out")
	want := "# Generated by topogen from ibnetdiscover.out. Do not edit: topogen apply replaces this file.\n"
	if got != want {
		t.Errorf("Header = %q, want %q", got, want)
	}
}

func TestList(t *testing.T) {
	tests := map[string]struct {
		names []string
		want  string
	}{
		"nothing":                        {nil, ""},
		"one name":                       {[]string{"gpu1"}, "gpu1"},
		"run compressed":                 {[]string{"gpu3", "gpu1", "gpu2"}, "gpu[1-3]"},
		"gaps":                           {[]string{"gpu1", "gpu2", "gpu3", "gpu7", "gpu9"}, "gpu[1-3,7,9]"},
		"zero padding kept":              {[]string{"n001", "n002", "n003"}, "n[001-003]"},
		"two prefixes":                   {[]string{"leaf2", "spine1", "leaf1"}, "leaf[1-2],spine1"},
		"names without a number":         {[]string{"spine", "core"}, "core,spine"},
		"duplicates once":                {[]string{"gpu1", "gpu1", "gpu2"}, "gpu[1-2]"},
		"six digits still a range":       {[]string{"n123456", "n123457"}, "n[123456-123457]"},
		"seven digits listed plainly":    {[]string{"n1234568", "n1234567"}, "n1234567,n1234568"},
		"GUID names listed plainly":      {[]string{"S-0002c90200417680", "S-0002c90200417670"}, "S-0002c90200417670,S-0002c90200417680"},
		"ranges first, then GUID names":  {[]string{"S-0002c90200417670", "leaf2", "leaf1"}, "leaf[1-2],S-0002c90200417670"},
		"GUID ending in a letter":        {[]string{"S-2c5eab0300b87b4c"}, "S-2c5eab0300b87b4c"},
		"hyphenated names with a number": {[]string{"a08-p1-dgx-04-c02", "a08-p1-dgx-04-c01"}, "a08-p1-dgx-04-c[01-02]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := render.List(tc.names); got != tc.want {
				t.Errorf("List(%q) = %q, want %q", tc.names, got, tc.want)
			}
		})
	}
}
