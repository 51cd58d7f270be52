package decide_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// windowsOf feeds each GPU's samples into a Window in pieces of random
// size, as a source read in pieces would; some windows are told the
// interval, some not.
func windowsOf(rng *rand.Rand, samples map[decide.GPUKey][]decide.Sample) map[decide.GPUKey]*decide.Window {
	out := make(map[decide.GPUKey]*decide.Window, len(samples))
	for g, ss := range samples {
		w := &decide.Window{}
		if rng.IntN(2) == 0 {
			w.SetInterval(interval)
		}
		for i := 0; i < len(ss); {
			n := min(len(ss)-i, 1+rng.IntN(40))
			w.Add(ss[i : i+n]...)
			i += n
		}
		out[g] = w
	}
	return out
}

// TestDecideFromWindows: Decide reaches the same decision, evidence and
// texts included, from GPUs' Windows as from their whole samples, over
// cycles of every kind (randomCycle: gaps, stale and future samples, NaN,
// bursts, every phase, rules of any shape), with every GPU's window given
// as a Window or only some of them.
func TestDecideFromWindows(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 0x29))
		s, n, r := randomCycle(rng)
		want := decide.Decide(s, n, r)

		w := s
		w.Windows = windowsOf(rng, s.Samples)
		if seed%2 == 0 {
			w.Samples = nil
		} else { // some GPUs from their windows, the others from samples
			for g := range w.Windows {
				if rng.IntN(2) == 0 {
					delete(w.Windows, g)
				}
			}
		}
		if d := cmp.Diff(want, decide.Decide(w, n, r), cmpopts.EquateNaNs()); d != "" {
			t.Fatalf("seed %d: (-from samples +from windows):\n%s", seed, d)
		}
		// The same windows written and read back, as a controller that
		// restarts reads them from its store.
		w.Windows = restored(t, w.Windows)
		if d := cmp.Diff(want, decide.Decide(w, n, r), cmpopts.EquateNaNs()); d != "" {
			t.Fatalf("seed %d: (-from samples +from windows read back):\n%s", seed, d)
		}
	}
}

// restored writes each window (all into one buffer, as a node's are
// kept) and reads it back, failing unless each reads back equal.
func restored(t *testing.T, ws map[decide.GPUKey]*decide.Window) map[decide.GPUKey]*decide.Window {
	t.Helper()
	keys := make([]decide.GPUKey, 0, len(ws))
	var b []byte
	for g, w := range ws {
		keys = append(keys, g)
		b = w.AppendBinary(b)
	}
	out := make(map[decide.GPUKey]*decide.Window, len(ws))
	for _, g := range keys {
		w, rest, err := decide.DecodeWindow(b)
		if err != nil {
			t.Fatalf("%v: %v", g, err)
		}
		if !w.Equal(ws[g]) {
			t.Fatalf("%v: read back another window", g)
		}
		out[g], b = w, rest
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left over", len(b))
	}
	return out
}

// TestDecideFromWindowsOverCycles: a controller that streams each
// cycle's new samples into its windows and drops what falls out of the
// source's window decides, cycle after cycle, exactly as one that keeps
// the whole samples: the same actions, skips, states and evidence, each
// cycle's states carried to the next.
func TestDecideFromWindowsOverCycles(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 0x2929))
		s, end, r := randomCycle(rng)
		all := s.Samples
		const cycles = 40
		windows := map[decide.GPUKey]*decide.Window{}
		for g := range all {
			windows[g] = &decide.Window{}
			windows[g].SetInterval(interval)
		}
		fed := map[decide.GPUKey]int{}
		states := s.States
		for c := range cycles {
			now := end.Add(-time.Duration(cycles-1-c) * interval)
			keep := now.Add(-90 * time.Minute) // the source's window
			held := map[decide.GPUKey][]decide.Sample{}
			for g, ss := range all {
				// What the source has by now: a sample up to one interval
				// ahead of this clock (a clock ahead), none older than its
				// window.
				i := fed[g]
				for i < len(ss) && !ss[i].At.After(now.Add(interval)) {
					i++
				}
				windows[g].Add(ss[fed[g]:i]...)
				fed[g] = i
				windows[g].DropBefore(keep)
				for _, x := range ss[:i] {
					if !x.At.Before(keep) {
						held[g] = append(held[g], x)
					}
				}
			}
			a, b := s, s
			a.Taken, b.Taken = now, now
			a.States, b.States = states, states
			a.Samples = held
			b.Samples, b.Windows = nil, windows
			want := decide.Decide(a, now, r)
			if d := cmp.Diff(want, decide.Decide(b, now, r), cmpopts.EquateNaNs()); d != "" {
				t.Fatalf("seed %d, cycle %d: (-from samples +from windows):\n%s", seed, c, d)
			}
			if c%10 == 9 {
				// A restart: the windows read back from what was written
				// of them, and fed on from there.
				windows = restored(t, windows)
			}
			states = want.States
		}
	}
}
