package fabricgen

import (
	"bytes"
	"strings"
	"testing"
)

// maxPorts returns the most link lines any switch block of a dump has,
// counted from the text: a check written apart from the generator.
func maxPorts(dump string) int {
	most, n, inSwitch := 0, 0, false
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "Switch"):
			inSwitch, n = true, 0
		case strings.HasPrefix(line, "["):
			if inSwitch {
				n++
				most = max(most, n)
			}
		case line == "":
			inSwitch = false
		}
	}
	return most
}

func TestWrite(t *testing.T) {
	tests := map[string]struct {
		spec      Spec
		wantErr   string
		wantPorts int // most ports of a switch
	}{
		"2-tier fat tree": {spec: Spec{Nodes: 12, NodesPerLeaf: 4, Spines: 3}, wantPorts: 7},
		// 2 leaves x 4 rails under each spine; a leaf has 4 hosts + 2 spines.
		"2-tier rails share the spines": {spec: Spec{Nodes: 8, NodesPerLeaf: 4, Rails: 4, Spines: 2}, wantPorts: 8},
		// The shape of the old 10k benchmark fabric, smaller: every leaf of
		// every rail under every spine (there 313 x 8 = 2,504 ports).
		"spine beyond the radix": {
			spec:    Spec{Nodes: 35, NodesPerLeaf: 1, Rails: 2, Spines: 1},
			wantErr: "a spine switch would have 70 ports (one per leaf of every rail: 35 leaves x 2 rails; use PodLeaves for a 3-tier fabric), more than the radix 64",
		},
		"leaf beyond the radix": {
			spec:    Spec{Nodes: 100, NodesPerLeaf: 60, Spines: 8},
			wantErr: "a leaf switch would have 68 ports",
		},
		// Leaves: 8 hosts + 2 spines; spines: 4 leaves + 2 cores; cores: 2
		// pods x 2 rails.
		"3-tier": {spec: Spec{Nodes: 64, Rails: 2, NodesPerLeaf: 8, PodLeaves: 4, SpinesPerPod: 2, CoresPerGroup: 2}, wantPorts: 10},
		// 9 pods x 8 rails = 72 ports a core: a 128-port switch, not a
		// 64-port one.
		"3-tier core beyond the radix": {
			spec:    Spec{Nodes: 9, Rails: 8, NodesPerLeaf: 1, PodLeaves: 1, SpinesPerPod: 1, CoresPerGroup: 1},
			wantErr: "a core switch would have 72 ports (one per pod and rail: 9 pods x 8 rails), more than the radix 64",
		},
		"3-tier core within radix 128": {
			spec:      Spec{Nodes: 9, Rails: 8, NodesPerLeaf: 1, PodLeaves: 1, SpinesPerPod: 1, CoresPerGroup: 1, Radix: 128},
			wantPorts: 72,
		},
		"3-tier without spines":   {spec: Spec{Nodes: 8, NodesPerLeaf: 4, PodLeaves: 2}, wantErr: "needs SpinesPerPod and CoresPerGroup"},
		"radix of no real switch": {spec: Spec{Nodes: 8, NodesPerLeaf: 4, Radix: 256}, wantErr: "at most 128 ports"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Write error = %v, want %q", err, tc.wantErr)
				}
				if buf.Len() != 0 {
					t.Errorf("an invalid fabric was written (%d bytes)", buf.Len())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := maxPorts(buf.String()); got != tc.wantPorts {
				t.Errorf("busiest switch has %d ports, want %d", got, tc.wantPorts)
			}
		})
	}
}

func TestNoSwitchNames(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Spec{Nodes: 4, NodesPerLeaf: 2, Spines: 1, NoSwitchNames: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "MF0;") || !strings.Contains(buf.String(), `"MQM9700 Mellanox Technologies"`) {
		t.Errorf("switch descriptions still name the switches:\n%s", buf.String())
	}
}
