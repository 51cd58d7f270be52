package decide

import (
	"math"
	"slices"
	"sort"
)

// msTime is the unit of a narrow times' offsets.
const msTime = int64(1e6)

// times is a window's reduced sample times (Unix ns, ascending), the most
// of what a window keeps: 4 bytes each (an offset in milliseconds from
// base) while every time is a whole millisecond less than 49 days from
// the first, as the sources stamp them (Prometheus's steps; the agents
// stamp their samples to the millisecond); 8 bytes each otherwise (wide),
// from the first time that is not. Either way it answers with the times
// themselves, so a window reads the same in both.
type times struct {
	ms   []uint32 // narrow: each time's offset from base, in ms
	base int64
	ns   []int64 // wide: the times
	wide bool
}

// Len is the number of times.
func (ts *times) Len() int {
	if ts.wide {
		return len(ts.ns)
	}
	return len(ts.ms)
}

// At is the i-th time.
func (ts *times) At(i int) int64 {
	if ts.wide {
		return ts.ns[i]
	}
	return ts.base + int64(ts.ms[i])*msTime
}

// Last is the newest time; Len must be above 0.
func (ts *times) Last() int64 { return ts.At(ts.Len() - 1) }

// After is the index of the first time after t (Len when none is).
func (ts *times) After(t int64) int {
	return sort.Search(ts.Len(), func(i int) bool { return ts.At(i) > t })
}

// AtOrAfter is the index of the first time at or after t.
func (ts *times) AtOrAfter(t int64) int {
	return sort.Search(ts.Len(), func(i int) bool { return ts.At(i) >= t })
}

// offset is t's narrow offset from base, when t has one.
func (ts *times) offset(t int64) (uint32, bool) {
	d := t - ts.base
	if d < 0 || d%msTime != 0 || d/msTime > math.MaxUint32 {
		return 0, false
	}
	return uint32(d / msTime), true
}

// Insert puts t at index i (the times stay ascending: the caller finds
// i), in room kept for the samples to come (spareTimes).
func (ts *times) Insert(i int, t int64) {
	if !ts.wide && len(ts.ms) == 0 && t%msTime == 0 {
		ts.base = t
	}
	if !ts.wide {
		off, ok := ts.offset(t)
		if !ok && ts.rebase(t) {
			off, ok = ts.offset(t)
		}
		if !ok {
			ts.widen()
		} else {
			if len(ts.ms) == cap(ts.ms) {
				ts.ms = slices.Grow(ts.ms, 1+spareTimes(len(ts.ms)))
			}
			ts.ms = slices.Insert(ts.ms, i, off)
			return
		}
	}
	if len(ts.ns) == cap(ts.ns) {
		ts.ns = slices.Grow(ts.ns, 1+spareTimes(len(ts.ns)))
	}
	ts.ns = slices.Insert(ts.ns, i, t)
}

// rebase moves base to the oldest of t and the times, when every offset
// then fits: a time before base (a late sample), or one past 49 days of
// base in a window that slid that far. It reports whether it did.
func (ts *times) rebase(t int64) bool {
	if t%msTime != 0 || ts.base%msTime != 0 {
		return false
	}
	lo, hi := t, t
	if n := len(ts.ms); n > 0 {
		lo, hi = min(t, ts.At(0)), max(t, ts.At(n-1))
	}
	if (hi-lo)/msTime > math.MaxUint32 {
		return false
	}
	shift := (ts.base - lo) / msTime // may be negative: base moves later
	for j := range ts.ms {
		ts.ms[j] = uint32(int64(ts.ms[j]) + shift)
	}
	ts.base = lo
	return true
}

// widen turns the times into 8 bytes each, for good.
func (ts *times) widen() {
	ns := make([]int64, len(ts.ms), cap(ts.ms))
	for i := range ts.ms {
		ns[i] = ts.At(i)
	}
	ts.ns, ts.ms, ts.wide = ns, nil, true
}

// Grow makes room for n more times and the cycles' after them.
func (ts *times) Grow(n int) {
	extra := n + spareTimes(ts.Len()+n)
	if ts.wide {
		ts.ns = slices.Grow(ts.ns, extra)
	} else {
		ts.ms = slices.Grow(ts.ms, extra)
	}
}

// DropFront drops the first i times, moving the others down in place so
// that the array's room is kept for the samples to come, unless the times
// shrank to under half of it.
func (ts *times) DropFront(i int) {
	if i <= 0 {
		return
	}
	if ts.wide {
		ts.ns = ts.ns[:copy(ts.ns, ts.ns[i:])]
		if cap(ts.ns) > 2*len(ts.ns)+64 {
			ts.ns = append(make([]int64, 0, len(ts.ns)+spareTimes(len(ts.ns))), ts.ns...)
		}
		return
	}
	ts.ms = ts.ms[:copy(ts.ms, ts.ms[i:])]
	if cap(ts.ms) > 2*len(ts.ms)+64 {
		ts.ms = append(make([]uint32, 0, len(ts.ms)+spareTimes(len(ts.ms))), ts.ms...)
	}
}

// Bytes is the memory the times' array holds.
func (ts *times) Bytes() int { return 8*cap(ts.ns) + 4*cap(ts.ms) }

// Equal says whether both hold the same times.
func (ts *times) Equal(o *times) bool {
	if ts.Len() != o.Len() {
		return false
	}
	for i := range ts.Len() {
		if ts.At(i) != o.At(i) {
			return false
		}
	}
	return true
}

// set takes ascending times read back (DecodeWindow), narrow when they
// all fit, with the room spareTimes gives.
func (ts *times) set(v []int64) {
	*ts = times{}
	if len(v) == 0 {
		return
	}
	size := len(v) + spareTimes(len(v))
	ts.base = v[0]
	narrow := v[0]%msTime == 0
	for _, t := range v {
		if _, ok := ts.offset(t); !ok {
			narrow = false
			break
		}
	}
	if !narrow {
		ts.ns, ts.wide = append(make([]int64, 0, size), v...), true
		return
	}
	ts.ms = make([]uint32, len(v), size)
	for i, t := range v {
		ts.ms[i] = uint32((t - ts.base) / msTime)
	}
}

// all returns the times (a copy), for tests and the encoding.
func (ts *times) all() []int64 {
	out := make([]int64, ts.Len())
	for i := range out {
		out[i] = ts.At(i)
	}
	return out
}
