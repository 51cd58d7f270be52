//go:build gpu

// Tests on a real NVIDIA machine: go test -tags gpu ./topogen/internal/discover/nvml/
// They need the driver (libnvidia-ml.so.1); the nvidia-smi cross-checks run
// where nvidia-smi is on PATH.

package nvml

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

func collectReal(t *testing.T) Node {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	n, err := Collect(t.Context(), gonvml.New(), host, time.Now())
	if err != nil {
		t.Fatalf("Collect on this machine: %v", err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, n); err != nil {
		t.Fatalf("Write: %v", err)
	}
	t.Logf("collected:\n%s", buf.String())
	return n
}

func TestCollectRealGPUs(t *testing.T) {
	n := collectReal(t)
	if len(n.GPUs) == 0 {
		t.Fatal("NVML sees no GPU")
	}
	if n.Driver == "" || n.CUDA == "" {
		t.Errorf("driver %q, CUDA %q: want both", n.Driver, n.CUDA)
	}
	minors := map[int]bool{}
	for _, g := range n.GPUs {
		if !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %d: UUID %q does not start with GPU-", g.Index, g.UUID)
		}
		if g.Type == "" || g.Type != GRESType(g.Name) {
			t.Errorf("GPU %d: type %q from name %q", g.Index, g.Type, g.Name)
		}
		if g.Minor < 0 || minors[g.Minor] {
			t.Errorf("GPU %d: minor %d unknown or repeated", g.Index, g.Minor)
		}
		minors[g.Minor] = true
		if _, err := os.Stat(fmt.Sprintf("/dev/nvidia%d", g.Minor)); err != nil {
			t.Errorf("GPU %d: %v", g.Index, err)
		}
		if g.MemoryMiB <= 0 {
			t.Errorf("GPU %d: memory %d MiB", g.Index, g.MemoryMiB)
		}
	}
}

// TestNvidiaSMIAgreesWithNVML parses the same machine's nvidia-smi output
// and compares it with what NVML says.
func TestNvidiaSMIAgreesWithNVML(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("nvidia-smi is not on PATH")
	}
	n := collectReal(t)
	xml, err := exec.CommandContext(t.Context(), "nvidia-smi", "-q", "-x").Output()
	if err != nil {
		t.Fatalf("nvidia-smi -q -x: %v", err)
	}
	smi, err := ParseQueryXML(bytes.NewReader(xml))
	if err != nil {
		t.Fatalf("ParseQueryXML: %v", err)
	}
	matrix, err := exec.CommandContext(t.Context(), "nvidia-smi", "topo", "-m").Output()
	if err != nil {
		t.Fatalf("nvidia-smi topo -m: %v", err)
	}
	t.Logf("nvidia-smi topo -m:\n%s", matrix)
	topo, err := ParseTopoMatrix(bytes.NewReader(matrix))
	if err != nil {
		t.Fatalf("ParseTopoMatrix: %v", err)
	}
	if err := smi.Merge(topo); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if len(smi.GPUs) != len(n.GPUs) {
		t.Fatalf("nvidia-smi lists %d GPUs, NVML %d", len(smi.GPUs), len(n.GPUs))
	}
	if smi.Driver != n.Driver {
		t.Errorf("driver: nvidia-smi %q, NVML %q", smi.Driver, n.Driver)
	}
	for i, s := range smi.GPUs {
		g := n.GPUs[i]
		if s.Index != g.Index || s.Minor != g.Minor || s.UUID != g.UUID || s.PCIBusID != g.PCIBusID ||
			s.Name != g.Name || s.MIG != g.MIG {
			t.Errorf("GPU %d: nvidia-smi %+v\nNVML %+v", i, s, g)
		}
		if s.CPUAffinity != "" && s.CPUAffinity != g.CPUAffinity {
			t.Errorf("GPU %d: CPU affinity nvidia-smi %q, NVML %q", g.Index, s.CPUAffinity, g.CPUAffinity)
		}
		if s.NUMANode >= 0 && s.NUMANode != g.NUMANode {
			t.Errorf("GPU %d: NUMA node nvidia-smi %d, NVML %d", g.Index, s.NUMANode, g.NUMANode)
		}
		// NVSwitch systems differ by design (pairs in the matrix, peer -1
		// in NVML), so the links are logged, not compared.
		t.Logf("GPU %d NVLinks: nvidia-smi %v, NVML %v; fabric %+v", g.Index, s.NVLinks, g.NVLinks, g.Fabric)
	}
}
