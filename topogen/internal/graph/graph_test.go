package graph_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// plainTree is a 2-leaf, 1-spine fabric written out by hand in
// ibnetdiscover's classic format (the shape of testdata/example.out in
// topogen/internal/discover/ib): spine1 above leaf1 (gpu1, gpu2) and leaf2
// (gpu3, gpu4), every cable listed from both ends.
const plainTree = `#
# Topology file: generated on Wed Aug  6 16:11:23 2025
#
# Initiated from node c000000000000001 port c000000000000001

vendid=0x2c9
devid=0xd2f2
sysimgguid=0x5000000000000003
switchguid=0x5000000000000003(5000000000000003)
Switch	65 "S-5000000000000003"		# "MF0;spine1:MQM9700/U1" enhanced port 0 lid 3 lmc 0
[1]	"S-5000000000000001"[3]		# "MF0;leaf1:MQM9700/U1" lid 1 4xNDR
[2]	"S-5000000000000002"[3]		# "MF0;leaf2:MQM9700/U1" lid 2 4xNDR

vendid=0x2c9
devid=0xd2f2
sysimgguid=0x5000000000000001
switchguid=0x5000000000000001(5000000000000001)
Switch	65 "S-5000000000000001"		# "MF0;leaf1:MQM9700/U1" enhanced port 0 lid 1 lmc 0
[1]	"H-c000000000000001"[1](c000000000000001) 		# "gpu1 mlx5_0" lid 101 4xNDR
[2]	"H-c000000000000002"[1](c000000000000002) 		# "gpu2 mlx5_0" lid 102 4xNDR
[3]	"S-5000000000000003"[1]		# "MF0;spine1:MQM9700/U1" lid 3 4xNDR

vendid=0x2c9
devid=0xd2f2
sysimgguid=0x5000000000000002
switchguid=0x5000000000000002(5000000000000002)
Switch	65 "S-5000000000000002"		# "MF0;leaf2:MQM9700/U1" enhanced port 0 lid 2 lmc 0
[1]	"H-c000000000000003"[1](c000000000000003) 		# "gpu3 mlx5_0" lid 103 4xNDR
[2]	"H-c000000000000004"[1](c000000000000004) 		# "gpu4 mlx5_0" lid 104 4xNDR
[3]	"S-5000000000000003"[2]		# "MF0;spine1:MQM9700/U1" lid 3 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xc000000000000001
caguid=0xc000000000000001
Ca	1 "H-c000000000000001"		# "gpu1 mlx5_0"
[1](c000000000000001) 	"S-5000000000000001"[1]		# lid 101 lmc 0 "MF0;leaf1:MQM9700/U1" lid 1 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xc000000000000002
caguid=0xc000000000000002
Ca	1 "H-c000000000000002"		# "gpu2 mlx5_0"
[1](c000000000000002) 	"S-5000000000000001"[2]		# lid 102 lmc 0 "MF0;leaf1:MQM9700/U1" lid 1 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xc000000000000003
caguid=0xc000000000000003
Ca	1 "H-c000000000000003"		# "gpu3 mlx5_0"
[1](c000000000000003) 	"S-5000000000000002"[1]		# lid 103 lmc 0 "MF0;leaf2:MQM9700/U1" lid 2 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xc000000000000004
caguid=0xc000000000000004
Ca	1 "H-c000000000000004"		# "gpu4 mlx5_0"
[1](c000000000000004) 	"S-5000000000000002"[2]		# lid 104 lmc 0 "MF0;leaf2:MQM9700/U1" lid 2 4xNDR
`

// plainFab is plainTree built with fab: the same switches, HCAs and GUIDs.
func plainFab() *fab {
	return newFab().
		sw("leaf1", "leaf2", "spine1").
		hosts("leaf1", "gpu1", "gpu2").
		hosts("leaf2", "gpu3", "gpu4").
		cable("spine1", "leaf1", "leaf2")
}

// Short constructors keep the expected trees readable.
func leaf(name string, hosts ...string) *graph.Switch {
	return &graph.Switch{Name: name, Level: 0, Hosts: hosts}
}

func upper(name string, level int, children ...string) *graph.Switch {
	return &graph.Switch{Name: name, Level: level, Children: children}
}

func fabric(name, root string, sw ...*graph.Switch) *graph.Fabric {
	return &graph.Fabric{Name: name, Root: root, Switches: sw}
}

// plainWant is the tree of plainTree.
var plainWant = []*graph.Fabric{fabric("fabric1", "spine1",
	leaf("leaf1", "gpu1", "gpu2"),
	leaf("leaf2", "gpu3", "gpu4"),
	upper("spine1", 1, "leaf1", "leaf2"),
)}

// railFab is a rail-optimised fabric: every host has mlx5_0 on a rail-0
// leaf and mlx5_1 on a rail-1 leaf, and both spines reach all four
// leaves. Seen from rail 0, the rail-1 leaves are two hops up, above the
// spines.
func railFab() *fab {
	return newFab().
		sw("r0-leaf1", "r0-leaf2", "r1-leaf1", "r1-leaf2", "spine1", "spine2").
		hca("gpu1 mlx5_0", "r0-leaf1").hca("gpu2 mlx5_0", "r0-leaf1").
		hca("gpu3 mlx5_0", "r0-leaf2").hca("gpu4 mlx5_0", "r0-leaf2").
		hca("gpu1 mlx5_1", "r1-leaf1").hca("gpu2 mlx5_1", "r1-leaf1").
		hca("gpu3 mlx5_1", "r1-leaf2").hca("gpu4 mlx5_1", "r1-leaf2").
		cable("spine1", "r0-leaf1", "r0-leaf2", "r1-leaf1", "r1-leaf2").
		cable("spine2", "r0-leaf1", "r0-leaf2", "r1-leaf1", "r1-leaf2")
}

// railWant is the rail-0 tree of railFab: the two spines reach the same
// leaves and are one switch for Slurm.
var railWant = []*graph.Fabric{fabric("fabric1", "spine1",
	leaf("r0-leaf1", "gpu1", "gpu2"),
	leaf("r0-leaf2", "gpu3", "gpu4"),
	upper("spine1", 1, "r0-leaf1", "r0-leaf2"),
)}

// namesFab has one switch named in each way a description can name it.
func namesFab() *fab {
	return newFab().
		sw("leaf1").                                       // S-5000000000000001, "MF0;leaf1:MQM9700/U1"
		swDesc("leaf2", "Voltaire 4036 # hoibp0013").      // S-5000000000000002
		swDesc("spine1", "Quantum Mellanox Technologies"). // S-5000000000000003, no name in it
		hosts("leaf1", "gpu1").
		hosts("leaf2", "gpu2").
		cable("spine1", "leaf1", "leaf2")
}

type buildCase struct {
	in  string // classic ibnetdiscover text
	opt graph.Options
	// want is the exact tree; GUIDs and descriptions are compared only
	// where wantGUIDs names a switch.
	want      []*graph.Fabric
	wantGUIDs map[string][]string // switch name -> its GUIDs
	// wantFindings are "kind subject", in the order Build decides them.
	wantFindings []string
	wantMsg      map[string]string // "kind subject" -> substring of its message
	wantErr      string            // substring of the error; "" for success
}

var buildTests = map[string]buildCase{
	"plain two leaves under one spine": {
		in:   plainTree,
		want: plainWant,
	},
	"fab writes what plainTree spells out": {
		in:   plainFab().classic(),
		want: plainWant,
	},
	"parallel spines merged": {
		in: newFab().
			sw("leaf1", "leaf2", "spine1", "spine2").
			hosts("leaf1", "gpu1", "gpu2").
			hosts("leaf2", "gpu3", "gpu4").
			cable("spine1", "leaf1", "leaf2").
			cable("spine2", "leaf1", "leaf2").
			classic(),
		want:         plainWant,
		wantGUIDs:    map[string][]string{"spine1": {"5000000000000003", "5000000000000004"}},
		wantFindings: []string{"merged-switches spine1"},
		wantMsg:      map[string]string{"merged-switches spine1": "2 parallel switches reach the same switches below and are one switch for Slurm: spine1,spine2"},
	},
	"spine reaching a subset of a wider spine's leaves is folded into it": {
		in: newFab().
			sw("leaf1", "leaf2", "spine1", "spine2").
			hosts("leaf1", "gpu1", "gpu2").
			hosts("leaf2", "gpu3", "gpu4").
			cable("spine1", "leaf1", "leaf2").
			cable("spine2", "leaf1").
			classic(),
		want:         plainWant,
		wantGUIDs:    map[string][]string{"spine1": {"5000000000000003", "5000000000000004"}},
		wantFindings: []string{"redundant-switch spine2"},
		wantMsg:      map[string]string{"redundant-switch spine2": "wider parent (spine1)"},
	},
	"three levels": {
		in: newFab().
			sw("leaf1", "leaf2", "leaf3", "leaf4", "spine1", "spine2", "core1").
			hosts("leaf1", "gpu1").hosts("leaf2", "gpu2").hosts("leaf3", "gpu3").hosts("leaf4", "gpu4").
			cable("spine1", "leaf1", "leaf2").
			cable("spine2", "leaf3", "leaf4").
			cable("core1", "spine1", "spine2").
			classic(),
		want: []*graph.Fabric{fabric("fabric1", "core1",
			leaf("leaf1", "gpu1"), leaf("leaf2", "gpu2"), leaf("leaf3", "gpu3"), leaf("leaf4", "gpu4"),
			upper("spine1", 1, "leaf1", "leaf2"),
			upper("spine2", 1, "leaf3", "leaf4"),
			upper("core1", 2, "spine1", "spine2"),
		)},
	},
	"host with HCAs on two leaves goes under the one with more": {
		in: newFab().
			sw("ib-leaf-b", "ib-leaf-a", "spine1").
			hca("gpu1 mlx5_0", "ib-leaf-b").hca("gpu1 mlx5_1", "ib-leaf-a").hca("gpu1 mlx5_2", "ib-leaf-a").
			hca("gpu2 mlx5_0", "ib-leaf-b").hca("gpu2 mlx5_1", "ib-leaf-a").
			hca("gpu3 mlx5_0", "ib-leaf-b").
			cable("spine1", "ib-leaf-b", "ib-leaf-a").
			classic(),
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("ib-leaf-a", "gpu1"),
			leaf("ib-leaf-b", "gpu2", "gpu3"),
			upper("spine1", 1, "ib-leaf-a", "ib-leaf-b"),
		)},
		// ib-leaf-b's HCAs are all mlx5_0 (rail 0); ib-leaf-a's mix mlx5_1
		// and mlx5_2, so it has no rail. gpu1 has more HCAs on ib-leaf-a;
		// gpu2's tie goes to the leaf with a rail, the one every host has.
		wantFindings: []string{"rail rail0", "multi-leaf-host gpu1", "multi-leaf-host gpu2"},
		wantMsg: map[string]string{
			"rail rail0":           "1 leaves (ib-leaf-b), 3 HCAs; leaves decided 1 by the device index in their HCAs' descriptions (mlx5_0)",
			"multi-leaf-host gpu1": "placed under ib-leaf-a (2 HCA), also on ib-leaf-b (1 HCA)",
			"multi-leaf-host gpu2": "placed under ib-leaf-b (1 HCA), also on ib-leaf-a (1 HCA)",
		},
	},
	"rails without a filter: every host on two leaves, the other rail's leaves left out": {
		in:   railFab().classic(),
		want: railWant,
		// One finding for the rail choice, not one per host.
		wantFindings: []string{
			"rail rail0", "rail rail1",
			"rail-choice rail0",
			"foreign-leaf r1-leaf1,r1-leaf2",
			"merged-switches spine1",
		},
		wantMsg: map[string]string{
			"rail rail0":        "2 leaves (r0-leaf1,r0-leaf2), 4 HCAs; leaves decided 2 by the device index in their HCAs' descriptions (mlx5_0); its leaves share spines with rails 1",
			"rail-choice rail0": "4 hosts have one HCA on each of 2 rails: each is placed under its rail-0 leaf, the first rail nearly every host has; choose the rail with include_hca (--include-hca 'mlx5_0$')",
		},
	},
	"include_hca selects rail 0: rail-1 leaves do not sit above the spines": {
		in:   railFab().classic(),
		opt:  graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`)},
		want: railWant,
		wantFindings: []string{
			"rail rail0", "rail rail1",
			"hca-filter fabric",
			"foreign-leaf r1-leaf1,r1-leaf2",
			"merged-switches spine1",
		},
		wantMsg: map[string]string{
			"hca-filter fabric":              "4 HCAs left out",
			"foreign-leaf r1-leaf1,r1-leaf2": "2 switches link to HCAs but hold none of the placed hosts",
		},
	},
	"a rail filter names the hosts that lack the rail's HCA": {
		// gpu5's mlx5_0 is missing from the dump (a dead card): the rail-0
		// filter leaves it with no HCA, and a warning names it.
		in:   railFab().sw("r1-leaf3").hca("gpu5 mlx5_1", "r1-leaf3").cable("spine1", "r1-leaf3").classic(),
		opt:  graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_0$`)},
		want: railWant,
		wantFindings: []string{
			"rail rail0", "rail rail1",
			"hca-filter fabric",
			"filtered-host gpu5",
			"foreign-leaf r1-leaf1,r1-leaf2,r1-leaf3",
			"merged-switches spine1",
		},
		wantMsg: map[string]string{"filtered-host gpu5": "1 hosts have HCAs but none that the HCA filters select"},
	},
	"exclude_hca drops rail 1 alike": {
		in:           railFab().classic(),
		opt:          graph.Options{ExcludeHCA: regexp.MustCompile(`mlx5_1$`)},
		want:         railWant,
		wantFindings: []string{"rail rail0", "rail rail1", "hca-filter fabric", "foreign-leaf r1-leaf1,r1-leaf2", "merged-switches spine1"},
	},
	"exclude_guids by node GUID and by port GUID": {
		// HCAs are numbered in declaration order: gpu4 is the 4th
		// (node GUID c000000000000004), gpu5 the 5th (port GUID
		// d000000000000005).
		in: newFab().
			sw("leaf1", "leaf2", "spine1").
			hosts("leaf1", "gpu1", "gpu2").
			hosts("leaf2", "gpu3", "gpu4", "gpu5").
			cable("spine1", "leaf1", "leaf2").
			classic(),
		opt: graph.Options{ExcludeGUIDs: map[string]bool{"c000000000000004": true, "d000000000000005": true}},
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("leaf1", "gpu1", "gpu2"),
			leaf("leaf2", "gpu3"),
			upper("spine1", 1, "leaf1", "leaf2"),
		)},
		wantFindings: []string{"hca-filter fabric", "filtered-host gpu4,gpu5"},
		wantMsg: map[string]string{
			"hca-filter fabric":       "2 HCAs left out",
			"filtered-host gpu4,gpu5": "2 hosts have HCAs but none that the HCA filters select, so they are in no switch: gpu4,gpu5",
		},
	},
	"firmware default description names no host; aggregation node ignored": {
		// The unnamed HCA is the 2nd declared: c000000000000002. The
		// SHARP aggregation node on spine1 neither becomes a host nor
		// makes spine1 look like a leaf.
		in: newFab().
			sw("leaf1", "leaf2", "spine1").
			hosts("leaf1", "gpu1").
			hca("MT4129 ConnectX7   Mellanox Technologies", "leaf1").
			hosts("leaf2", "gpu2").
			hca("Mellanox Technologies Aggregation Node", "spine1").
			cable("spine1", "leaf1", "leaf2").
			classic(),
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("leaf1", "gpu1"),
			leaf("leaf2", "gpu2"),
			upper("spine1", 1, "leaf1", "leaf2"),
		)},
		wantFindings: []string{"unnamed-hca H-c000000000000002"},
		wantMsg:      map[string]string{"unnamed-hca H-c000000000000002": `HCA "MT4129 ConnectX7   Mellanox Technologies" (line `},
	},
	"GUID map wins over the host rule": {
		// c..01 is gpu1's HCA (node GUID), d..02 gpu2's port GUID, c..03
		// the unnamed HCA.
		in: newFab().
			sw("leaf1", "leaf2", "spine1").
			hosts("leaf1", "gpu1", "gpu2").
			hca("MT4129 ConnectX7   Mellanox Technologies", "leaf2").
			hosts("leaf2", "gpu4").
			cable("spine1", "leaf1", "leaf2").
			classic(),
		opt: graph.Options{Names: map[string]string{
			"c000000000000001": "node-a",
			"d000000000000002": "node-b",
			"c000000000000003": "node-c",
		}},
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("leaf1", "node-a", "node-b"),
			leaf("leaf2", "gpu4", "node-c"),
			upper("spine1", 1, "leaf1", "leaf2"),
		)},
	},
	"GUID map names in node-name-map style go through the host rule": {
		// ibnetdiscover --node-name-map files name HCAs like node
		// descriptions; "node-a HCA-1" is host node-a, as the description
		// "node-a HCA-1" would be.
		in:  plainFab().classic(),
		opt: graph.Options{Names: map[string]string{"c000000000000001": "node-a HCA-1", "c000000000000002": "node-b mlx5_0"}},
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("leaf1", "node-a", "node-b"),
			leaf("leaf2", "gpu3", "gpu4"),
			upper("spine1", 1, "leaf1", "leaf2"),
		)},
	},
	"a name that is no Slurm node name is left out, never rendered": {
		// c..01 is mapped to a name with a space the host rule cannot read;
		// gpu3's description gives "gpu,3", which a Nodes= list would read
		// as two nodes.
		in: newFab().
			sw("leaf1", "leaf2", "spine1").
			hosts("leaf1", "gpu1", "gpu2").
			hca("gpu,3 mlx5_0", "leaf2").hca("gpu4 mlx5_0", "leaf2").
			cable("spine1", "leaf1", "leaf2").
			classic(),
		opt: graph.Options{Names: map[string]string{"c000000000000001": "my node"}},
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("leaf1", "gpu2"),
			leaf("leaf2", "gpu4"),
			upper("spine1", 1, "leaf1", "leaf2"),
		)},
		wantFindings: []string{"bad-node-name H-c000000000000001", "bad-node-name H-c000000000000003"},
		wantMsg: map[string]string{
			"bad-node-name H-c000000000000001": `the GUID map name "my node" (line `,
			"bad-node-name H-c000000000000003": `the description "gpu,3 mlx5_0" (line `,
		},
	},
	"custom host rule": {
		in: newFab().
			sw("leaf1").
			hca("gpu1.cluster HCA-1", "leaf1").
			hca("gpu2.cluster HCA-1", "leaf1").
			classic(),
		opt:  graph.Options{HostRule: regexp.MustCompile(`^([^.]+)\.cluster `)},
		want: []*graph.Fabric{fabric("fabric1", "leaf1", leaf("leaf1", "gpu1", "gpu2"))},
	},
	"Slurm node list: hosts Slurm lacks left out, nodes the fabric lacks reported": {
		in: newFab().
			sw("leaf1", "leaf2", "spine1").
			hosts("leaf1", "gpu1", "gpu2").
			hosts("leaf2", "gpu5", "gpu4", "gpu3").
			cable("spine1", "leaf1", "leaf2").
			classic(),
		opt: graph.Options{SlurmNodes: []string{"gpu1", "gpu2", "gpu3", "gpu9", "gpu8"}},
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("leaf1", "gpu1", "gpu2"),
			leaf("leaf2", "gpu3"),
			upper("spine1", 1, "leaf1", "leaf2"),
		)},
		// Hosts left out in name order, missing nodes in Slurm's order.
		wantFindings: []string{"not-in-slurm gpu4", "not-in-slurm gpu5", "not-in-fabric gpu9", "not-in-fabric gpu8"},
	},
	"HCA without a cable": {
		in: newFab().
			sw("leaf1", "spine1").
			hosts("leaf1", "gpu1").
			hca("gpu2 mlx5_0", "").
			cable("spine1", "leaf1").
			classic(),
		// One leaf holds every placed host: nothing above it is needed.
		want:         []*graph.Fabric{fabric("fabric1", "leaf1", leaf("leaf1", "gpu1"))},
		wantFindings: []string{"unlinked-hca gpu2"},
	},
	"two disconnected fabrics, named by their first host": {
		// The x fabric is declared first; the y fabric has gpu1. Each
		// fabric's hosts share one leaf, so the leaf is its root: the
		// spine above it adds no grouping.
		in: newFab().
			sw("leaf-x", "spine-x", "leaf-y", "spine-y").
			hosts("leaf-x", "gpu5", "gpu6").
			hosts("leaf-y", "gpu2", "gpu1").
			cable("spine-x", "leaf-x").
			cable("spine-y", "leaf-y").
			classic(),
		want: []*graph.Fabric{
			fabric("fabric1", "leaf-y", leaf("leaf-y", "gpu1", "gpu2")),
			fabric("fabric2", "leaf-x", leaf("leaf-x", "gpu5", "gpu6")),
		},
	},
	"two top switches joined by a synthetic root": {
		// spine1 and spine2 are cabled to each other, so this is one
		// fabric; neither is above the other.
		in: newFab().
			sw("leaf1", "leaf2", "leaf3", "leaf4", "spine1", "spine2").
			hosts("leaf1", "gpu1").hosts("leaf2", "gpu2").hosts("leaf3", "gpu3").hosts("leaf4", "gpu4").
			cable("spine1", "leaf1", "leaf2", "spine2").
			cable("spine2", "leaf3", "leaf4").
			classic(),
		want: []*graph.Fabric{fabric("fabric1", "fabric1-root",
			leaf("leaf1", "gpu1"), leaf("leaf2", "gpu2"), leaf("leaf3", "gpu3"), leaf("leaf4", "gpu4"),
			upper("spine1", 1, "leaf1", "leaf2"),
			upper("spine2", 1, "leaf3", "leaf4"),
			upper("fabric1-root", 2, "spine1", "spine2"),
		)},
		wantFindings: []string{"synthetic-root fabric1-root"},
	},
	"leaves cabled only to each other": {
		in: newFab().
			sw("leaf1", "leaf2").
			hosts("leaf1", "gpu1", "gpu2").
			hosts("leaf2", "gpu3").
			cable("leaf1", "leaf2").
			classic(),
		want: []*graph.Fabric{fabric("fabric1", "fabric1-root",
			leaf("leaf1", "gpu1", "gpu2"),
			leaf("leaf2", "gpu3"),
			upper("fabric1-root", 1, "leaf1", "leaf2"),
		)},
		wantFindings: []string{"leaf-link leaf1", "hosts-on-spine leaf1", "hosts-on-spine leaf2", "synthetic-root fabric1-root"},
	},
	"switch names auto: from MF0 and '#' descriptions, else the GUID": {
		in: namesFab().classic(),
		want: []*graph.Fabric{fabric("fabric1", "S-5000000000000003",
			leaf("hoibp0013", "gpu2"),
			leaf("leaf1", "gpu1"),
			upper("S-5000000000000003", 1, "hoibp0013", "leaf1"),
		)},
	},
	"switch names guid": {
		in:  namesFab().classic(),
		opt: graph.Options{SwitchNames: "guid"},
		want: []*graph.Fabric{fabric("fabric1", "S-5000000000000003",
			leaf("S-5000000000000001", "gpu1"),
			leaf("S-5000000000000002", "gpu2"),
			upper("S-5000000000000003", 1, "S-5000000000000001", "S-5000000000000002"),
		)},
	},
	"switch names description: the whole description, made Slurm-safe": {
		in:  namesFab().classic(),
		opt: graph.Options{SwitchNames: "description"},
		want: []*graph.Fabric{fabric("fabric1", "Quantum-Mellanox-Technologies",
			leaf("hoibp0013", "gpu2"),
			leaf("leaf1", "gpu1"),
			upper("Quantum-Mellanox-Technologies", 1, "hoibp0013", "leaf1"),
		)},
	},
	"duplicate description names fall back to the GUID": {
		in: newFab().
			swDesc("leafA", "MF0;rack1-leaf:MQM9700/U1").
			swDesc("leafB", "MF0;rack1-leaf:MQM9700/U1").
			sw("spine1").
			hosts("leafA", "gpu1").
			hosts("leafB", "gpu2").
			cable("spine1", "leafA", "leafB").
			classic(),
		want: []*graph.Fabric{fabric("fabric1", "spine1",
			leaf("S-5000000000000001", "gpu1"),
			leaf("S-5000000000000002", "gpu2"),
			upper("spine1", 1, "S-5000000000000001", "S-5000000000000002"),
		)},
		wantFindings: []string{"switch-name S-5000000000000001", "switch-name S-5000000000000002"},
		wantMsg:      map[string]string{"switch-name S-5000000000000001": `description name "rack1-leaf" is shared by 2 switches`},
	},
	"switch self-link ignored": {
		in:           plainFab().cable("spine1", "spine1").classic(),
		want:         plainWant,
		wantFindings: []string{"self-link spine1"},
		wantMsg:      map[string]string{"self-link spine1": "1 links from the switch to itself ignored"},
	},
	"unknown switch naming": {
		in:      plainTree,
		opt:     graph.Options{SwitchNames: "names"},
		wantErr: `switch names "names": want auto, guid or description`,
	},
	"host rule without a capture group": {
		in:      plainTree,
		opt:     graph.Options{HostRule: regexp.MustCompile(`^\S+ mlx5_\d+$`)},
		wantErr: "has no capture group",
	},
	"no placeable host": {
		in: newFab().
			sw("leaf1").
			hca("MT4129 ConnectX7   Mellanox Technologies", "leaf1").
			classic(),
		wantErr: "no HCA of the fabric could be placed under a switch",
	},
	"every host filtered out": {
		in:      plainTree,
		opt:     graph.Options{IncludeHCA: regexp.MustCompile(`mlx5_7$`)},
		wantErr: "no HCA of the fabric could be placed under a switch: check the host rule, the GUID map and the HCA filters (2 findings)",
		// The error carries its findings, so the command can show them.
		wantFindings: []string{"hca-filter fabric", "filtered-host gpu1,gpu2,gpu3,gpu4"},
	},
}

func findingKeys(fs []graph.Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Kind+" "+f.Subject)
	}
	return out
}

func TestBuild(t *testing.T) {
	for name, tc := range buildTests {
		t.Run(name, func(t *testing.T) {
			g, err := graph.Build(parse(t, tc.in), tc.opt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Build error = %v, want it to contain %q", err, tc.wantErr)
				}
				var pe *graph.PlacementError
				if tc.wantFindings != nil && !errors.As(err, &pe) {
					t.Fatalf("Build error %T, want a *graph.PlacementError with findings", err)
				}
				if pe != nil {
					if diff := cmp.Diff(tc.wantFindings, findingKeys(pe.Findings), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("findings of the error (-want +got):\n%s", diff)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			ignore := cmpopts.IgnoreFields(graph.Switch{}, "GUIDs", "Desc")
			if diff := cmp.Diff(tc.want, g.Fabrics, ignore, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
			for name, want := range tc.wantGUIDs {
				if diff := cmp.Diff(want, guidsOf(g, name)); diff != "" {
					t.Errorf("GUIDs of %s (-want +got):\n%s", name, diff)
				}
			}
			if diff := cmp.Diff(tc.wantFindings, findingKeys(g.Findings), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("findings (-want +got):\n%s\nall: %v", diff, g.Findings)
			}
			for key, want := range tc.wantMsg {
				found := false
				for _, f := range g.Findings {
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
			checkInvariants(t, g)
		})
	}
}

func guidsOf(g *graph.Graph, name string) []string {
	for _, f := range g.Fabrics {
		for _, s := range f.Switches {
			if s.Name == name {
				return s.GUIDs
			}
		}
	}
	return nil
}

// checkInvariants holds for every graph: one root per fabric that is no
// switch's child, every child defined one level down, each switch with
// one parent, each host under one leaf, switches ordered leaves first
// then by level and name, names Slurm can read.
func checkInvariants(t *testing.T, g *graph.Graph) {
	t.Helper()
	hostSeen := map[string]string{}
	for _, f := range g.Fabrics {
		byName := map[string]*graph.Switch{}
		for _, s := range f.Switches {
			if byName[s.Name] != nil {
				t.Errorf("%s: switch %s twice", f.Name, s.Name)
			}
			byName[s.Name] = s
			if s.Name != graph.SanitizeName(s.Name) || s.Name == "" {
				t.Errorf("%s: switch name %q is not Slurm-safe", f.Name, s.Name)
			}
		}
		parents := map[string]int{}
		for i, s := range f.Switches {
			if i > 0 {
				p := f.Switches[i-1]
				if p.Level > s.Level || (p.Level == s.Level && p.Name >= s.Name) {
					t.Errorf("%s: switch %s (level %d) listed after %s (level %d)", f.Name, s.Name, s.Level, p.Name, p.Level)
				}
			}
			if s.Level == 0 && len(s.Children) > 0 || s.Level > 0 && len(s.Hosts) > 0 {
				t.Errorf("%s: switch %s at level %d has children %v and hosts %v", f.Name, s.Name, s.Level, s.Children, s.Hosts)
			}
			for _, c := range s.Children {
				parents[c]++
				if k := byName[c]; k == nil || k.Level >= s.Level {
					t.Errorf("%s: switch %s has child %s, which is not a switch below it", f.Name, s.Name, c)
				}
			}
			for _, h := range s.Hosts {
				if !graph.ValidNodeName(h) {
					t.Errorf("%s: host name %q is no Slurm node name", f.Name, h)
				}
				if prev, ok := hostSeen[h]; ok {
					t.Errorf("host %s under %s and %s", h, prev, s.Name)
				}
				hostSeen[h] = s.Name
			}
		}
		for _, s := range f.Switches {
			switch {
			case s.Name == f.Root && parents[s.Name] != 0:
				t.Errorf("%s: root %s has a parent", f.Name, s.Name)
			case s.Name != f.Root && parents[s.Name] != 1:
				t.Errorf("%s: switch %s has %d parents, want 1", f.Name, s.Name, parents[s.Name])
			}
		}
		if byName[f.Root] == nil {
			t.Errorf("%s: root %q is not one of its switches", f.Name, f.Root)
		}
	}
}

func TestHostsAndLeafOf(t *testing.T) {
	g, err := graph.Build(parse(t, plainTree), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu1", "gpu2", "gpu3", "gpu4"}, g.Hosts()); diff != "" {
		t.Errorf("Hosts (-want +got):\n%s", diff)
	}
	want := map[string]string{"gpu1": "leaf1", "gpu2": "leaf1", "gpu3": "leaf2", "gpu4": "leaf2"}
	if diff := cmp.Diff(want, g.LeafOf()); diff != "" {
		t.Errorf("LeafOf (-want +got):\n%s", diff)
	}
}

// TestBuildDeterministic builds a fabric with several findings of each
// kind that come out of maps (hosts Slurm lacks, self-links, leaf-to-leaf
// links) many times: the same input must give the same graph, findings in
// the same order, since they are printed and written to graph.json.
func TestBuildDeterministic(t *testing.T) {
	f := newFab().sw("leaf1", "leaf2", "leaf3", "leaf4", "spine1", "spine2")
	for i := 1; i <= 12; i++ {
		f.hosts(fmt.Sprintf("leaf%d", (i-1)%4+1), fmt.Sprintf("gpu%d", i))
	}
	f.cable("spine1", "leaf1", "leaf2", "spine1", "spine1").
		cable("spine2", "leaf3", "leaf4", "spine2").
		cable("leaf1", "leaf2", "leaf3", "leaf4")
	fabric := parse(t, f.classic())
	opt := graph.Options{SlurmNodes: []string{"gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu13"}}
	first, err := graph.Build(fabric, opt)
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		g, err := graph.Build(fabric, opt)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, g); diff != "" {
			t.Fatalf("a second Build of the same input differs (-first +again):\n%s", diff)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"already safe":            {"A09-P1-IBLEAF-04-04", "A09-P1-IBLEAF-04-04"},
		"spaces":                  {"Quantum Mellanox Technologies", "Quantum-Mellanox-Technologies"},
		"host list characters":    {"leaf[1-2],x", "leaf-1-2-x"},
		"runs collapse, ends cut": {"  /leaf:: 1/ ", "leaf-1"},
		"dots and underscores":    {"ib_leaf.1", "ib_leaf.1"},
		"nothing safe":            {"[]", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := graph.SanitizeName(tc.in); got != tc.want {
				t.Errorf("SanitizeName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestValidNodeName: ValidNodeName is SanitizeName(s) == s, without the
// allocation.
func TestValidNodeName(t *testing.T) {
	for _, s := range []string{"", "gpu1", "a08-p1-dgx-04-c01", "node1 HCA-1", "gpu,3", "-x", "x-", "a.b_c", "é", "[1]", "x y", "-"} {
		if got, want := graph.ValidNodeName(s), s != "" && graph.SanitizeName(s) == s; got != want {
			t.Errorf("ValidNodeName(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestFindingString(t *testing.T) {
	f := graph.Finding{Severity: graph.Warning, Kind: "multi-leaf-host", Subject: "gpu1", Message: "placed under leaf1"}
	if got, want := f.String(), "warning: multi-leaf-host gpu1: placed under leaf1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// FuzzBuild: no dump makes Build panic, and every graph it returns keeps
// the invariants (one root per fabric, one parent per switch, one leaf per
// host, names Slurm can read).
func FuzzBuild(f *testing.F) {
	for _, tc := range buildTests {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fabric, err := ib.Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, names := range []string{"auto", "description"} {
			g, err := graph.Build(fabric, graph.Options{SwitchNames: names})
			if err != nil {
				continue
			}
			checkInvariants(t, g)
		}
	})
}
