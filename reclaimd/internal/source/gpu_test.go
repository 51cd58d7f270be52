//go:build gpu

// Tests on a real NVIDIA machine: go test -tags gpu ./reclaimd/internal/source/
// They need the driver (libnvidia-ml.so.1); the nvidia-smi cross-check runs
// where nvidia-smi is on PATH.

package source

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestNVMLRealGPUs(t *testing.T) {
	src, err := NewNVML(gonvml.New())
	if err != nil {
		t.Fatalf("NewNVML on this machine: %v", err)
	}
	defer func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}()
	var buf bytes.Buffer
	rec := NewRecorder(&buf, time.Time{})
	var samples []Sample
	for k := range 2 { // the second sample has the delta metrics
		if k > 0 {
			time.Sleep(time.Second)
		}
		samples, err = src.Sample(t.Context(), time.Now())
		if err != nil {
			t.Fatalf("Sample() #%d: %v", k, err)
		}
		if err := rec.Record(samples); err != nil {
			t.Fatalf("Record() = %v", err)
		}
	}
	if len(samples) == 0 {
		t.Fatal("NVML sees no GPU")
	}
	for i, s := range samples {
		t.Logf("GPU %d: %s %s util %v mem activity %v SM active %v mem %.0f/%.0f MiB PCIe %v/%v NVLink %v/%v MIG %v pids %v",
			s.GPU, s.UUID, s.Model, deref(s.UtilPercent), deref(s.MemActivityPercent), deref(s.SMActivePercent),
			s.MemUsedMiB, s.MemTotalMiB, deref(s.PCIeRxKBs), deref(s.PCIeTxKBs), deref(s.NVLinkRxKBs), deref(s.NVLinkTxKBs),
			s.MIG, s.PIDs)
		if s.GPU != i || !strings.HasPrefix(s.UUID, "GPU-") || s.Model == "" {
			t.Errorf("GPU %d: index %d, UUID %q, model %q", i, s.GPU, s.UUID, s.Model)
		}
		if s.MemTotalMiB <= 0 || s.MemUsedMiB < 0 || s.MemUsedMiB > s.MemTotalMiB {
			t.Errorf("GPU %d: memory %v of %v MiB", i, s.MemUsedMiB, s.MemTotalMiB)
		}
		if s.MIG != (s.UtilPercent == nil) || s.MIG != (s.MemActivityPercent == nil) {
			t.Errorf("GPU %d: MIG %v but utilisation %v, memory activity %v", i, s.MIG, s.UtilPercent, s.MemActivityPercent)
		}
		for name, p := range map[string]*float64{"util": s.UtilPercent, "mem_activity": s.MemActivityPercent, "sm_active": s.SMActivePercent} {
			if p != nil && (*p < 0 || *p > 100) {
				t.Errorf("GPU %d: %s %v out of 0-100", i, name, *p)
			}
		}
		if !slices.IsSorted(s.PIDs) {
			t.Errorf("GPU %d: pids %v not sorted", i, s.PIDs)
		}
	}
	back, err := ParseRecording("real", &buf)
	if err != nil {
		t.Fatalf("a recording of this machine does not parse: %v\n%s", err, buf.String())
	}
	if len(back.Frames) != 2 || len(back.Frames[1].Samples) != len(samples) {
		t.Errorf("recording read back: %d frames", len(back.Frames))
	}

	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Log("nvidia-smi is not on PATH: no cross-check")
		return
	}
	out, err := exec.CommandContext(t.Context(), "nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits").Output()
	if err != nil {
		t.Fatalf("nvidia-smi: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(samples) {
		t.Fatalf("nvidia-smi lists %d GPUs, NVML %d", len(lines), len(samples))
	}
	for i, line := range lines {
		fields := strings.Split(line, ", ")
		if len(fields) < 2 || fields[1] != samples[i].UUID {
			t.Errorf("GPU %d: nvidia-smi %q, NVML UUID %s", i, line, samples[i].UUID)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return "n/a"
	}
	return *p
}

// TestNVMLFaultsRealGPUs registers every GPU for fault events and reads
// the event state: no error, and whatever stands (retired pages pending,
// a failed row remap) or arrives is of a GPU NVML counts.
func TestNVMLFaultsRealGPUs(t *testing.T) {
	src, err := NewNVML(gonvml.New())
	if err != nil {
		t.Fatalf("NewNVML on this machine: %v", err)
	}
	defer src.Close()
	count, ret := src.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		t.Fatal(ret)
	}
	for k := range 2 {
		faults, err := src.Faults(t.Context(), time.Now())
		if err != nil {
			t.Fatalf("Faults() #%d: %v", k, err)
		}
		for _, f := range faults {
			t.Logf("fault: GPU %d %s %s code %d", f.GPU, f.UUID, f.Kind, f.Code)
			if f.GPU < 0 || f.GPU >= count || !f.Kind.Known() {
				t.Errorf("fault %+v: not of one of the %d GPUs", f, count)
			}
		}
		if k == 1 && len(faults) > 0 {
			t.Errorf("second call reported %d faults again: a standing fault is reported once", len(faults))
		}
	}
	t.Logf("%d GPUs registered, event set %v", len(src.watch.registered), src.watch.set != nil)
	if len(src.watch.registered) != count {
		t.Errorf("%d of %d GPUs registered", len(src.watch.registered), count)
	}
}
