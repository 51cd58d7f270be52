package collect

import (
	"bytes"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// heldSeed is a node state of each collector: two GPUs' windows, holders
// nil, empty and with jobs.
func heldSeed() (agents, prom []byte) {
	base := time.Unix(1795983272, 0).UTC()
	w := &decide.Window{}
	w.SetInterval(10 * time.Second)
	for i := range 60 {
		w.Add(decide.Sample{At: base.Add(time.Duration(i) * 10 * time.Second), UtilPercent: float64(i % 4), MemActivityPercent: 1, MemUsedMiB: 512})
	}
	gpus := map[int]*decide.Window{0: w, 3: w}
	holders := map[int][]int64{0: {41, 42}, 3: {}, 5: nil}
	a := &Agents{held: map[string]*heldNode{"n": {cursor: "i.7", gpus: gpus, holders: holders, unattributed: map[int]int{3: 2},
		taken: base.Add(10 * time.Minute), keeps: time.Hour}}}
	p := &Prometheus{state: &promState{held: map[string]*promNode{"n": {last: base.Add(10 * time.Minute).UnixMilli(), gpus: gpus,
		holders: holders, seen: &nodeSeen{util: true, fb: true, badGPU: "x"}}}}}
	return a.Held(nil)["n"], p.Held(nil)["n"]
}

// FuzzDecodeHeld: whatever the bytes, a node state is refused or reads
// back into one that writes the same bytes again.
func FuzzDecodeHeld(f *testing.F) {
	a, p := heldSeed()
	f.Add(a, false)
	f.Add(p, true)
	f.Add([]byte{1, 3, 'i', '.', '7'}, false)
	f.Fuzz(func(t *testing.T, b []byte, prom bool) {
		var again []byte
		if prom {
			h, err := decodePromNode(b)
			if err != nil {
				return
			}
			again = (&Prometheus{state: &promState{held: map[string]*promNode{"n": h}}}).Held(nil)["n"]
			h2, err := decodePromNode(again)
			if err != nil {
				t.Fatalf("%x read back as %x, which is refused: %v", b, again, err)
			}
			if third := (&Prometheus{state: &promState{held: map[string]*promNode{"n": h2}}}).Held(nil)["n"]; !bytes.Equal(third, again) {
				t.Fatalf("%x does not read back the same", again)
			}
			return
		}
		h, err := decodeAgentNode(b)
		if err != nil {
			return
		}
		again = (&Agents{held: map[string]*heldNode{"n": h}}).Held(nil)["n"]
		h2, err := decodeAgentNode(again)
		if err != nil {
			if len(h.gpus) == 0 {
				return // a node without windows is not kept
			}
			t.Fatalf("%x read back as %x, which is refused: %v", b, again, err)
		}
		if third := (&Agents{held: map[string]*heldNode{"n": h2}}).Held(nil)["n"]; !bytes.Equal(third, again) {
			t.Fatalf("%x does not read back the same", again)
		}
	})
}

// TestResumeRefuses: a state is resumed only while it is younger than its
// window (Prometheus's: and its last step not after the clock's), and
// only when it reads whole; what is
// refused leaves the node to be read whole.
func TestResumeRefuses(t *testing.T) {
	a, p := heldSeed()
	taken := time.Unix(1795983272, 0).UTC().Add(10 * time.Minute)
	for _, tc := range []struct {
		name string
		b    []byte
		now  time.Time
		want int
	}{
		{"fresh", a, taken.Add(time.Minute), 1},
		{"older than its window", a, taken.Add(time.Hour), 0},
		{"an agent's clock ahead", a, taken.Add(-time.Second), 1},
		{"cut short", a[:len(a)-1], taken.Add(time.Minute), 0},
		{"another release", append([]byte{2}, a[1:]...), taken.Add(time.Minute), 0},
	} {
		if got := (&Agents{}).Resume(map[string][]byte{"n": tc.b}, tc.now); got != tc.want {
			t.Errorf("agents, %s: %d resumed, want %d", tc.name, got, tc.want)
		}
	}
	win := &Prometheus{Window: time.Hour, Step: 30 * time.Second}
	for _, tc := range []struct {
		name string
		b    []byte
		now  time.Time
		want int
	}{
		{"fresh", p, taken.Add(time.Minute), 1},
		{"its last step before the window", p, taken.Add(time.Hour + time.Minute), 0},
		{"from the future", p, taken.Add(-time.Minute), 0},
		{"cut short", p[:len(p)-2], taken.Add(time.Minute), 0},
	} {
		if got := (&Prometheus{Window: win.Window, Step: win.Step}).Resume(map[string][]byte{"n": tc.b}, tc.now); got != tc.want {
			t.Errorf("prometheus, %s: %d resumed, want %d", tc.name, got, tc.want)
		}
	}
}
