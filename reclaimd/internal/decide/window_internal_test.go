package decide

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// windowSeries makes a GPU's samples of one shape, every step with a
// jitter, some lost: constant, noisy, rising, falling (the worst case of
// a monotone queue), bursts and NaN.
func windowSeries(rng *rand.Rand, start time.Time, n int, step time.Duration, loc *time.Location) []Sample {
	shape := rng.IntN(5)
	// Half the series are stamped to the millisecond, as the sources
	// stamp them (the window keeps those times in 4 bytes each).
	whole := rng.IntN(2) == 0
	out := make([]Sample, 0, n)
	at := start.UnixNano()
	for i := range n {
		at += int64(step) + rng.Int64N(int64(step)/5) - int64(step)/10
		if rng.IntN(30) == 0 {
			at += int64(step) * int64(1+rng.IntN(5)) // a gap
		}
		if whole {
			at -= at % int64(time.Millisecond)
		}
		var u, m, used float64
		switch shape {
		case 0:
			u, m, used = 0, 0.3, 2048
		case 1:
			u, m, used = rng.Float64()*100, rng.Float64()*50, float64(rng.IntN(80000))
		case 2:
			u, m, used = float64(i%100), float64(i%50)/3, float64(1000+i)
		case 3:
			u, m, used = 100-float64(i%100), 50-float64(i%50)/3, float64(80000-i)
		case 4:
			u, m, used = 0, 0, 100
			if rng.IntN(20) == 0 {
				u, m = 90, 40
			}
		}
		switch rng.IntN(200) {
		case 0:
			u = math.NaN()
		case 1:
			m = math.NaN()
		case 2:
			used = math.NaN()
		case 3:
			u = math.Copysign(0, -1)
		}
		out = append(out, Sample{At: time.Unix(0, at).In(loc), UtilPercent: u, MemActivityPercent: m, MemUsedMiB: used})
	}
	return out
}

// TestWindowStatsAsSamples: a Window fed a GPU's samples in pieces of any
// size, some late, some read again with new values (a source's last step
// again), and trimmed as sources trim, answers every window (from, now]
// exactly as the samples themselves do: the count, the time covered, the
// newest, the three maxima (NaN included) and the NaN verdict, at the
// interval it was told and at another.
func TestWindowStatsAsSamples(t *testing.T) {
	opts := []cmp.Option{cmp.AllowUnexported(stats{}), cmpopts.EquateNaNs()}
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 29))
		step := 10 * time.Second
		loc := []*time.Location{time.UTC, time.Local}[seed%2]
		start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
		all := windowSeries(rng, start, 50+rng.IntN(700), step, loc)
		var w Window
		if seed%3 != 0 {
			w.SetInterval(step)
		}
		var want []Sample // what a source that keeps whole samples holds
		for i := 0; i < len(all); {
			n := min(len(all)-i, 1+rng.IntN(80))
			piece := slices.Clone(all[i : i+n])
			i += n
			if len(piece) > 2 && rng.IntN(4) == 0 {
				// Late: the piece's newest sample comes first.
				piece = append(piece[len(piece)-1:], piece[:len(piece)-1]...)
			}
			w.Add(piece...)
			want = append(want, piece...)
			slices.SortStableFunc(want, func(a, b Sample) int { return a.At.Compare(b.At) })
			if rng.IntN(3) == 0 && len(want) > 0 {
				// The newest sample read again, with another value.
				again := want[len(want)-1]
				again.UtilPercent = rng.Float64() * 100
				w.Add(again)
				want[len(want)-1] = again
			}
			if rng.IntN(5) == 0 && len(want) > 10 {
				cut := want[rng.IntN(len(want)/2)].At.Add(time.Duration(rng.IntN(2)))
				w.DropBefore(cut)
				want = slices.DeleteFunc(want, func(s Sample) bool { return s.At.Before(cut) })
			}
			if rng.IntN(6) == 0 && len(want) > 3 {
				// A source that reads its newest steps again drops them first.
				k := len(want) - 1 - rng.IntN(min(len(want), WindowTail+3))
				cut := want[k].At
				if ok := w.DropFrom(cut); ok != (k >= w.at.Len()) { // only the tail can go
					t.Fatalf("seed %d: DropFrom the %dth newest sample: %v", seed, len(want)-k, ok)
				} else if ok {
					want = want[:k]
				}
			}
			if rng.IntN(6) == 0 && len(want) > 3 {
				// A source that keeps at most n samples.
				n := 1 + rng.IntN(len(want)-1)
				w.KeepNewest(n)
				want = want[len(want)-n:]
			}
			if w.Len() != len(want) {
				t.Fatalf("seed %d: the window holds %d samples, the source %d", seed, w.Len(), len(want))
			}
			// The newest samples, whole: WindowTail of them, fewer after
			// DropFrom until new ones come.
			before, recent := w.Recent()
			if len(recent) > WindowTail || len(recent) > len(want) {
				t.Fatalf("seed %d: %d recent samples of %d", seed, len(recent), len(want))
			}
			k := len(want) - len(recent)
			if d := cmp.Diff(want[k:], recent, cmpopts.EquateNaNs(), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("seed %d: recent samples (-want +got):\n%s", seed, d)
			}
			if k > 0 {
				if !before.Equal(want[k-1].At) {
					t.Fatalf("seed %d: before the recent samples %s, want %s", seed, before, want[k-1].At)
				}
			} else if !before.IsZero() {
				t.Fatalf("seed %d: before the recent samples %s, want none", seed, before)
			}
			if len(want) > 0 && !w.Newest().Equal(want[len(want)-1].At) {
				t.Fatalf("seed %d: newest %s, want %s", seed, w.Newest(), want[len(want)-1].At)
			}
			for range 20 {
				if len(want) == 0 {
					break
				}
				newest := want[len(want)-1].At
				// now: mostly after every sample; sometimes before the
				// newest few, as a source's clock ahead would have it.
				now := newest.Add(time.Duration(rng.Int64N(int64(3 * step))))
				if rng.IntN(4) == 0 && len(recent) > 0 {
					now = want[len(want)-1-rng.IntN(len(recent))].At.Add(-time.Duration(rng.IntN(2)))
				}
				if !w.Exact(now) {
					t.Fatalf("seed %d: not exact at %s with %d samples after it", seed, now, countAfter(want, now))
				}
				from := want[rng.IntN(len(want))].At.Add(time.Duration(rng.Int64N(int64(2*step)) - int64(step)))
				if rng.IntN(10) == 0 {
					from = want[0].At.Add(-time.Hour)
				}
				for _, iv := range []int64{int64(step), int64(step) / 2} {
					got, exp := w.stats(from, now.UnixNano(), iv), statsOf(want, from, now.UnixNano(), iv)
					if d := cmp.Diff(exp, got, opts...); d != "" {
						t.Fatalf("seed %d, window (%s, %s], interval %s (-samples +window):\n%s", seed, from, now, time.Duration(iv), d)
					}
				}
			}
		}
	}
}

func countAfter(ss []Sample, t time.Time) int {
	n := 0
	for _, s := range ss {
		if s.At.After(t) {
			n++
		}
	}
	return n
}

// TestWindowNotExact: a now older than samples beyond the tail is one the
// window cannot answer, and says so; Decide then reads the GPU as stale.
func TestWindowNotExact(t *testing.T) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var w Window
	for i := range WindowTail + 5 {
		w.Add(Sample{At: start.Add(time.Duration(i) * 10 * time.Second)})
	}
	newest := start.Add(time.Duration(WindowTail+4) * 10 * time.Second)
	for now, want := range map[time.Time]bool{
		newest: true,
		newest.Add(-time.Duration(WindowTail-1) * 10 * time.Second): true,  // the oldest of the tail is after it: still whole
		newest.Add(-time.Duration(WindowTail) * 10 * time.Second):   true,  // the newest reduced sample, at now
		newest.Add(-time.Duration(WindowTail)*10*time.Second - 1):   false, // a reduced sample after now
	} {
		if got := w.Exact(now); got != want {
			t.Errorf("Exact(newest - %s) = %v, want %v", newest.Sub(now), got, want)
		}
	}
}

// TestWindowKeepsLittle: a window keeps a sample's time and little else
// for the GPUs reclaim is about (idle, or busy and noisy), against the 48
// bytes of a whole Sample, which it keeps only for its tail and, in the
// worst case, a value that only falls.
func TestWindowKeepsLittle(t *testing.T) {
	const n = 720 // two hours of 10 s samples
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		value    func(i int, rng *rand.Rand) float64
		maxBytes int
	}{
		// A time of 8 bytes, the arrays' room to grow, and the tail.
		"idle":  {func(int, *rand.Rand) float64 { return 0 }, 14 * n},
		"noisy": {func(_ int, rng *rand.Rand) float64 { return rng.Float64() * 100 }, 14 * n},
		// Every sample the maximum of a window that ends at the newest:
		// each queue holds each, 16 bytes a value, more than a Sample.
		"falling": {func(i int, _ *rand.Rand) float64 { return float64(n - i) }, 72 * n},
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var w Window
			w.SetInterval(10 * time.Second)
			for i := range n {
				v := tc.value(i, rng)
				w.Add(Sample{At: start.Add(time.Duration(i) * 10 * time.Second), UtilPercent: v, MemActivityPercent: v / 2, MemUsedMiB: v * 100})
			}
			if got := w.Bytes(); got > tc.maxBytes {
				t.Errorf("%d samples kept in %d bytes (%.1f a sample), want at most %d", n, got, float64(got)/n, tc.maxBytes)
			} else {
				t.Logf("%d samples kept in %d bytes (%.1f a sample; a Sample is 48)", n, got, float64(got)/n)
			}
		})
	}
}

// TestWindowSlidesInPlace: a two-hour window, read whole or read back
// after a restart, slides cycle after cycle (a few new samples, as many
// old ones dropped) in the array it was given: never moved into a larger
// one, which at 8,000 GPUs would hold both arrays of every GPU at once
// in the first cycle after a restart.
func TestWindowSlidesInPlace(t *testing.T) {
	const n, step = 720, 10 * time.Second
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	series := windowSeries(rng, start, n+300, step, time.UTC)
	for i := range series {
		series[i].At = series[i].At.Truncate(time.Millisecond)
	}
	whole := func() *Window {
		w := &Window{}
		w.SetInterval(step)
		w.Grow(n)
		w.Add(series[:n]...)
		return w
	}
	readBack := func() *Window {
		w, rest, err := DecodeWindow(whole().AppendBinary(nil))
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode: %v, %d bytes left", err, len(rest))
		}
		return w
	}
	for name, w := range map[string]*Window{"read whole": whole(), "read back": readBack()} {
		t.Run(name, func(t *testing.T) {
			// Two hours of 10 s samples stamped to the millisecond: 4
			// bytes a time.
			if w.at.wide {
				t.Fatalf("times of whole milliseconds kept 8 bytes each")
			}
			base, size := &w.at.ms[0], cap(w.at.ms)
			if size > n+n/8+WindowTail {
				t.Errorf("%d samples' times in an array of %d", w.at.Len(), size)
			}
			for c := range 100 { // cycles of 3 samples
				next := series[n+3*c : n+3*c+3]
				w.Add(next...)
				w.DropBefore(series[3*c+3].At)
				if &w.at.ms[0] != base || cap(w.at.ms) != size {
					t.Fatalf("cycle %d: the times moved to another array (capacity %d, was %d)", c, cap(w.at.ms), size)
				}
			}
			if got, want := w.Len(), n; got < want-3 || got > want+3 {
				t.Errorf("%d samples after sliding, want about %d", got, want)
			}
		})
	}
}

// TestWindowEncodingWhole: a window read back holds every field as it was
// written, the gaps and their interval included (Equal compares only what
// Decide reads through them), for windows fed in and out of order.
func TestWindowEncodingWhole(t *testing.T) {
	base := time.Unix(1795983272, 0).UTC()
	for _, tc := range []struct {
		name string
		at   []time.Duration // sample times after base
		step time.Duration
	}{
		{"empty", nil, 0},
		{"steady", steadyTimes(400, 10*time.Second), 10 * time.Second},
		{"jittered and late", []time.Duration{0, 10*time.Second + 3, 20*time.Second - 7, 95 * time.Second, 40 * time.Second,
			105 * time.Second, 106 * time.Second, 200 * time.Second}, 10 * time.Second},
		{"no interval", steadyTimes(40, 30*time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Window{}
			if tc.step > 0 {
				w.SetInterval(tc.step)
			}
			for i, d := range tc.at {
				v := float64(i % 7)
				switch i % 5 {
				case 1:
					v = math.NaN()
				case 2:
					v = 0.25 + float64(i)
				case 3:
					v = math.Copysign(0, -1)
				}
				w.Add(Sample{At: base.Add(d), UtilPercent: v, MemActivityPercent: float64(i % 3), MemUsedMiB: 1e17 + float64(i)})
			}
			got, rest, err := DecodeWindow(w.AppendBinary(nil))
			if err != nil || len(rest) != 0 {
				t.Fatalf("decode: %v, %d bytes left", err, len(rest))
			}
			same := func(a, b *Window) bool {
				return a.Equal(b) && slices.Equal(a.gaps, b.gaps) && a.gapStep == b.gapStep && a.Len() == b.Len()
			}
			if !same(w, got) {
				t.Fatalf("read back:\n%+v\nwritten:\n%+v", got, w)
			}
			// And it goes on as the window it was written from.
			next := Sample{At: base.Add(time.Hour), UtilPercent: 3}
			for range WindowTail + 2 {
				w.Add(next)
				got.Add(next)
				next.At = next.At.Add(10 * time.Second)
			}
			if !same(w, got) {
				t.Fatal("fed on, the window read back differs")
			}
		})
	}
}

func steadyTimes(n int, step time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * step
	}
	return out
}

// FuzzDecodeWindow: whatever the bytes, DecodeWindow returns an error or
// a window that writes back to the bytes it read.
func FuzzDecodeWindow(f *testing.F) {
	w := &Window{}
	w.SetInterval(10 * time.Second)
	base := time.Unix(1795983272, 0).UTC()
	for i := range 40 {
		w.Add(Sample{At: base.Add(time.Duration(i) * 10 * time.Second), UtilPercent: float64(i % 9), MemActivityPercent: 0.5})
	}
	f.Add(w.AppendBinary(nil))
	f.Add((&Window{}).AppendBinary(nil))
	f.Add([]byte{1, 0, 0, 5, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, rest, err := DecodeWindow(b)
		if err != nil {
			return
		}
		again := got.AppendBinary(nil)
		if back, _, err := DecodeWindow(again); err != nil || !back.Equal(got) {
			t.Fatalf("a window read from %x does not read back: %v", b, err)
		}
		_ = rest
	})
}
