package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/topogen/internal/render"
)

// confErr is one expected error: its line (0 for a problem of the whole
// file, such as a cycle or BlockSizes) and a substring of its message.
type confErr struct {
	line int
	msg  string
}

var cluster = []string{"gpu1", "gpu2", "gpu3", "gpu4"}

// topoConfTests covers every file in testdata/topoconf (TestTopoConfFiles
// fails on a file missing here). Errors are ParseTopoConf's, then
// Validate's, in order, exactly as many as listed.
var topoConfTests = map[string]struct {
	known         []string // the cluster's nodes; nil skips that check
	wantErrs      []confErr
	wantPlacement render.Placement // for .good files
	wantSizes     []int
}{
	"tree.good": {
		known: cluster,
		wantPlacement: render.Placement{
			"node gpu1": "leaf1", "node gpu2": "leaf1", "node gpu3": "leaf2", "node gpu4": "leaf2",
			"switch leaf1": "spine1", "switch leaf2": "spine1",
		},
	},
	"block.good": {
		known:         cluster,
		wantPlacement: render.Placement{"node gpu1": "nvl1", "node gpu2": "nvl1", "node gpu3": "nvl2", "node gpu4": "nvl2"},
		wantSizes:     []int{2, 4},
	},
	"two-fabrics.good": {
		known: cluster,
		wantPlacement: render.Placement{
			"node gpu1": "leaf1", "node gpu2": "leaf1", "switch leaf1": "spine1",
			"node gpu3": "leaf2", "node gpu4": "leaf2", "switch leaf2": "spine2",
		},
	},
	"keys-any-case.good": {
		wantPlacement: render.Placement{
			"node gpu1": "leaf1", "node gpu2": "leaf1", "node gpu3": "leaf1", "node gpu4": "leaf1",
			"switch leaf1": "spine1",
		},
	},
	"duplicate-switch.bad": {
		wantErrs: []confErr{{2, "switch leaf1 is already defined on line 1"}},
	},
	"undefined-child.bad": {
		wantErrs: []confErr{{2, "switch spine1 has child leaf2, which is not defined (slurmctld would exit)"}},
	},
	"non-numeric-range.bad": {
		// The range is rejected, which leaves spine1 with nothing below it.
		wantErrs: []confErr{
			{3, `=ibleaf[A-B]: hostlist "ibleaf[A-B]": at offset 7: range "A-B" is not numeric (Slurm would stop)`},
			{3, "switch spine1 has neither Switches= nor Nodes="},
		},
	},
	"node-under-two-leaves.bad": {
		wantErrs: []confErr{{2, "node gpu2 is under switch leaf2 and switch leaf1 (line 1)"}},
	},
	"unknown-node.bad": {
		known:    cluster,
		wantErrs: []confErr{{3, "node gpu5 is not a node of this cluster"}},
	},
	"empty-switch.bad": {
		wantErrs: []confErr{{2, "switch leaf2 has neither Switches= nor Nodes="}},
	},
	"tree-and-block.bad": {
		wantErrs: []confErr{{3, "SwitchName and BlockName lines in one file: topology/tree and topology/block are separate plugins"}},
	},
	"cycle.bad": {
		wantErrs: []confErr{
			{0, "no root switch: the switches form a cycle"},
			{0, "switch cycle: spine1 -> spine2 -> spine1"},
		},
	},
	"unknown-key.bad": {
		wantErrs: []confErr{{1, `unknown key "speed" on a SwitchName line`}},
	},
	"unknown-line.bad": {
		wantErrs: []confErr{{2, `unknown line type "Switch=spine1"`}},
	},
	"key-without-value.bad": {
		wantErrs: []confErr{{2, `"Nodes" is not Key=Value`}},
	},
	"key-given-twice.bad": {
		wantErrs: []confErr{{1, "Nodes given twice"}},
	},
	"block-sizes-not-increasing.bad": {
		wantErrs: []confErr{{0, "BlockSizes must increase: [4 2]"}},
	},
	"block-sizes-not-a-number.bad": {
		wantErrs: []confErr{{2, `BlockSizes entry "four" is not a positive number`}},
	},
	"bracket-in-name.bad": {
		wantErrs: []confErr{{1, `switch name "leaf[1]" has characters Slurm reads as a host list`}},
	},
	"node-in-two-blocks.bad": {
		wantErrs: []confErr{
			{2, "node gpu2 is in block nvl2 and block nvl1 (line 1)"},
			{3, "block nvl1 is already defined on line 1"},
		},
	},
	"bad-node-names.bad": {
		wantErrs: []confErr{
			{1, `node name "Nodes=x" is not one Slurm accepts`},
			{2, `node name "gpu\\" is not one Slurm accepts`},
			{3, "node name \"gp\u00fc1\" is not one Slurm accepts"},
			{4, `node name "-gpu2" is not one Slurm accepts`},
		},
	},
	"empty.bad": {
		wantErrs: []confErr{{0, "no SwitchName or BlockName line: an empty topology would leave every node unplaced"}},
	},
}

func readTopoConf(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "topoconf", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// parseAndValidate is what topogen check and apply do with a file.
func parseAndValidate(data []byte, known []string) (*render.TopoConf, []render.ConfError) {
	tc, errs := render.ParseTopoConf(data)
	return tc, append(errs, tc.Validate(known)...)
}

func TestTopoConfFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "topoconf", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := topoConfTests[filepath.Base(f)]; !ok {
			t.Errorf("%s has no case in topoConfTests", f)
		}
	}
	for name, tc := range topoConfTests {
		t.Run(name, func(t *testing.T) {
			conf, errs := parseAndValidate(readTopoConf(t, name), tc.known)
			good := strings.HasSuffix(name, ".good")
			if good != (len(tc.wantErrs) == 0) {
				t.Fatalf("a .good file must expect no error and a .bad file at least one")
			}
			for i := range max(len(errs), len(tc.wantErrs)) {
				switch {
				case i >= len(errs):
					t.Errorf("missing error %d: line %d: %s", i, tc.wantErrs[i].line, tc.wantErrs[i].msg)
				case i >= len(tc.wantErrs):
					t.Errorf("unexpected error: %v", errs[i])
				case errs[i].Line != tc.wantErrs[i].line || !strings.Contains(errs[i].Msg, tc.wantErrs[i].msg):
					t.Errorf("error %d = %q (line %d), want line %d containing %q", i, errs[i].Error(), errs[i].Line, tc.wantErrs[i].line, tc.wantErrs[i].msg)
				}
			}
			if good {
				if diff := cmp.Diff(tc.wantPlacement, conf.Placement()); diff != "" {
					t.Errorf("placement (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantSizes, conf.BlockSizes); diff != "" {
					t.Errorf("BlockSizes (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestConfErrorString(t *testing.T) {
	if got, want := (render.ConfError{Line: 3, Msg: "bad"}).Error(), "line 3: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (render.ConfError{Msg: "bad"}).Error(), "bad"; got != want {
		t.Errorf("Error() without a line = %q, want %q", got, want)
	}
}

func TestParseTopoConfExpands(t *testing.T) {
	tc, errs := render.ParseTopoConf([]byte("SwitchName=s1 Nodes=n[01-02],login Switches=a[1-2] # two children\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []render.ConfSwitch{{Name: "s1", Switches: []string{"a1", "a2"}, Nodes: []string{"n01", "n02", "login"}, Line: 1}}
	if diff := cmp.Diff(want, tc.Switches); diff != "" {
		t.Errorf("switches (-want +got):\n%s", diff)
	}
}

// The outputs of `scontrol show topology` in testdata were captured from
// real slurmctld 26.05.5 and 24.11.5 running the files below.
const (
	liveTreeConf  = "SwitchName=leaf1 Nodes=gpu[1-2]\nSwitchName=leaf2 Nodes=gpu[3-4]\nSwitchName=spine1 Switches=leaf[1-2]\n"
	liveBlockConf = "BlockName=nvl1 Nodes=gpu[1-2]\nBlockName=nvl2 Nodes=gpu[3-4]\nBlockSizes=2,4\n"
)

func TestParseShowTopologyReal(t *testing.T) {
	tests := map[string]string{
		"show-tree-26.05.txt": liveTreeConf,
		"show-tree-24.11.txt": liveTreeConf,
		// The AggregatedBlock line (nvl[1-2], BlockSize=4) is Slurm's own
		// and is skipped.
		"show-block-26.05.txt": liveBlockConf,
	}
	for file, conf := range tests {
		t.Run(file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := render.ParseShowTopology(out)
			if err != nil {
				t.Fatal(err)
			}
			tc, errs := parseAndValidate([]byte(conf), nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if diff := cmp.Diff(tc.Placement(), got); diff != "" {
				t.Errorf("placement (-file +live):\n%s", diff)
			}
			if d := tc.Placement().Diff(got, 10); d != nil {
				t.Errorf("Diff of equal placements = %q, want none", d)
			}
		})
	}
}

var showTests = map[string]struct {
	in      string
	want    render.Placement
	wantErr string
}{
	"empty": {in: "", want: render.Placement{}},
	"nodes of upper switches are not placements": {
		in:   "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=a[1-2]\nSwitchName=top Level=1 LinkSpeed=1 Nodes=a[1-2] Switches=s1\n",
		want: render.Placement{"node a1": "s1", "node a2": "s1", "switch s1": "top"},
	},
	"unknown lines skipped": {
		in:   "slurm_load_topo error: nothing\nBlockName=b1 BlockIndex=0 Nodes=n1 BlockSize=1\n",
		want: render.Placement{"node n1": "b1"},
	},
	"bad node list": {
		in:      "BlockName=b1 BlockIndex=0 Nodes=n[1-2 BlockSize=2\n",
		wantErr: "scontrol show topology line 1:",
	},
	"bad switch list": {
		in:      "SwitchName=s1 Level=0 Nodes=n1\nSwitchName=top Level=1 Switches=s[x]\n",
		wantErr: "scontrol show topology line 2:",
	},
}

func TestParseShowTopology(t *testing.T) {
	for name, tc := range showTests {
		t.Run(name, func(t *testing.T) {
			got, err := render.ParseShowTopology([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlacementDiff(t *testing.T) {
	file := render.Placement{"node a": "leaf1", "node b": "leaf1", "node c": "leaf2", "switch leaf1": "spine"}
	tests := map[string]struct {
		q    render.Placement
		max  int
		want []string
	}{
		"equal": {q: file, max: 10, want: nil},
		"moved, missing and extra, sorted": {
			q:   render.Placement{"node a": "leaf2", "node b": "leaf1", "switch leaf1": "spine", "node d": "leaf2"},
			max: 10,
			want: []string{
				`node a: "leaf1" vs "leaf2"`,
				`node c: "leaf2" vs ""`,
				`node d: "" vs "leaf2"`,
			},
		},
		"cut at max": {
			q:    render.Placement{},
			max:  2,
			want: []string{`node a: "leaf1" vs ""`, `node b: "leaf1" vs ""`, "..."},
		},
		"exactly max differences: nothing left out, no ...": {
			q:    render.Placement{"node a": "leaf1", "node b": "leaf1"},
			max:  2,
			want: []string{`node c: "leaf2" vs ""`, `switch leaf1: "spine" vs ""`},
		},
		"max 0 is no limit": {
			q:    render.Placement{"node a": "leaf1"},
			max:  0,
			want: []string{`node b: "leaf1" vs ""`, `node c: "leaf2" vs ""`, `switch leaf1: "spine" vs ""`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, file.Diff(tc.q, tc.max)); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseTopoConf: no input makes the parser or Validate panic, and
// every error has a line within the input.
func FuzzParseTopoConf(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "topoconf", "*"))
	for _, file := range files {
		f.Add(readTopoConf(f, filepath.Base(file)))
	}
	f.Add([]byte(liveTreeConf))
	f.Add([]byte(liveBlockConf))
	f.Add([]byte("SwitchName=s Switches=s\n"))
	f.Add([]byte("SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tc, errs := render.ParseTopoConf(data)
		if tc == nil {
			t.Fatal("ParseTopoConf returned no TopoConf")
		}
		errs = append(errs, tc.Validate(nil)...)
		errs = append(errs, tc.Validate([]string{"gpu1"})...)
		reach, warns := tc.Reach([]string{"gpu1", "gpu2"})
		errs = append(append(errs, reach...), warns...)
		lines := strings.Count(string(data), "\n") + 1
		for _, e := range errs {
			if e.Line < 0 || e.Line > lines {
				t.Errorf("error %q has line %d; the input has %d lines", e.Error(), e.Line, lines)
			}
		}
		_ = tc.Placement()
	})
}

// FuzzParseShowTopology: no input makes the parser panic, and a placement
// compares with itself as equal.
func FuzzParseShowTopology(f *testing.F) {
	for _, file := range []string{"show-tree-26.05.txt", "show-tree-24.11.txt", "show-block-26.05.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, tc := range showTests {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := render.ParseShowTopology(data)
		if err != nil {
			return
		}
		if d := p.Diff(p, 10); d != nil {
			t.Errorf("placement differs from itself: %q", d)
		}
	})
}
