package decide

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestTimes: the times a window keeps answer as the plain array of the
// same times would, through inserts in order and out of it (late
// samples), drops from the front and read-backs: narrow (4 bytes a time)
// while every time is a whole millisecond within 49 days of the first,
// moved to a new base for a late sample or a window that slid past 49
// days, and wide from the first time that is not.
func TestTimes(t *testing.T) {
	const ms = int64(time.Millisecond)
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).UnixNano()
	for name, tc := range map[string]struct {
		next     func(rng *rand.Rand, last int64) int64
		wantWide bool
		keep     int // at most this many times (a window's length), 0 for no limit
	}{
		"whole milliseconds": {func(rng *rand.Rand, last int64) int64 { return last + 10_000*ms + rng.Int64N(20)*ms }, false, 0},
		"late samples": {func(rng *rand.Rand, last int64) int64 {
			if rng.IntN(10) == 0 {
				return last - rng.Int64N(600_000)*ms // before some, or all, of the others
			}
			return last + 10_000*ms
		}, false, 0},
		// 150 times 6 hours apart: a window of 37 days that slides on for years.
		"a window that slides past 49 days": {func(rng *rand.Rand, last int64) int64 { return last + 6*3600_000*ms }, false, 150},
		"nanoseconds":                       {func(rng *rand.Rand, last int64) int64 { return last + 10_000*ms + rng.Int64N(ms) }, true, 0},
		"one nanosecond late in": {func(rng *rand.Rand, last int64) int64 {
			if last > start+4000*10_000*ms {
				return last + 10_000*ms + 1
			}
			return last + 10_000*ms
		}, true, 0},
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			var ts times
			var want []int64
			last := start
			for step := range 6000 {
				tm := tc.next(rng, last)
				last = max(last, tm)
				i, _ := slices.BinarySearch(want, tm+1) // after every time at tm, as reduce places it
				want = slices.Insert(want, i, tm)
				if j := ts.After(tm); j != i {
					t.Fatalf("step %d: After(%d) = %d, want %d", step, tm, j, i)
				}
				ts.Insert(i, tm)
				if tc.keep > 0 && len(want) > tc.keep {
					ts.DropFront(len(want) - tc.keep)
					want = want[len(want)-tc.keep:]
				}
				if rng.IntN(50) == 0 && len(want) > 10 {
					k := rng.IntN(len(want) / 2)
					want = want[k:]
					ts.DropFront(k)
				}
				if rng.IntN(500) == 0 {
					var back times
					back.set(ts.all())
					ts = back
				}
				if ts.Len() != len(want) || (step%97 == 0 && !slices.Equal(ts.all(), want)) {
					t.Fatalf("step %d: times %v, want %v", step, ts.all(), want)
				}
			}
			if !slices.Equal(ts.all(), want) {
				t.Fatalf("times differ from the plain array's")
			}
			if g := ts.AtOrAfter(want[len(want)/2]); want[g] != want[len(want)/2] || (g > 0 && want[g-1] == want[g]) {
				t.Errorf("AtOrAfter(%d) = %d", want[len(want)/2], g)
			}
			if ts.wide != tc.wantWide {
				t.Errorf("wide = %v, want %v (4 bytes a time only for whole milliseconds)", ts.wide, tc.wantWide)
			}
			if !tc.wantWide && ts.Bytes() > 4*(len(want)+spareTimes(len(want)))*2+256 {
				t.Errorf("%d times in %d bytes", len(want), ts.Bytes())
			}
		})
	}
}
