package render_test

import (
	"strings"
	"testing"

	"github.com/strata-hpc/strata/topogen/internal/render"
)

// TestReach: nodes under no switch are an error, leaves with no common
// ancestor a warning; a cycle, a duplicate switch or a block file adds
// neither (Validate reports what is wrong there).
func TestReach(t *testing.T) {
	for name, tc := range map[string]struct {
		conf              string
		nodes             []string
		wantErr, wantWarn string // "" : none
	}{
		"one tree, every node": {conf: "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\nSwitchName=s Switches=l[1-2]\n",
			nodes: []string{"n1", "n2", "n3", "n4"}},
		"no node list": {conf: "SwitchName=l1 Nodes=n[1-2]\n"},
		"nodes under no switch": {conf: "SwitchName=l1 Nodes=n[1-2]\n", nodes: []string{"n1", "n2", "n3", "n5"},
			wantErr: "2 of the cluster's 4 nodes are under no switch: n[3,5]; topology/tree never gives them to a job " +
				"(slurmctld logs \"switches lack access to 2 nodes\"): put each under its leaf switch"},
		"two leaves, no switch above": {conf: "SwitchName=l1 Nodes=n1\nSwitchName=l2 Nodes=n2\n",
			wantWarn: "no switch is above every leaf: the switches form 2 trees with no common ancestor, l1 (1 leaf, 1 node), l2 (1 leaf, 1 node)"},
		"two roots, one above all": {conf: "SwitchName=l1 Nodes=n1\nSwitchName=l2 Nodes=n2\nSwitchName=a Switches=l1\nSwitchName=b Switches=l[1-2]\n"},
		"a cycle":                  {conf: "SwitchName=a Switches=b Nodes=n1\nSwitchName=b Switches=a Nodes=n2\n"},
		"a cycle below a root":     {conf: "SwitchName=r Switches=a\nSwitchName=a Switches=b Nodes=n1\nSwitchName=b Switches=a Nodes=n2\n"},
		"a switch twice":           {conf: "SwitchName=l1 Nodes=n1\nSwitchName=l1 Nodes=n2\n"},
		"blocks":                   {conf: "BlockName=b1 Nodes=n[1-2]\nBlockSizes=2\n", nodes: []string{"n9"}},
		"more than five trees": {conf: "SwitchName=l1 Nodes=n1\nSwitchName=l2 Nodes=n2\nSwitchName=l3 Nodes=n3\n" +
			"SwitchName=l4 Nodes=n4\nSwitchName=l5 Nodes=n5\nSwitchName=l6 Nodes=n6\nSwitchName=l7 Nodes=n7\n",
			wantWarn: "the switches form 7 trees with no common ancestor, l1 (1 leaf, 1 node), l2 (1 leaf, 1 node), l3 (1 leaf, 1 node), " +
				"l4 (1 leaf, 1 node), l5 (1 leaf, 1 node), and 2 more; no job spans two of them"},
	} {
		t.Run(name, func(t *testing.T) {
			tc2, _ := render.ParseTopoConf([]byte(tc.conf))
			errs, warns := tc2.Reach(tc.nodes)
			check := func(what string, got []render.ConfError, want string) {
				t.Helper()
				if want == "" {
					if len(got) > 0 {
						t.Errorf("%s %v, want none", what, got)
					}
					return
				}
				if len(got) != 1 || !strings.Contains(got[0].Error(), want) {
					t.Errorf("%s %v, want one with %q", what, got, want)
				}
			}
			check("errors", errs, tc.wantErr)
			check("warnings", warns, tc.wantWarn)
		})
	}
}

// FuzzParseTopologyYAML: no input makes the topology.yaml reader panic,
// and what it reads measures (nodes, switches) without error.
func FuzzParseTopologyYAML(f *testing.F) {
	f.Add([]byte("- topology: fabric\n  cluster_default: true\n  tree:\n    switches:\n      - switch: s1\n        children: l[1-2]\n" +
		"      - switch: l1\n        nodes: n[1-2]\n      - switch: l2\n        nodes: n[3-4]\n"))
	f.Add([]byte("- topology: nvl\n  block:\n    block_sizes:\n      - 2\n      - 4\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n"))
	f.Add([]byte("- topology: flat\n  flat: true\n"))
	f.Add([]byte("# only a comment\n"))
	f.Add([]byte("- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: n[1-\n"))
	f.Add([]byte("- topology: t\n  unknown: 1\n---\n- topology: u\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tc, err := render.ParseTopologyYAML(data)
		if err != nil {
			return
		}
		_ = tc.Validate(nil)
		_, _ = tc.Reach(nil)
		_ = tc.Placement()
	})
}
