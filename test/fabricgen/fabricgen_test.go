package fabricgen

import (
	"bytes"
	"regexp"
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

// TestTile checks tiled copies against the dump they copy, from the text:
// each copy has the same lines, and no node id or description of one
// copy is in another.
func TestTile(t *testing.T) {
	var one bytes.Buffer
	if err := Write(&one, Spec{Nodes: 16, Rails: 2, NodesPerLeaf: 4, PodLeaves: 2, SpinesPerPod: 2, CoresPerGroup: 2, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	var tiled bytes.Buffer
	if err := Tile(&tiled, one.Bytes(), 3); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(tiled.String(), "\n"), "\n")
	n := strings.Count(one.String(), "\n")
	if len(lines) != 3*(n+1) {
		t.Fatalf("%d lines, want 3 copies of %d", len(lines), n+1)
	}
	ids := regexp.MustCompile(`"[SH]-[0-9a-f]{16}"|"MF0;[^:"]*|"[^"]* mlx5_\d"`)
	owner := map[string]int{}
	for k := range 3 {
		part := strings.Join(lines[k*(n+1):(k+1)*(n+1)], "\n")
		if got, want := strings.Count(part, "\nSwitch\t"), strings.Count(one.String(), "\nSwitch\t"); got != want {
			t.Errorf("copy %d has %d switches, want %d", k, got, want)
		}
		for _, id := range ids.FindAllString(part, -1) {
			if o, ok := owner[id]; ok && o != k {
				t.Fatalf("%s is in copy %d and copy %d", id, o, k)
			}
			owner[id] = k
		}
	}
	if !strings.Contains(tiled.String(), `"MF0;t2-CORE-01-01:MQM9790/U1"`) || !strings.Contains(tiled.String(), `"t1-node00001 mlx5_0"`) {
		t.Errorf("copies are not renamed as documented:\n%.2000s", tiled.String())
	}
	if err := Tile(&tiled, one.Bytes(), 0); err == nil {
		t.Error("Tile of 0 copies: no error")
	}
}
