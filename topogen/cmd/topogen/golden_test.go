package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/test/fabricgen"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const ibData = "../../internal/discover/ib/testdata/"

// goldenCases runs the real CLI (render) on every real fabric and on two
// generated ones. Each golden file is reviewed; the facts asserted below it
// can be checked against the inputs by hand.
var goldenCases = map[string]struct {
	args  []string
	check func(t *testing.T, tc *render.TopoConf, out string)
}{
	"topograph-example-39": {
		// topograph's own test: the 39 nodes of example.instances.txt.
		args: []string{"--ibnetdiscover", ibData + "example.out", "--nodes", nodesFile(filepath.Join("testdata", "example.instances.txt"))},
		check: func(t *testing.T, tc *render.TopoConf, out string) {
			// 31 of the 39 instances are in the fabric: a06-p1-dgx-02-c05,
			// -c06, -c08, -c09, -c13, -c15, -c17 and dgx-gb200-n01-c1 have no
			// HCA in example.out (grep '"a06-p1-dgx-02-c05 ' finds nothing)
			// and are reported as not-in-fabric.
			if n := placed(tc.Placement()); n != 31 {
				t.Errorf("%d nodes placed, want 31", n)
			}
			// The leaves group the nodes exactly as topograph's expected output
			// does (its names are S-<guid>, ours come from the descriptions).
			sameGrouping(t, tc, "testdata/example.expected-topology.conf")
			if errs := tc.Validate(nil); len(errs) > 0 {
				t.Errorf("golden does not validate: %v", errs)
			}
		},
	},
	"topograph-example-all": {
		args: []string{"--ibnetdiscover", ibData + "example.out", "--no-node-check"},
		check: func(t *testing.T, tc *render.TopoConf, out string) {
			// Every compute leaf (rail 01 of pods 01-08) sits under one merged
			// spine; "MT4129 ConnectX7" HCAs name no host.
			if strings.Contains(out, "MT4129") {
				t.Errorf("a firmware-default HCA description became a host")
			}
			if got := tc.Placement()["node a07-p1-dgx-03-c05"]; got != "A09-P1-IBLEAF-01-03" {
				t.Errorf("a07-p1-dgx-03-c05 under %q, want A09-P1-IBLEAF-01-03 (its rail-01 leaf, line 'a07-p1-dgx-03-c05 mlx5_0')", got)
			}
		},
	},
	"psmn-x5": {
		args: []string{"--ibnetdiscover", ibData + "X5.topofile", "--guid-map", ibData + "X5.map", "--no-node-check"},
		check: func(t *testing.T, tc *render.TopoConf, out string) {
			// X5.map names sl390lin101..124; ibmap2slurm puts all 24 under
			// S-0008f105002036b4 ("Voltaire 4036 # hoibp0013").
			sameGrouping(t, tc, "testdata/X5.topology.conf")
			for i := 101; i <= 124; i++ {
				if got := tc.Placement()["node sl390lin"+strconv.Itoa(i)]; got != "hoibp0013" {
					t.Errorf("sl390lin%d under %q, want hoibp0013", i, got)
					break
				}
			}
		},
	},
	"ibtopotool-1": {args: []string{"--ibnetdiscover", ibData + "ibtopotool-1.topo", "--no-node-check", "--host-rule", `^(\S+)`}},
	"ibtopotool-2": {args: []string{"--ibnetdiscover", ibData + "ibtopotool-2.topo", "--no-node-check", "--host-rule", `^(\S+)`}},
	"ibtopotool-3": {args: []string{"--ibnetdiscover", ibData + "ibtopotool-3.topo", "--no-node-check", "--host-rule", `^(\S+)`}},
	"ibtopotool-4": {args: []string{"--ibnetdiscover", ibData + "ibtopotool-4.topo", "--no-node-check", "--host-rule", `^(\S+)`}},
	"osc-ports":    {args: []string{"--ibnetdiscover", ibData + "osc-test.out", "--no-node-check", "--host-rule", `^\s*(\S+)`}},
	"generated-fat-tree": {
		args: []string{"--ibnetdiscover", generated(fabricgen.Spec{Nodes: 12, NodesPerLeaf: 4, Spines: 3, Seed: 1}), "--no-node-check"},
		check: func(t *testing.T, tc *render.TopoConf, out string) {
			// 3 leaves of 4 nodes; 3 spines reach all of them and merge.
			if !strings.Contains(out, "SwitchName=R0-LEAF-0001 Nodes=node[00001-00004]") {
				t.Errorf("no leaf with node[00001-00004]:\n%s", out)
			}
			if !strings.Contains(out, "SwitchName=SPINE-001 Switches=R0-LEAF-[0001-0003]") {
				t.Errorf("the 3 spines are not one switch over the 3 leaves:\n%s", out)
			}
		},
	},
	"generated-rails": {
		// 4 rails; only rail 0 is the compute fabric here.
		args: []string{"--ibnetdiscover", generated(fabricgen.Spec{Nodes: 8, NodesPerLeaf: 4, Rails: 4, Spines: 2, Seed: 2}),
			"--no-node-check", "--include-hca", `mlx5_0$`},
		check: func(t *testing.T, tc *render.TopoConf, out string) {
			if strings.Contains(out, "R1-LEAF") || placed(tc.Placement()) != 8 {
				t.Errorf("rail filter did not keep rail 0 only:\n%s", out)
			}
		},
	},
}

func TestGolden(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "topogen.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: strata/v1\nkind: TopogenConfig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range goldenCases {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"topogen", "-c", cfg, "--log-level", "error", "render", "--format", "tree"}, tc.args...)
			if err := run(t.Context(), args, &out, &errb); err != nil {
				t.Fatalf("render: %v\n%s", err, errb.String())
			}
			path := filepath.Join("testdata", "golden", name+".topology.conf")
			if *update {
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("output differs from %s (run with -update and review the diff):\n%s", path, out.String())
			}
			conf, errs := render.ParseTopoConf(out.Bytes())
			if len(errs) > 0 {
				t.Fatalf("output does not parse: %v", errs)
			}
			if verr := conf.Validate(nil); len(verr) > 0 {
				t.Errorf("output does not validate: %v", verr)
			}
			if tc.check != nil {
				tc.check(t, conf, out.String())
			}
		})
	}
}

// generated writes a fabricgen fabric into a temporary folder under a
// fixed name, so the header of the golden file does not change.
func generated(s fabricgen.Spec) string {
	dir, err := os.MkdirTemp("", "topogen-golden-")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "generated.out")
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := fabricgen.Write(f, s); err != nil {
		panic(err)
	}
	return path
}

func nodesFile(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return hostlist.Compress(strings.Fields(string(data)))
}

// placed counts the nodes a placement puts under a switch.
func placed(p render.Placement) int {
	n := 0
	for k := range p {
		if strings.HasPrefix(k, "node ") {
			n++
		}
	}
	return n
}

// sameGrouping checks that the leaves of tc group the nodes it shares with
// another tool's topology.conf the same way.
func sameGrouping(t *testing.T, tc *render.TopoConf, otherPath string) {
	t.Helper()
	data, err := os.ReadFile(otherPath)
	if err != nil {
		t.Fatal(err)
	}
	other, errs := render.ParseTopoConf(data)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", otherPath, errs)
	}
	ours, theirs := tc.Placement(), other.Placement()
	// Two nodes share a leaf in one file exactly when they do in the other.
	var common []string
	for k := range ours {
		if strings.HasPrefix(k, "node ") && theirs[k] != "" {
			common = append(common, k)
		}
	}
	if len(common) == 0 {
		t.Fatalf("no node in common with %s", otherPath)
	}
	for _, a := range common {
		for _, b := range common {
			if (ours[a] == ours[b]) != (theirs[a] == theirs[b]) {
				t.Errorf("%s and %s: together under %s here (%v), under %s/%s in %s", a, b, ours[a], ours[a] == ours[b], theirs[a], theirs[b], otherPath)
				return
			}
		}
	}
}
