package nvml

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func parseTopoFile(t *testing.T, path string) Topo {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	topo, err := ParseTopoMatrix(f)
	if err != nil {
		t.Fatalf("ParseTopoMatrix(%s): %v", path, err)
	}
	return topo
}

func TestParseTopoMatrixGolden(t *testing.T) {
	for _, path := range fixtures(t, "topo/*.topo.txt") {
		name := strings.TrimSuffix(filepath.Base(path), ".topo.txt")
		t.Run(name, func(t *testing.T) {
			b, err := json.MarshalIndent(parseTopoFile(t, path), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", "topo", name+".json"), append(b, '\n'))
		})
	}
}

// TestParseTopoMatrixByHand states facts a reviewer can check in the files.
func TestParseTopoMatrixByHand(t *testing.T) {
	tests := map[string]struct {
		file       string
		gpus       int
		cell01     string // GPU0 -> GPU1
		cpu0, cpu7 string
		numa0      int
		numa7      int
	}{
		"GKE A3: 8 H100, NV18, NICs, GPU NUMA ID": {
			file: "gke-a3-h100-8gpu-8nic.topo.txt", gpus: 8, cell01: "NV18",
			cpu0: "0-55,112-167", cpu7: "56-111,168-223", numa0: 0, numa7: 1,
		},
		"8 A100, NV12": {
			file: "stas00-a100-8gpu.topo.txt", gpus: 8, cell01: "NV12",
			cpu0: "0-23", cpu7: "24-47", numa0: 0, numa7: 1,
		},
		"8 H100 with SMT siblings": {
			file: "stas00-h100-8gpu-ht.topo.txt", gpus: 8, cell01: "NV18",
			cpu0: "0-51,104-155", cpu7: "52-103,156-207", numa0: 0, numa7: 1,
		},
		"8 H100": {
			file: "stas00-h100-8gpu.topo.txt", gpus: 8, cell01: "NV18",
			cpu0: "0-51", cpu7: "52-103", numa0: 0, numa7: 1,
		},
		"2 GPUs, NV2, NUMA N/A": {
			file: "stas00-2gpu-nvlink-nv2.topo.txt", gpus: 2, cell01: "NV2",
			cpu0: "0-23", cpu7: "0-23", numa0: -1, numa7: -1,
		},
		"2 GPUs over a host bridge": {
			file: "stas00-2gpu-pcie-phb.topo.txt", gpus: 2, cell01: "PHB",
			cpu0: "0-11", cpu7: "0-11", numa0: -1, numa7: -1,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			topo := parseTopoFile(t, filepath.Join("testdata", "topo", tt.file))
			if len(topo.GPUs) != tt.gpus {
				t.Fatalf("%d GPUs, want %d", len(topo.GPUs), tt.gpus)
			}
			first, last := topo.GPUs[0], topo.GPUs[len(topo.GPUs)-1]
			if first.Index != 0 || last.Index != tt.gpus-1 {
				t.Errorf("rows GPU%d..GPU%d, want GPU0..GPU%d", first.Index, last.Index, tt.gpus-1)
			}
			if got := first.Peers[1]; got != tt.cell01 {
				t.Errorf("GPU0 -> GPU1 = %q, want %q", got, tt.cell01)
			}
			if len(first.Peers) != tt.gpus-1 {
				t.Errorf("GPU0 has %d peers, want %d (NIC columns are dropped)", len(first.Peers), tt.gpus-1)
			}
			if first.CPUAffinity != tt.cpu0 || first.NUMA != tt.numa0 {
				t.Errorf("GPU0 CPUs %q NUMA %d, want %q and %d", first.CPUAffinity, first.NUMA, tt.cpu0, tt.numa0)
			}
			if last.CPUAffinity != tt.cpu7 || last.NUMA != tt.numa7 {
				t.Errorf("last GPU CPUs %q NUMA %d, want %q and %d", last.CPUAffinity, last.NUMA, tt.cpu7, tt.numa7)
			}
		})
	}
}

const topoTwoGPUs = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
	"GPU0\t X \tNV4\tPXB\t0-7,16-23\t0\t\tN/A\n" +
	"GPU1\tNV4\t X \tSYS\t8-15,24-31\t1\t\tN/A\n" +
	"NIC0\tPXB\tSYS\t X \n" +
	"\n" +
	"Legend:\n\n  X    = Self\n"

var parseTopoMatrixTests = map[string]struct {
	in      string
	want    Topo
	wantErr string // substring; "" for success
}{
	"tabs, NIC column and row": {
		in: topoTwoGPUs,
		want: Topo{GPUs: []TopoGPU{
			{Index: 0, Peers: map[int]string{1: "NV4"}, CPUAffinity: "0-7,16-23", NUMA: 0},
			{Index: 1, Peers: map[int]string{0: "NV4"}, CPUAffinity: "8-15,24-31", NUMA: 1},
		}},
	},
	"underlined header (terminal escapes)": {
		in: "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\x1b[0m\n" +
			"GPU0\t X \tPHB\t0-11\t\tN/A\n" +
			"GPU1\tPHB\t X \t0-11\t\tN/A\n",
		want: Topo{GPUs: []TopoGPU{
			{Index: 0, Peers: map[int]string{1: "PHB"}, CPUAffinity: "0-11", NUMA: -1},
			{Index: 1, Peers: map[int]string{0: "PHB"}, CPUAffinity: "0-11", NUMA: -1},
		}},
	},
	"no affinity columns, one GPU": {
		in:   "\tGPU0\nGPU0\t X\n",
		want: Topo{GPUs: []TopoGPU{{Index: 0, Peers: map[int]string{}, NUMA: -1}}},
	},
	"affinity N/A and NUMA list": {
		in: "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n" +
			"GPU0\t X \tSYS\tN/A\t0-1\n" +
			"GPU1\tSYS\t X \tN/A\t0-1\n",
		want: Topo{GPUs: []TopoGPU{
			{Index: 0, Peers: map[int]string{1: "SYS"}, NUMA: -1},
			{Index: 1, Peers: map[int]string{0: "SYS"}, NUMA: -1},
		}},
	},
	"leading blank lines, CRLF": {
		in: "\r\n\r\n\tGPU0\tGPU1\r\nGPU0\t X \tNV1\r\nGPU1\tNV1\t X \r\n",
		want: Topo{GPUs: []TopoGPU{
			{Index: 0, Peers: map[int]string{1: "NV1"}, NUMA: -1},
			{Index: 1, Peers: map[int]string{0: "NV1"}, NUMA: -1},
		}},
	},
	"empty":             {in: "", wantErr: "no header line"},
	"legend only":       {in: "Legend:\n\n  X    = Self\n", wantErr: "names no GPU column"},
	"no GPU columns":    {in: "\tNIC0\tNIC1\nNIC0\t X \tPIX\n", wantErr: "names no GPU column"},
	"unknown column":    {in: "\tGPU0\tCPU Affinity\tPower\nGPU0\t X \t0-3\t100\n", wantErr: `header word "Power"`},
	"column twice":      {in: "\tGPU0\tGPU0\nGPU0\t X \tX\n", wantErr: "header names GPU0 twice"},
	"missing row":       {in: "\tGPU0\tGPU1\nGPU0\t X \tNV2\n", wantErr: "column GPU1 has no row"},
	"row twice":         {in: "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU0\t X \tNV2\nGPU1\tNV2\t X\n", wantErr: "row GPU0: appears twice"},
	"row not in header": {in: "\tGPU0\nGPU0\t X\nGPU1\tNV2\n", wantErr: "row GPU1: no such column"},
	"short row":         {in: "\tGPU0\tGPU1\nGPU0\t X\nGPU1\tNV2\t X\n", wantErr: "row GPU0: 1 values for 2 device"},
	"long row":          {in: "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X\tNV2\t0-3\t7\nGPU1\tNV2\t X\n", wantErr: "row GPU0: 4 values"},
	"no X on the diagonal": {
		in:      "\tGPU0\tGPU1\nGPU0\tNV2\tNV2\nGPU1\tNV2\t X\n",
		wantErr: `row GPU0: "NV2" on the diagonal`,
	},
	"asymmetric": {
		in:      "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV4\t X\n",
		wantErr: "GPU0 to GPU1 is NV2 but GPU1 to GPU0 is NV4",
	},
	"X off the diagonal": {
		in:      "\tGPU0\tGPU1\nGPU0\t X \tX\nGPU1\tX\t X\n",
		wantErr: "row GPU0, column GPU1: X off the diagonal",
	},
	"lower-case cell": {
		in:      "\tGPU0\tGPU1\nGPU0\t X \tnv2\nGPU1\tnv2\t X\n",
		wantErr: `"nv2" is no link type`,
	},
	"bad CPU affinity": {
		in:      "\tGPU0\tCPU Affinity\nGPU0\t X \t3-1\n",
		wantErr: "row GPU0, CPU Affinity",
	},
	"huge GPU number": {
		in:      "\tGPU99999999999999999999\nGPU0\t X\n",
		wantErr: "index out of range",
	},
}

func TestParseTopoMatrix(t *testing.T) {
	for name, tt := range parseTopoMatrixTests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTopoMatrix(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTopoMatrix() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTopoMatrix() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseTopoMatrix() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// eightGPUs is a node as ParseQueryXML leaves it: no links, no affinity.
func eightGPUs() Node {
	n := Node{Hostname: "a3-01", Source: SourceNvidiaSMI}
	for i := range 8 {
		n.GPUs = append(n.GPUs, GPU{
			Index: i, Minor: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA H100 80GB HBM3", Type: "h100",
			PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x10*(i+1)), NUMANode: -1,
		})
	}
	return n
}

func TestMergeGKE(t *testing.T) {
	n := eightGPUs()
	if err := n.Merge(parseTopoFile(t, filepath.Join("testdata", "topo", "gke-a3-h100-8gpu-8nic.topo.txt"))); err != nil {
		t.Fatal(err)
	}
	want := eightGPUs()
	for i := range want.GPUs {
		g := &want.GPUs[i]
		g.CPUAffinity, g.NUMANode = "0-55,112-167", 0
		if i >= 4 {
			g.CPUAffinity, g.NUMANode = "56-111,168-223", 1
		}
		for peer := range 8 {
			if peer != i {
				g.NVLinks = append(g.NVLinks, Link{Peer: peer, Count: 18})
			}
		}
	}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("Merge() mismatch (-want +got):\n%s", diff)
	}
	if err := n.Validate(); err != nil {
		t.Errorf("merged node does not validate: %v", err)
	}
}

func TestMerge(t *testing.T) {
	twoGPUs := func() Node {
		n := eightGPUs()
		n.GPUs = n.GPUs[:2]
		n.GPUs[0].NVLinks = []Link{{Peer: -1, Count: 12}} // replaced by the matrix
		n.GPUs[1].CPUAffinity, n.GPUs[1].NUMANode = "0-3", 2
		return n
	}
	tests := map[string]struct {
		topo    string
		want    func() Node
		wantErr string // substring; "" for success
	}{
		"NVLinks replaced, affinity kept where the matrix has none": {
			topo: "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV2\t0-23\tN/A\nGPU1\tNV2\t X \tN/A\tN/A\n",
			want: func() Node {
				n := twoGPUs()
				n.GPUs[0].NVLinks = []Link{{Peer: 1, Count: 2}}
				n.GPUs[0].CPUAffinity = "0-23"
				n.GPUs[1].NVLinks = []Link{{Peer: 0, Count: 2}}
				return n
			},
		},
		"no NVLink": {
			topo: "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n",
			want: func() Node {
				n := twoGPUs()
				n.GPUs[0].NVLinks = nil
				return n
			},
		},
		"GPU counts differ": {
			topo:    "\tGPU0\nGPU0\t X\n",
			wantErr: "the matrix has 1 GPUs, the node 2",
		},
		"indices differ": {
			topo:    "\tGPU0\tGPU5\nGPU0\t X \tNV2\nGPU5\tNV2\t X \n",
			wantErr: "the matrix has GPU5, the node no GPU of index 5",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			topo, err := ParseTopoMatrix(strings.NewReader(tt.topo))
			if err != nil {
				t.Fatal(err)
			}
			n := twoGPUs()
			err = n.Merge(topo)
			want := twoGPUs // a failed merge changes nothing
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Merge() error = %v, want one containing %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Merge() error = %v", err)
			} else {
				want = tt.want
			}
			if diff := cmp.Diff(want(), n); diff != "" {
				t.Errorf("node after Merge() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMergeIntoParsedXML runs the nvidia-smi path end to end: the XML of a
// one-GPU node and a one-GPU matrix.
func TestMergeIntoParsedXML(t *testing.T) {
	n := parseXMLFile(t, filepath.Join("testdata", "smi", "tesla-t4.xml"))
	topo, err := ParseTopoMatrix(strings.NewReader("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-3\t\tN/A\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Merge(topo); err != nil {
		t.Fatal(err)
	}
	if g := n.GPUs[0]; g.CPUAffinity != "0-3" || g.NUMANode != -1 || g.NVLinks != nil {
		t.Errorf("merged GPU %+v, want CPUs 0-3, NUMA -1, no NVLinks", g)
	}
}
