package graph_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/test/fabricgen"
	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const ibData = "../discover/ib/testdata/"

// The trees of rail-optimised 3-tier fabrics, checked three ways: against
// a golden topology.conf (reviewed once, in the diff), against the
// grouping the fabric's shape implies (computed here from the generator's
// parameters, with no switch name in it), and against the rules every
// tree must keep (checkTree). The golden file alone would only say that
// nothing changed; the other two say it is right.

// shape is the 3-tier fabric gen3tier.py and fabricgen write: per rail,
// leaves of per hosts (node00001 on the first), pods of pod leaves, and
// the cores above all pods.
type shape struct{ nodes, per, pod int }

// wantGroups is the grouping a correct tree of the shape has, level by
// level, as host lists: level 0 the leaves, level 1 the pods, level 2 the
// whole fabric. A pod of one leaf adds no level, so neither does it here.
func (s shape) wantGroups() [][]string {
	host := func(i int) string { return fmt.Sprintf("node%05d", i) }
	var leaves, pods []string
	for first := 1; first <= s.nodes; first += s.per {
		leaves = append(leaves, fmt.Sprintf("%s..%s", host(first), host(min(first+s.per-1, s.nodes))))
	}
	for first := 1; first <= s.nodes; first += s.per * s.pod {
		pods = append(pods, fmt.Sprintf("%s..%s", host(first), host(min(first+s.per*s.pod-1, s.nodes))))
	}
	all := []string{fmt.Sprintf("%s..%s", host(1), host(s.nodes))}
	switch {
	case len(leaves) == 1:
		return [][]string{leaves}
	case len(pods) == 1:
		return [][]string{leaves, pods}
	}
	return [][]string{leaves, pods, all}
}

// gotGroups is the grouping of a built tree in the same form: for each
// level, each switch's hosts (its own or its subtree's) as first..last.
// The hosts of every group must be a contiguous run for this to be exact,
// which the shape's numbering guarantees for a correct tree; a wrong tree
// shows up as a run that does not match.
func gotGroups(t *testing.T, f *graph.Fabric) [][]string {
	t.Helper()
	byName := map[string]*graph.Switch{}
	for _, s := range f.Switches {
		byName[s.Name] = s
	}
	var hostsOf func(s *graph.Switch) []string
	hostsOf = func(s *graph.Switch) []string {
		out := append([]string(nil), s.Hosts...)
		for _, c := range s.Children {
			out = append(out, hostsOf(byName[c])...)
		}
		return out
	}
	levels := map[int][]string{}
	top := 0
	for _, s := range f.Switches {
		hs := hostsOf(s)
		sort.Strings(hs)
		run := fmt.Sprintf("%s..%s", hs[0], hs[len(hs)-1])
		var n int
		if _, err := fmt.Sscanf(hs[len(hs)-1], "node%d", &n); err == nil {
			var m int
			fmt.Sscanf(hs[0], "node%d", &m)
			if n-m+1 != len(hs) {
				run += fmt.Sprintf(" (not contiguous: %d hosts)", len(hs))
			}
		}
		levels[s.Level] = append(levels[s.Level], run)
		top = max(top, s.Level)
	}
	out := make([][]string, top+1)
	for l := range out {
		sort.Strings(levels[l])
		out[l] = levels[l]
	}
	return out
}

type tierCase struct {
	dump  func(t *testing.T) []byte
	shape shape
	tiers int    // levels the tree must have
	rail  string // the selected rail's device ("mlx5_0"); "" selects none by filter
	opt   graph.Options
}

func fixture(name string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		data, err := os.ReadFile(ibData + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
}

func generate(s fabricgen.Spec) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		var buf bytes.Buffer
		if err := fabricgen.Write(&buf, s); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
}

// eightRails is a 3-tier fabric of 256 hosts x 8 HCAs: 32 leaves of 8
// hosts per rail, 8 pods of 4 leaves, 2 spines per pod and rail, 2 core
// groups of 2 cores (every core has 8 pods x 8 rails = 64 ports).
var eightRails = fabricgen.Spec{Nodes: 256, Rails: 8, NodesPerLeaf: 8, PodLeaves: 4, SpinesPerPod: 2, CoresPerGroup: 2, Seed: 8}

func unnamed(s fabricgen.Spec) fabricgen.Spec { s.NoSwitchNames = true; return s }

var small = shape{nodes: 64, per: 8, pod: 4}

var tierCases = map[string]tierCase{
	// small-3tier-2rail.txt: `gen3tier.py small-3tier-2rail.txt 64 2 8 4 2 2`.
	"3tier-2rail-rail0":      {dump: fixture("small-3tier-2rail.txt"), shape: small, tiers: 3, rail: "mlx5_0", opt: graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`)}},
	"3tier-2rail-rail1":      {dump: fixture("small-3tier-2rail.txt"), shape: small, tiers: 3, rail: "mlx5_1", opt: graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_1$`)}},
	"3tier-2rail-all":        {dump: fixture("small-3tier-2rail.txt"), shape: small, tiers: 3, rail: "mlx5_0"},
	"3tier-2rail-guid-names": {dump: fixture("small-3tier-2rail.txt"), shape: small, tiers: 3, rail: "mlx5_0", opt: graph.Options{SwitchNames: "guid"}},
	"3tier-2rail-guid-rail1": {dump: fixture("small-3tier-2rail.txt"), shape: small, tiers: 3, rail: "mlx5_1", opt: graph.Options{SwitchNames: "guid", IncludeHCA: regexp.MustCompile(`mlx5_1$`)}},
	// Only the first pod's hosts: the cores join nothing they do not
	// already share through their pod's spines.
	"3tier-2rail-one-pod": {
		dump: fixture("small-3tier-2rail.txt"), shape: shape{nodes: 32, per: 8, pod: 4}, tiers: 2, rail: "mlx5_0",
		opt: graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`), SlurmNodes: hostRange(1, 32)},
	},
	"3tier-8rail-rail3":      {dump: generate(eightRails), shape: shape{256, 8, 4}, tiers: 3, rail: "mlx5_3", opt: graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_3$`)}},
	"3tier-8rail-all":        {dump: generate(eightRails), shape: shape{256, 8, 4}, tiers: 3, rail: "mlx5_0"},
	"3tier-8rail-guid-all":   {dump: generate(unnamed(eightRails)), shape: shape{256, 8, 4}, tiers: 3, rail: "mlx5_0"},
	"3tier-8rail-guid-rail7": {dump: generate(unnamed(eightRails)), shape: shape{256, 8, 4}, tiers: 3, rail: "mlx5_7", opt: graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_7$`)}},
}

func hostRange(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("node%05d", i))
	}
	return out
}

func TestThreeTierTrees(t *testing.T) {
	for name, tc := range tierCases {
		t.Run(name, func(t *testing.T) {
			dump := tc.dump(t)
			fab := parse(t, string(dump))
			g, err := graph.Build(fab, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Fabrics) != 1 {
				t.Fatalf("%d fabrics, want 1", len(g.Fabrics))
			}
			if diff := cmp.Diff(tc.shape.wantGroups(), gotGroups(t, g.Fabrics[0])); diff != "" {
				t.Errorf("grouping by level (-want +got):\n%s", diff)
			}
			rule := treeRule{tiers: tc.tiers, rail: tc.rail, hostRule: defaultRule, include: tc.opt.IncludeHCA}
			if tc.opt.SlurmNodes != nil {
				rule.slurm = map[string]bool{}
				for _, n := range tc.opt.SlurmNodes {
					rule.slurm[n] = true
				}
			}
			checkTree(t, fab, g, rule)
			checkInvariants(t, g)
			out := render.TreeConf(g, name)
			path := filepath.Join("testdata", "golden", name+".topology.conf")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("output differs from %s (run with -update and review the diff):\n%s", path, out)
			}
		})
	}
}

// TestRailsFoundByStructure: whatever the switches are called, every host
// of a rail-optimised fabric lands on the same rail, and each rail is
// reported with how it was decided.
func TestRailsFoundByStructure(t *testing.T) {
	for name, spec := range map[string]fabricgen.Spec{"names": eightRails, "S-GUID names": unnamed(eightRails)} {
		t.Run(name, func(t *testing.T) {
			fab := parse(t, string(generate(spec)(t)))
			g, err := graph.Build(fab, graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var rails []string
			for _, f := range g.Findings {
				switch f.Kind {
				case "rail":
					rails = append(rails, f.Subject)
					if !strings.Contains(f.Message, "32 leaves") || !strings.Contains(f.Message, "by the device index in their HCAs' descriptions (mlx5_") ||
						!strings.Contains(f.Message, "share spines with no other rail's leaves (spine groups: 8)") {
						t.Errorf("rail finding %s: %q", f.Subject, f.Message)
					}
				case "multi-leaf-host":
					t.Errorf("per-host finding on a clean rail-optimised fabric: %v", f)
				}
			}
			if want := []string{"rail0", "rail1", "rail2", "rail3", "rail4", "rail5", "rail6", "rail7"}; !cmp.Equal(want, rails) {
				t.Errorf("rails reported %v, want %v", rails, want)
			}
			checkTree(t, fab, g, treeRule{tiers: 3, rail: "mlx5_0", hostRule: defaultRule})
		})
	}
}

// TestRailsByPortGUIDOrder: HCAs named by a GUID map have no device index
// in their description; their rank by port GUID on each host decides.
func TestRailsByPortGUIDOrder(t *testing.T) {
	fab := parse(t, string(generate(unnamed(eightRails))(t)))
	names := map[string]string{}
	for _, n := range fab.Nodes {
		if n.Type == ib.CA {
			names[n.GUID] = strings.Fields(n.Desc)[0]
			n.Desc = "MT4129 ConnectX7   Mellanox Technologies"
		}
	}
	g, err := graph.Build(fab, graph.Options{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range g.Findings {
		if f.Kind == "rail" {
			found++
			if !strings.Contains(f.Message, "32 by their HCAs' port GUID order on each host") {
				t.Errorf("rail finding %s: %q", f.Subject, f.Message)
			}
		}
	}
	if found != 8 {
		t.Errorf("%d rails reported, want 8: %v", found, g.Findings)
	}
	// fabricgen gives each host's HCAs increasing GUIDs rail by rail, so
	// rank 0 is mlx5_0's rail.
	if diff := cmp.Diff(shape{256, 8, 4}.wantGroups(), gotGroups(t, g.Fabrics[0])); diff != "" {
		t.Errorf("grouping by level (-want +got):\n%s", diff)
	}
}

// TestFabricgenIsGen3tier: fabricgen's 3-tier shape is the one the shared
// gen3tier.py wrote small-3tier-2rail.txt with: the same switches, HCAs,
// descriptions and cables, port by port (only the order switches are
// listed in differs).
func TestFabricgenIsGen3tier(t *testing.T) {
	want := parse(t, string(fixture("small-3tier-2rail.txt")(t)))
	got := parse(t, string(generate(fabricgen.Spec{Nodes: 64, Rails: 2, NodesPerLeaf: 8, PodLeaves: 4, SpinesPerPod: 2, CoresPerGroup: 2})(t)))
	type node struct {
		Type  ib.NodeType
		Desc  string
		Ports int
	}
	nodes := func(f *ib.Fabric) map[string]node {
		m := map[string]node{}
		for g, n := range f.Nodes {
			m[g] = node{n.Type, n.Desc, n.Ports}
		}
		return m
	}
	if diff := cmp.Diff(nodes(want), nodes(got)); diff != "" {
		t.Errorf("nodes (-gen3tier.py +fabricgen):\n%s", diff)
	}
	links := func(f *ib.Fabric) []string {
		var out []string
		for _, l := range f.Links {
			out = append(out, fmt.Sprintf("%s[%d]-%s[%d]", l.A, l.APort, l.B, l.BPort))
		}
		return out
	}
	if diff := cmp.Diff(links(want), links(got)); diff != "" {
		t.Errorf("links (-gen3tier.py +fabricgen):\n%s", diff)
	}
}

// treeRule is what checkTree holds a tree to.
type treeRule struct {
	tiers    int    // exact number of levels; 0: at most as many as the fabric has
	rail     string // device of the selected rail ("mlx5_0"): no switch serving only other rails; "" skips
	hostRule func(n *ib.Node) string
	include  *regexp.Regexp // the HCAs that were selected, nil for all
	slurm    map[string]bool
}

// defaultRule names a host as the default host rule does for the dumps
// here: the first word of "<host> mlx5_N".
func defaultRule(n *ib.Node) string {
	if f := strings.Fields(n.Desc); len(f) == 2 && strings.HasPrefix(f[1], "mlx5_") {
		return f[0]
	}
	return ""
}

// checkTree checks a built tree against the dump it came from, by rules a
// reviewer can read without knowing how Build works:
//
//   - every host is in the tree once, under a leaf one of its HCAs is
//     cabled to;
//   - every parent -> child line is a real cable between the two (one of
//     the GUIDs merged into the parent and one merged into the child);
//   - the tree has as many levels as the fabric has tiers (or, where the
//     caller does not know them, no more levels than the fabric's longest
//     climb from a leaf to a switch);
//   - no switch in the tree serves only leaves of an unselected rail;
//   - the root joins two switches or more, unless it is the only leaf:
//     no switch sits above the one that already joins every host.
func checkTree(t *testing.T, fab *ib.Fabric, g *graph.Graph, rule treeRule) {
	t.Helper()
	cabled := map[[2]string]bool{}
	nbrs := neighbors(fab)
	for _, l := range fab.Links {
		cabled[[2]string{l.A, l.B}] = true
		cabled[[2]string{l.B, l.A}] = true
	}
	// A leaf is a switch an HCA is cabled to; its rails are the devices
	// of those HCAs.
	leafDevices := map[string]map[string]bool{}
	hostLeaves := map[string]map[string]bool{} // host -> switches its HCAs are cabled to
	for _, l := range fab.Links {
		for _, end := range [][2]string{{l.A, l.B}, {l.B, l.A}} {
			ca, sw := fab.Nodes[end[0]], fab.Nodes[end[1]]
			if ca == nil || sw == nil || ca.Type != ib.CA || sw.Type != ib.Switch || ca.Aggregation {
				continue
			}
			if leafDevices[sw.GUID] == nil {
				leafDevices[sw.GUID] = map[string]bool{}
			}
			if f := strings.Fields(ca.Desc); len(f) > 0 {
				leafDevices[sw.GUID][f[len(f)-1]] = true
			}
			h := rule.hostRule(ca)
			if h == "" || (rule.include != nil && !rule.include.MatchString(ca.Desc)) {
				continue
			}
			if hostLeaves[h] == nil {
				hostLeaves[h] = map[string]bool{}
			}
			hostLeaves[h][sw.GUID] = true
		}
	}
	seen := map[string]int{}
	for _, f := range g.Fabrics {
		byName := map[string]*graph.Switch{}
		depth := 0
		for _, s := range f.Switches {
			byName[s.Name] = s
			if len(s.GUIDs) > 0 { // a synthetic root (no GUID) is not a tier of the fabric
				depth = max(depth, s.Level+1)
			}
		}
		for _, s := range f.Switches {
			for _, h := range s.Hosts {
				seen[h]++
				ok := false
				for _, guid := range s.GUIDs {
					ok = ok || hostLeaves[h][guid]
				}
				if !ok {
					t.Errorf("%s: host %s under %s, which none of its selected HCAs is cabled to", f.Name, h, s.Name)
				}
			}
			for _, c := range s.Children {
				child := byName[c]
				if child == nil {
					continue // checkInvariants reports it
				}
				ok := false
				for _, a := range s.GUIDs {
					for _, b := range child.GUIDs {
						ok = ok || cabled[[2]string{a, b}]
					}
				}
				if !ok && !strings.HasSuffix(s.Name, "-root") {
					t.Errorf("%s: %s -> %s is no cable of the fabric", f.Name, s.Name, c)
				}
			}
			if rule.rail != "" {
				for _, guid := range s.GUIDs {
					var others []string
					mine := false
					for nb := range nbrs[guid] {
						if devs := leafDevices[nb]; devs != nil {
							if devs[rule.rail] {
								mine = true
							} else {
								others = append(others, nb)
							}
						}
					}
					if leafDevices[guid] != nil {
						mine = mine || leafDevices[guid][rule.rail]
						if !leafDevices[guid][rule.rail] {
							others = append(others, guid)
						}
					}
					if !mine && len(others) > 0 {
						t.Errorf("%s: %s (%s) serves only leaves of other rails than %s", f.Name, s.Name, guid, rule.rail)
					}
				}
			}
		}
		switch {
		case rule.tiers > 0 && depth != rule.tiers:
			t.Errorf("%s: %d levels, the fabric has %d tiers", f.Name, depth, rule.tiers)
		case rule.tiers == 0 && depth > fabricTiers(fab, nbrs, leafDevices):
			t.Errorf("%s: %d levels, more than the fabric's %d tiers", f.Name, depth, fabricTiers(fab, nbrs, leafDevices))
		}
		if root := byName[f.Root]; root != nil && root.Level > 0 && len(root.Children) < 2 {
			t.Errorf("%s: root %s joins only %v: a switch above the one that joins every host", f.Name, root.Name, root.Children)
		}
	}
	for h := range hostLeaves {
		if rule.slurm != nil && !rule.slurm[h] {
			continue
		}
		if seen[h] != 1 {
			t.Errorf("host %s is in the tree %d times, want once", h, seen[h])
		}
	}
	for h := range seen {
		if hostLeaves[h] == nil {
			t.Errorf("host %s is in the tree but has no selected HCA in the dump", h)
		}
	}
}

// neighbors maps each node to the other ends of its cables.
func neighbors(fab *ib.Fabric) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, l := range fab.Links {
		if l.A == l.B {
			continue
		}
		for _, e := range [][2]string{{l.A, l.B}, {l.B, l.A}} {
			if out[e[0]] == nil {
				out[e[0]] = map[string]bool{}
			}
			out[e[0]][e[1]] = true
		}
	}
	return out
}

// fabricTiers is the number of switch tiers of a dump: one more than the
// longest climb from the nearest leaf to any switch.
func fabricTiers(fab *ib.Fabric, nbrs map[string]map[string]bool, leaves map[string]map[string]bool) int {
	dist := map[string]int{}
	var queue []string
	for g := range leaves {
		dist[g] = 0
		queue = append(queue, g)
	}
	most := 0
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		most = max(most, dist[x])
		for y := range nbrs[x] {
			if n := fab.Nodes[y]; n == nil || n.Type != ib.Switch {
				continue
			}
			if _, ok := dist[y]; !ok {
				dist[y] = dist[x] + 1
				queue = append(queue, y)
			}
		}
	}
	return most + 1
}

// TestTreeRulesEverywhere holds the tree of every dump in testdata and of
// a spread of generated fabrics to checkTree's rules: hosts once, under a
// leaf they are cabled to; parent -> child lines that are cables; no more
// levels than the fabric has tiers (exactly as many on generated ones);
// no switch of an unselected rail; no switch above the one that joins
// every host.
func TestTreeRulesEverywhere(t *testing.T) {
	x5Names := func(t *testing.T) map[string]string {
		f, err := os.Open(ibData + "X5.map")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := ib.ParseGUIDMap(f)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	firstWord := regexp.MustCompile(`^\s*(\S+)`)
	fixtures := map[string]func(t *testing.T) graph.Options{
		"example.out": func(*testing.T) graph.Options { return graph.Options{} },
		"example.out rail HCA-1": func(*testing.T) graph.Options {
			return graph.Options{IncludeHCA: regexp.MustCompile(`(HCA-1|mlx5_0)$`)}
		},
		"X5.topofile":                   func(t *testing.T) graph.Options { return graph.Options{Names: x5Names(t)} },
		"ibtopotool-1.topo":             func(*testing.T) graph.Options { return graph.Options{HostRule: firstWord} },
		"ibtopotool-2.topo":             func(*testing.T) graph.Options { return graph.Options{HostRule: firstWord} },
		"ibtopotool-3.topo":             func(*testing.T) graph.Options { return graph.Options{HostRule: firstWord} },
		"ibtopotool-4.topo":             func(*testing.T) graph.Options { return graph.Options{HostRule: firstWord} },
		"osc-test.out":                  func(*testing.T) graph.Options { return graph.Options{HostRule: firstWord} },
		"osc-test2.out":                 func(*testing.T) graph.Options { return graph.Options{HostRule: firstWord} },
		"small-3tier-2rail.txt":         func(*testing.T) graph.Options { return graph.Options{} },
		"ibdiag-ca-label.ibnetdiscover": func(*testing.T) graph.Options { return graph.Options{} },
	}
	for name, opts := range fixtures {
		t.Run(name, func(t *testing.T) {
			file, _, _ := strings.Cut(name, " ")
			data, err := os.ReadFile(ibData + file)
			if err != nil {
				t.Fatal(err)
			}
			fab, err := ib.Parse(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			opt := opts(t)
			g, err := graph.Build(fab, opt)
			if err != nil {
				t.Fatal(err)
			}
			rule := opt.HostRule
			if rule == nil {
				rule = regexp.MustCompile(graph.DefaultHostRule)
			}
			checkTree(t, fab, g, treeRule{include: opt.IncludeHCA, hostRule: func(n *ib.Node) string {
				if h := opt.Names[n.GUID]; h != "" {
					return h
				}
				for _, pg := range n.PortGUIDs {
					if h := opt.Names[pg]; h != "" {
						return h
					}
				}
				if m := rule.FindStringSubmatch(n.Desc); m != nil {
					return m[1]
				}
				return ""
			}})
			checkInvariants(t, g)
		})
	}
	generated := map[string]fabricgen.Spec{
		"2-tier, one leaf":                 {Nodes: 5, NodesPerLeaf: 8, Spines: 2},
		"2-tier fat tree":                  {Nodes: 60, NodesPerLeaf: 16, Spines: 4},
		"2-tier, 4 rails sharing spines":   {Nodes: 64, NodesPerLeaf: 8, Rails: 4, Spines: 4},
		"2-tier, 4 rails, S-GUID names":    {Nodes: 64, NodesPerLeaf: 8, Rails: 4, Spines: 4, NoSwitchNames: true},
		"3-tier, 2 rails":                  {Nodes: 64, Rails: 2, NodesPerLeaf: 8, PodLeaves: 4, SpinesPerPod: 2, CoresPerGroup: 2},
		"3-tier, 8 rails":                  eightRails,
		"3-tier, 8 rails, S-GUID names":    unnamed(eightRails),
		"3-tier, uneven pods and leaves":   {Nodes: 100, Rails: 4, NodesPerLeaf: 7, PodLeaves: 3, SpinesPerPod: 3, CoresPerGroup: 1, Seed: 3},
		"3-tier, one pod":                  {Nodes: 24, Rails: 2, NodesPerLeaf: 8, PodLeaves: 4, SpinesPerPod: 2, CoresPerGroup: 2},
		"3-tier, 4 rails, one spine a pod": {Nodes: 96, Rails: 4, NodesPerLeaf: 4, PodLeaves: 6, SpinesPerPod: 1, CoresPerGroup: 3, NoSwitchNames: true},
	}
	for name, spec := range generated {
		pod := spec.PodLeaves
		if pod == 0 {
			pod = 1 << 20 // 2-tier: every leaf under the same spines
		}
		want := shape{nodes: spec.Nodes, per: spec.NodesPerLeaf, pod: pod}.wantGroups()
		rails := max(spec.Rails, 1)
		// No filter, then the first, a middle and the last rail.
		for _, r := range slices.Compact([]int{-1, 0, rails / 2, rails - 1}) {
			t.Run(fmt.Sprintf("%s/rail %d", name, r), func(t *testing.T) {
				fab := parse(t, string(generate(spec)(t)))
				var opt graph.Options
				rail := "mlx5_0" // with no filter, every host goes to its first rail
				if r >= 0 {
					rail = fmt.Sprintf("mlx5_%d", r)
					opt.IncludeHCA = regexp.MustCompile(rail + "$")
				}
				g, err := graph.Build(fab, opt)
				if err != nil {
					t.Fatal(err)
				}
				if len(g.Fabrics) != 1 {
					t.Fatalf("%d fabrics, want 1", len(g.Fabrics))
				}
				if diff := cmp.Diff(want, gotGroups(t, g.Fabrics[0])); diff != "" {
					t.Errorf("grouping by level (-want +got):\n%s", diff)
				}
				checkTree(t, fab, g, treeRule{tiers: len(want), rail: rail, hostRule: defaultRule, include: opt.IncludeHCA})
				checkInvariants(t, g)
				for _, f := range g.Findings {
					if f.Severity == graph.Warning && (r >= 0 || f.Kind != "rail-choice") {
						t.Errorf("warning on a valid fabric: %v", f)
					}
				}
			})
		}
	}
}

// TestFabricSplitWarning: a dump whose spines are gone (here: left out of
// the text) falls apart into one-leaf pieces, and Build says so loudly.
func TestFabricSplitWarning(t *testing.T) {
	f := newFab()
	for i := 1; i <= 5; i++ {
		leaf := fmt.Sprintf("leaf%d", i)
		f.sw(leaf).hosts(leaf, fmt.Sprintf("gpu%d", i))
	}
	g, err := graph.Build(parse(t, f.classic()), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fd := range g.Findings {
		if fd.Kind == "fabric-split" {
			got = append(got, fd.Message)
			if fd.Severity != graph.Warning {
				t.Errorf("fabric-split is %s, want a warning", fd.Severity)
			}
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "falls apart into 5 separate pieces, 5 of them a single leaf") {
		t.Errorf("fabric-split findings %q", got)
	}
}
