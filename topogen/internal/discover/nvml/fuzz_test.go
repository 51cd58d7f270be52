package nvml

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The fuzz targets are seeded from the fixtures, the goldens and the table
// cases. Beyond not panicking, what a parser accepts must be usable: a parsed
// XML node writes and reads back unchanged, a parsed matrix merges into a node
// of its GPUs, and a node Read accepts survives Write and Read.

func addFiles(f *testing.F, pattern string) {
	f.Helper()
	for _, path := range fixtures(f, pattern) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseQueryXML(f *testing.F) {
	addFiles(f, "smi/*.xml")
	for _, tt := range parseQueryXMLTests {
		f.Add([]byte(tt.xml))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseQueryXML(bytes.NewReader(b))
		if err != nil {
			return
		}
		n.Hostname = "fuzz"
		roundTrip(t, n)
	})
}

func FuzzParseTopoMatrix(f *testing.F) {
	addFiles(f, "topo/*.topo.txt")
	for _, tt := range parseTopoMatrixTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		topo, err := ParseTopoMatrix(bytes.NewReader(b))
		if err != nil {
			return
		}
		n := Node{Hostname: "fuzz", Source: SourceNvidiaSMI}
		for _, g := range topo.GPUs {
			if len(g.Peers) != len(topo.GPUs)-1 {
				t.Fatalf("GPU%d has %d peers in a matrix of %d GPUs", g.Index, len(g.Peers), len(topo.GPUs))
			}
			n.GPUs = append(n.GPUs, GPU{
				Index: g.Index, Minor: g.Index, UUID: fmt.Sprintf("GPU-%d", g.Index), Name: "NVIDIA H100", Type: "h100",
				PCIBusID: fmt.Sprintf("%04x:01:00.0", g.Index), NUMANode: -1,
			})
		}
		if err := n.Merge(topo); err != nil {
			t.Fatalf("Merge of a parsed matrix: %v", err)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("merged node does not validate: %v", err)
		}
	})
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(validJSON))
	for _, tt := range readTests {
		f.Add([]byte(tt.json))
	}
	addFiles(f, filepath.Join("golden", "smi", "*.json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		roundTrip(t, n)
	})
}

// roundTrip checks that n writes and reads back unchanged.
func roundTrip(t *testing.T, n Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, n); err != nil {
		t.Fatalf("Write of an accepted node: %v", err)
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatalf("Read of what Write wrote: %v\n%s", err, buf.String())
	}
	sortGPUs(n.GPUs)
	if n.GPUs == nil {
		n.GPUs = []GPU{}
	}
	if diff := cmp.Diff(n, back); diff != "" {
		t.Fatalf("Read(Write(n)) mismatch (-want +got):\n%s", diff)
	}
}
