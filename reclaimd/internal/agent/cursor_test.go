package agent

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// snapshotAfter reads GET /v1/snapshot?after=cursor as the controller does.
func snapshotAfter(t *testing.T, a *Agent, cursor string) Snapshot {
	t.Helper()
	resp := get(t, a.Handler(), http.MethodGet, "/v1/snapshot?after="+cursor)
	defer resp.Body.Close()
	var s Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func sampleTimes(g GPUWindow) []time.Duration {
	out := []time.Duration{}
	for _, p := range g.Samples {
		out = append(out, p.At.Sub(t0))
	}
	return out
}

// A cursor gets only the samples taken since the snapshot that gave it;
// a cursor the agent cannot answer gets the whole window, marked full.
func TestSnapshotAfterCursor(t *testing.T) {
	a, c := replayAgent(t, true) // Window 1 min, every 10 s
	round := func() {
		t.Helper()
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	for range 3 {
		round()
	}
	first := snapshotAfter(t, a, "")
	if !first.Full || first.After != "" || first.Version != SnapshotVersion || len(first.GPUs[0].Samples) != 3 || first.MaxSamples != 7 {
		t.Fatalf("first snapshot: full %v after %q version %d, %d samples, max %d", first.Full, first.After, first.Version,
			len(first.GPUs[0].Samples), first.MaxSamples)
	}
	round()
	round()
	next := snapshotAfter(t, a, first.Cursor)
	if next.Full || next.After != first.Cursor || next.Cursor == first.Cursor {
		t.Fatalf("snapshot after %q: full %v, after %q, cursor %q", first.Cursor, next.Full, next.After, next.Cursor)
	}
	for _, g := range next.GPUs {
		if got := sampleTimes(g); len(got) != 2 || got[0] != 30*time.Second || got[1] != 40*time.Second {
			t.Errorf("GPU %d after the cursor: samples at %v, want 30s and 40s", g.Index, got)
		}
	}
	if again := snapshotAfter(t, a, next.Cursor); again.Full || len(again.GPUs[0].Samples) != 0 {
		t.Errorf("nothing sampled since: full %v, %d samples", again.Full, len(again.GPUs[0].Samples))
	}

	inst, _, _ := strings.Cut(first.Cursor, ".")
	for name, cur := range map[string]string{
		"another run of the agent": "zz." + strings.SplitN(next.Cursor, ".", 2)[1],
		"a round not yet taken":    inst + ".99",
		"not a cursor":             "garbage",
		"no round":                 inst + ".x",
	} {
		s := snapshotAfter(t, a, cur)
		if !s.Full || s.After != "" || len(s.GPUs[0].Samples) != 5 {
			t.Errorf("%s (%q): full %v, after %q, %d samples; want the whole window of 5", name, cur, s.Full, s.After, len(s.GPUs[0].Samples))
		}
	}
}

// A cursor from before a GPU's window started over gets the whole window:
// the reader holds samples of the GPU that is gone.
func TestSnapshotAfterGPUReplaced(t *testing.T) {
	text := "offset_seconds,gpu,uuid,util,mem_activity,mem_used_mib\n0,0,GPU-a,1,1,1\n10,0,GPU-a,1,1,1\n20,0,GPU-b,2,2,2\n30,0,GPU-b,2,2,2\n"
	rec, err := source.ParseRecording("swap.csv", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	a, err := New(Config{Node: "n", Source: source.NewReplay(rec, t0, false), Logger: discard(), Now: c.Now, Procs: ProcFS{Root: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	var cursors []string
	for range 4 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, a.Snapshot().Cursor)
		c.Add(10 * time.Second)
	}
	if s := a.SnapshotAfter(cursors[1]); !s.Full || len(s.GPUs[0].Samples) != 2 || s.GPUs[0].UUID != "GPU-b" {
		t.Errorf("cursor from before the swap: full %v, %d samples of %s; want the whole new window", s.Full, len(s.GPUs[0].Samples), s.GPUs[0].UUID)
	}
	if s := a.SnapshotAfter(cursors[2]); s.Full || len(s.GPUs[0].Samples) != 1 {
		t.Errorf("cursor after the swap: full %v, %d samples; want the one sample since", s.Full, len(s.GPUs[0].Samples))
	}
}
