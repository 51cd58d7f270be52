package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

const (
	fabricKey = render.LabelFabric
	leafKey   = render.LabelLeaf
	spineKey  = render.LabelSpine
	nvlKey    = render.LabelNVLink
)

// wantLabels is NodeLabels(treeGraph(), blockPlan()): each host's fabric,
// leaf and the switch above its leaf (fabric2's leaves hang off the
// synthetic root), and for the hosts of an NVLink block, the block.
var wantLabels = map[string]map[string]string{
	"gpu1":   {fabricKey: "fabric1", leafKey: "leaf1", spineKey: "spine1", nvlKey: "nvl1"},
	"gpu2":   {fabricKey: "fabric1", leafKey: "leaf1", spineKey: "spine1", nvlKey: "nvl1"},
	"gpu3":   {fabricKey: "fabric1", leafKey: "leaf1", spineKey: "spine1", nvlKey: "nvl1"},
	"gpu7":   {fabricKey: "fabric1", leafKey: "leaf1", spineKey: "spine1", nvlKey: "nvl1"},
	"gpu10":  {fabricKey: "fabric1", leafKey: "leaf2", spineKey: "spine1", nvlKey: "nvl2"},
	"gpu11":  {fabricKey: "fabric1", leafKey: "leaf2", spineKey: "spine1", nvlKey: "nvl2"},
	"node-a": {fabricKey: "fabric2", leafKey: "S-0002c90200417670", spineKey: "fabric2-root"},
	"node-b": {fabricKey: "fabric2", leafKey: "S-0002c90200417680", spineKey: "fabric2-root"},
}

func TestNodeLabels(t *testing.T) {
	if diff := cmp.Diff(wantLabels, render.NodeLabels(treeGraph(), blockPlan())); diff != "" {
		t.Errorf("NodeLabels (-want +got):\n%s", diff)
	}
}

func TestNodeLabelsOneSide(t *testing.T) {
	// Blocks only: just the NVLink label.
	got := render.NodeLabels(nil, &graph.BlockPlan{Blocks: []graph.Block{{Name: "nvl1", Nodes: []string{"gpu1"}}}})
	want := map[string]map[string]string{"gpu1": {nvlKey: "nvl1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeLabels(nil, plan) (-want +got):\n%s", diff)
	}
	// A tree of one leaf: no switch above it, so no spine label.
	got = render.NodeLabels(&graph.Graph{Fabrics: []*graph.Fabric{{Name: "fabric1", Root: "leaf1",
		Switches: []*graph.Switch{{Name: "leaf1", Hosts: []string{"gpu1"}}}}}}, nil)
	want = map[string]map[string]string{"gpu1": {fabricKey: "fabric1", leafKey: "leaf1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeLabels(one leaf, nil) (-want +got):\n%s", diff)
	}
}

// validLabelValue is Kubernetes' rule: at most 63 characters, empty or
// alphanumeric at both ends with [-_.A-Za-z0-9] between.
var validLabelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

func TestNodeLabelsSanitised(t *testing.T) {
	// 71 characters: the first 63 end in '-', which is then trimmed too.
	long := "spine-" + strings.Repeat("x", 56) + "-tail-end"
	tests := map[string]struct{ name, want string }{
		"safe name kept":                {"leaf1", "leaf1"},
		"unsafe runs become one dash":   {"pod 01/rack:17", "pod-01-rack-17"},
		"ends trimmed of '-', '.', '_'": {"_mgmt.leaf.", "mgmt.leaf"},
		"cut to 63, then trimmed":       {long, "spine-" + strings.Repeat("x", 56)},
		"nothing safe left":             {"[]", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := &graph.Graph{Fabrics: []*graph.Fabric{{Name: "fabric1", Root: "root",
				Switches: []*graph.Switch{
					{Name: tc.name, Hosts: []string{"gpu1"}},
					{Name: "root", Level: 1, Children: []string{tc.name}},
				}}}}
			got := render.NodeLabels(g, nil)["gpu1"][leafKey]
			if got != tc.want {
				t.Errorf("leaf label of %q = %q, want %q", tc.name, got, tc.want)
			}
			if len(got) > 63 || !validLabelValue.MatchString(got) {
				t.Errorf("leaf label %q (%d characters) is not a valid Kubernetes label value", got, len(got))
			}
		})
	}
}

func TestLabelScript(t *testing.T) {
	// One kubectl line per node, nodes and keys sorted.
	golden(t, "labels.sh", render.LabelScript(wantLabels, source))
}

// TestLabelScriptHostileNames: host names that are shell code reach
// kubectl as one argument each and run nothing.
func TestLabelScriptHostileNames(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir, bin := t.TempDir(), t.TempDir()
	// A kubectl that prints each argument on a line of its own.
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte("#!/bin/sh\nfor a; do printf '<%s>\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"gpu1;touch pwned", "$(touch pwned2)", "`touch pwned3`", "it's", "a\"b", "x\ntouch pwned4"}
	labels := map[string]map[string]string{}
	for _, n := range names {
		labels[n] = map[string]string{leafKey: "leaf1"}
	}
	script := filepath.Join(dir, "labels.sh")
	if err := os.WriteFile(script, render.LabelScript(labels, source), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, script)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	for _, n := range names {
		if want := "<label>\n<node>\n<" + n + ">\n<--overwrite>\n"; !strings.Contains(string(out), want) {
			t.Errorf("kubectl did not get %q as one argument:\n%s", n, out)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "labels.sh" {
			t.Errorf("the script ran code from a host name: %s exists", e.Name())
		}
	}
}

func TestLabelYAML(t *testing.T) {
	out, err := render.LabelYAML(wantLabels)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "labels.yaml", out)
}
