package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// failingSource fails every sample, as NVML does for a GPU that fell off
// the bus.
type failingSource struct{}

func (failingSource) Sample(context.Context, time.Time) ([]source.Sample, error) {
	return nil, errors.New("get utilisation of GPU 3: GPU is lost")
}

// Faults injected through a fault file beside the replay reach the
// snapshot once per cursor, in a whole snapshot while kept, and even in a
// round whose sample failed.
func TestAgentFaults(t *testing.T) {
	rec, err := source.LoadRecording(twoGPUs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "faults.csv")
	c := &clock{t: t0}
	a, err := New(Config{Node: "gpu03", Source: source.NewReplay(rec, t0, true), Faults: &source.FaultFile{Path: path},
		MaxFaults: 2, Window: time.Minute, Procs: ProcFS{Root: t.TempDir()}, Logger: discard(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	round := func() {
		t.Helper()
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	inject := func(lines string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(lines); err != nil {
			t.Fatal(err)
		}
	}
	round()
	first := snapshotAfter(t, a, "")
	if len(first.Faults) != 0 {
		t.Fatalf("faults before any: %v", first.Faults)
	}
	inject("3,xid,79\n")
	round() // at t0+10s
	next := snapshotAfter(t, a, first.Cursor)
	want := []FaultEvent{{At: t0.Add(10 * time.Second), GPU: 3, Kind: "xid", Code: 79}}
	if diff := cmp.Diff(want, next.Faults); diff != "" {
		t.Errorf("faults after the cursor (-want +got):\n%s", diff)
	}
	round()
	if again := snapshotAfter(t, a, next.Cursor); len(again.Faults) != 0 {
		t.Errorf("the same fault after the next cursor: %v", again.Faults)
	}
	if whole := snapshotAfter(t, a, ""); len(whole.Faults) != 1 {
		t.Errorf("whole snapshot: %v, want the fault kept", whole.Faults)
	}

	// A failed sample still reports the round's faults, after the cursor.
	before := snapshotAfter(t, a, next.Cursor)
	a.cfg.Source = failingSource{}
	inject("1,ecc_uncorrectable\n2,row_remap_failure\n")
	if err := a.SampleOnce(t.Context()); err == nil {
		t.Fatal("the failing source did not fail")
	}
	after := snapshotAfter(t, a, before.Cursor)
	at := c.Now()
	want = []FaultEvent{{At: at, GPU: 1, Kind: "ecc_uncorrectable"}, {At: at, GPU: 2, Kind: "row_remap_failure"}}
	if diff := cmp.Diff(want, after.Faults); diff != "" {
		t.Errorf("faults of a failed round (-want +got):\n%s", diff)
	}
	// MaxFaults 2: the Xid is dropped.
	if diff := cmp.Diff(want, snapshotAfter(t, a, "").Faults); diff != "" {
		t.Errorf("kept faults (-want +got):\n%s", diff)
	}
}
