package nvml

import (
	"bytes"
	"encoding/xml"
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

// addCompactXML seeds with each nvidia-smi fixture cut down to the
// elements ParseQueryXML reads (a few hundred bytes where the file is 20
// to 66 KB): the fuzzer spends its time minimising every new input it
// finds, which on a whole fixture took the full run (28 executions in 10 s)
// and left nothing explored.
func addCompactXML(f *testing.F) {
	f.Helper()
	for _, path := range fixtures(f, "smi/*.xml") {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		var log smiLog
		if err := xml.Unmarshal(b, &log); err != nil {
			f.Fatalf("%s: %v", path, err)
		}
		compact, err := xml.Marshal(log)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := ParseQueryXML(bytes.NewReader(compact)); err != nil {
			f.Fatalf("%s cut down does not parse: %v\n%s", path, err, compact)
		}
		f.Add(compact)
	}
}

func FuzzParseQueryXML(f *testing.F) {
	addCompactXML(f)
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
