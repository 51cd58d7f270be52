package decide

import (
	"math"
	"slices"
	"sort"
	"time"
)

// WindowTail is how many of a GPU's newest samples a Window keeps whole:
// those can still be replaced (a source that reads its last step again
// when a scrape lands late) or be newer than a decision's now (a source's
// clock ahead of the controller's), which the reduced part cannot answer.
const WindowTail = 16

// Window is one GPU's samples reduced to what Decide reads of them, so
// that a controller can keep a whole window of every GPU without keeping
// every sample: for each sample only its time (4 bytes where it is a
// whole millisecond, else 8: see times; for the counts and the
// coverage), and of the values only those that are the maximum
// of some window ending at the newest sample (a monotone queue per value:
// one entry for a GPU whose value never rises, a few for a noisy one),
// the gaps longer than the sample interval and the samples without a
// value (NaN), both rare. The newest WindowTail samples are kept whole.
//
// Samples go in with Add, in any number of pieces, oldest first or not:
// a window read in pieces answers as the whole window would. Decide gives
// the same verdict and the same evidence from a Window as from the same
// samples in Snapshot.Samples, for every window (from, now] whose now is
// at or after every sample but the newest WindowTail (Decide reads the
// GPU as stale otherwise: see [Window.Exact]).
//
// The zero Window is empty and ready for use. A Window is not safe for
// concurrent use.
type Window struct {
	loc *time.Location // the samples' location, for Newest

	// The reduced part: every sample older than the tail.
	at   times // each sample's time (Unix ns), ascending: 4 bytes each where it can
	max  [3]maxQueue
	nan  [3][]int64 // times of the samples whose value is NaN, ascending
	gaps []gap      // between consecutive samples further apart than gapStep
	// gapStep is the interval gaps were measured against (0: not yet).
	gapStep int64

	tail []Sample // the newest samples, whole, ascending
}

// gap is a time between consecutive reduced samples longer than the
// sample interval: at is the later sample's time, over the excess.
type gap struct{ at, over int64 }

// maxQueue holds the samples that are the maximum of some window ending
// at the newest one: values strictly decreasing as times increase.
type maxQueue struct {
	at []int64
	v  []float64
}

// value returns one of a sample's three values: 0 utilisation, 1 memory
// activity, 2 memory used.
func value(s *Sample, k int) float64 {
	switch k {
	case 0:
		return s.UtilPercent
	case 1:
		return s.MemActivityPercent
	}
	return s.MemUsedMiB
}

// Add puts samples into the window. A sample at the time of one in the
// tail replaces it (a source that read a step again); one older than the
// tail goes into the reduced part in its place, as a sample of a sorted
// window would.
func (w *Window) Add(samples ...Sample) {
	for _, s := range samples {
		w.loc = s.At.Location()
		i := len(w.tail) // in time order, the common case
		if i > 0 && !w.tail[i-1].At.Before(s.At) {
			i = sort.Search(len(w.tail), func(i int) bool { return !w.tail[i].At.Before(s.At) })
		}
		switch {
		case i < len(w.tail) && w.tail[i].At.Equal(s.At):
			w.tail[i] = s
		case i == 0 && w.at.Len() > 0 && s.At.UnixNano() < w.at.Last():
			w.reduce(s) // older than the tail: a late sample
		default:
			if w.tail == nil {
				w.tail = make([]Sample, 0, WindowTail+1)
			}
			w.tail = slices.Insert(w.tail, i, s)
		}
		if len(w.tail) > WindowTail {
			// The oldest of the tail is reduced; the others move down in
			// place, so that the tail's array is never outgrown.
			w.reduce(w.tail[0])
			n := copy(w.tail, w.tail[1:])
			w.tail = w.tail[:n]
		}
	}
}

// Grow makes room for n more samples, so that a whole window read at once
// is held in arrays of its size (grown by doubling, they would have
// allocated twice it, and kept up to half of it unused), with spare room
// for the samples of the cycles after (spareTimes).
func (w *Window) Grow(n int) {
	if n > WindowTail {
		w.at.Grow(n - WindowTail)
	}
}

// spareTimes is the room a window of n sample times is given beyond them,
// for the samples of the cycles to come: a window slides (DropBefore moves
// its times down in their array), so an array with a few cycles' room is
// never outgrown while the window keeps its length. Without it, the first
// sample after a window was read whole, or read back after a restart, would
// move every GPU's times into an array half as large again, and at 8,000
// GPUs hold both at once.
func spareTimes(n int) int { return n/16 + WindowTail }

// reduce moves s into the reduced part.
func (w *Window) reduce(s Sample) {
	t := s.At.UnixNano()
	// After every sample at its time, as a stable sort would place it.
	i := w.at.Len()
	if i > 0 && w.at.At(i-1) > t {
		i = w.at.After(t)
	}
	w.at.Insert(i, t)
	for k := range w.max {
		v := value(&s, k)
		if math.IsNaN(v) {
			j := sort.Search(len(w.nan[k]), func(j int) bool { return w.nan[k][j] > t })
			w.nan[k] = slices.Insert(w.nan[k], j, t)
			continue
		}
		w.max[k].put(t, v)
	}
	if w.gapStep > 0 {
		if i == w.at.Len()-1 {
			if prev := w.at.At(max(i-1, 0)); i > 0 && t-prev > w.gapStep {
				w.gaps = append(w.gaps, gap{at: t, over: t - prev - w.gapStep})
			}
		} else {
			w.measureGaps(w.gapStep) // out of order: rare
		}
	}
}

// put adds a sample's value at time t: it drops the samples before t that
// it is at least as high as, and is dropped itself when a sample after t
// is at least as high.
func (q *maxQueue) put(t int64, v float64) {
	j := len(q.at)
	if j > 0 && q.at[j-1] > t {
		j = sort.Search(len(q.at), func(j int) bool { return q.at[j] > t })
	}
	if j < len(q.at) && q.v[j] >= v {
		return
	}
	i := j
	for i > 0 && q.v[i-1] <= v {
		i--
	}
	q.at = slices.Replace(q.at, i, j, t)
	q.v = slices.Replace(q.v, i, j, v)
}

// over returns the maximum of the values at times in (from, to], and
// false when there is none. The queue holds no sample after to (the
// caller checks), so the first one after from is that maximum.
func (q *maxQueue) over(from, to int64) (float64, bool) {
	j := sort.Search(len(q.at), func(j int) bool { return q.at[j] > from })
	if j == len(q.at) || q.at[j] > to {
		return 0, false
	}
	return q.v[j], true
}

// DropBefore drops the samples taken before t, as a source drops those
// older than its window.
func (w *Window) DropBefore(t time.Time) {
	n := t.UnixNano()
	i := w.at.AtOrAfter(n)
	if i > 0 {
		// Moved down in place: the array's room is kept for the samples
		// to come (spareTimes), unless the window shrank to under half.
		w.at.DropFront(i)
		for k := range w.max {
			q := &w.max[k]
			j := sort.Search(len(q.at), func(j int) bool { return q.at[j] >= n })
			q.at, q.v = q.at[j:], q.v[j:]
			j = sort.Search(len(w.nan[k]), func(j int) bool { return w.nan[k][j] >= n })
			w.nan[k] = w.nan[k][j:]
		}
		j := sort.Search(len(w.gaps), func(j int) bool { return w.gaps[j].at >= n })
		w.gaps = w.gaps[j:]
		// A gap is between two kept samples: the first kept one's is not.
		if len(w.gaps) > 0 && w.at.Len() > 0 && w.gaps[0].at == w.at.At(0) {
			w.gaps = w.gaps[1:]
		}
	}
	j := sort.Search(len(w.tail), func(j int) bool { return !w.tail[j].At.Before(t) })
	w.tail = w.tail[j:]
}

// Len is the number of samples in the window.
func (w *Window) Len() int { return w.at.Len() + len(w.tail) }

// Bytes is about what the window holds in memory, its arrays' capacity.
func (w *Window) Bytes() int {
	n := w.at.Bytes() + 16*cap(w.gaps) + 48*cap(w.tail)
	for k := range w.max {
		n += 8*cap(w.max[k].at) + 8*cap(w.max[k].v) + 8*cap(w.nan[k])
	}
	return n
}

// Exact says whether the window answers for now as its whole samples
// would: every sample after now is in the tail.
func (w *Window) Exact(now time.Time) bool {
	return w.at.Len() == 0 || w.at.Last() <= now.UnixNano()
}

// SetInterval gives the interval the source samples at: the window then
// keeps the gaps longer than it, and answers Decide at that interval
// without reading every sample's time. (At another interval it reads
// them.)
func (w *Window) SetInterval(d time.Duration) {
	if int64(d) != w.gapStep {
		w.measureGaps(int64(d))
	}
}

// measureGaps finds the gaps longer than step between reduced samples.
func (w *Window) measureGaps(step int64) {
	w.gaps = w.gaps[:0]
	for i := 1; i < w.at.Len(); i++ {
		if d := w.at.At(i) - w.at.At(i-1); d > step {
			w.gaps = append(w.gaps, gap{at: w.at.At(i), over: d - step})
		}
	}
	w.gapStep = step
}

// stats is what Decide reads of one GPU's samples in a window (from, end]:
// their number, the time they cover (each at most step before it), the
// newest, the maxima, and whether a utilisation or memory activity was
// NaN.
type stats struct {
	n                   int
	covered             int64
	newest              time.Time
	maxU, maxM, maxUsed float64
	invalid             bool
}

// statsOf reads samples (sorted by time) as Decide always has.
func statsOf(samples []Sample, from time.Time, end, step int64) stats {
	var st stats
	// A sample describes the interval before it, so one taken at from
	// belongs to the time before the window (at a job's start: to the
	// GPU's previous job).
	i := sort.Search(len(samples), func(i int) bool { return samples[i].At.After(from) })
	// Integer nanoseconds: time.Time's Sub costs more, and this is the
	// inner loop of the whole cycle.
	prev, newest := from.UnixNano(), -1
	for ; i < len(samples); i++ {
		s := &samples[i]
		at := s.At.UnixNano()
		if at > end {
			break
		}
		st.covered += min(at-prev, step)
		prev, newest = at, i
		st.n++
		if math.IsNaN(s.UtilPercent) || math.IsNaN(s.MemActivityPercent) {
			st.invalid = true
		}
		st.maxU = max(st.maxU, s.UtilPercent)
		st.maxM = max(st.maxM, s.MemActivityPercent)
		st.maxUsed = max(st.maxUsed, s.MemUsedMiB)
	}
	if newest >= 0 {
		st.newest = samples[newest].At
	}
	return st
}

// stats reads the window as statsOf reads its samples; w.Exact(end) must
// hold. It changes nothing, so that Decide stays a pure function.
func (w *Window) stats(from time.Time, end, step int64) stats {
	var st stats
	f := from.UnixNano()
	lo := w.at.After(f)
	hi := w.at.Len() // every reduced sample is at or before end
	prev := f
	if lo < hi {
		first, last := w.at.At(lo), w.at.At(hi-1)
		st.n = hi - lo
		// Between consecutive samples each gap counts in full up to one
		// step: their sum is the span from the first to the last, less
		// what the long gaps have over a step.
		st.covered = min(first-f, step) + last - first
		if w.gapStep == step {
			g := sort.Search(len(w.gaps), func(g int) bool { return w.gaps[g].at > first })
			for ; g < len(w.gaps) && w.gaps[g].at <= last; g++ {
				st.covered -= w.gaps[g].over
			}
		} else {
			for i := lo + 1; i < hi; i++ {
				if d := w.at.At(i) - w.at.At(i-1); d > step {
					st.covered -= d - step
				}
			}
		}
		prev = last
		st.newest = time.Unix(0, last).In(w.loc)
		vals := [3]*float64{&st.maxU, &st.maxM, &st.maxUsed}
		for k := range w.max {
			if v, ok := w.max[k].over(f, last); ok {
				*vals[k] = max(0, v)
			}
			j := sort.Search(len(w.nan[k]), func(j int) bool { return w.nan[k][j] > f })
			if j < len(w.nan[k]) && w.nan[k][j] <= last {
				*vals[k] = math.NaN()
				st.invalid = st.invalid || k < 2
			}
		}
	}
	for i := range w.tail {
		s := &w.tail[i]
		at := s.At.UnixNano()
		if at <= f {
			continue
		}
		if at > end {
			break
		}
		st.covered += min(at-prev, step)
		prev = at
		st.n++
		if math.IsNaN(s.UtilPercent) || math.IsNaN(s.MemActivityPercent) {
			st.invalid = true
		}
		st.maxU = max(st.maxU, s.UtilPercent)
		st.maxM = max(st.maxM, s.MemActivityPercent)
		st.maxUsed = max(st.maxUsed, s.MemUsedMiB)
		st.newest = s.At
	}
	return st
}

// Newest is the time of the newest sample (zero when there is none).
func (w *Window) Newest() time.Time {
	if n := len(w.tail); n > 0 {
		return w.tail[n-1].At
	}
	if w.at.Len() > 0 {
		return time.Unix(0, w.at.Last()).In(w.loc)
	}
	return time.Time{}
}

// KeepNewest drops the oldest samples beyond the newest n, as a source
// that keeps at most n samples does (samples taken at the same instant
// go or stay together).
func (w *Window) KeepNewest(n int) {
	extra := w.Len() - n
	switch {
	case extra <= 0:
		return
	case extra < w.at.Len():
		w.DropBefore(time.Unix(0, w.at.At(extra)).In(w.loc))
	case extra-w.at.Len() < len(w.tail):
		w.DropBefore(w.tail[extra-w.at.Len()].At)
	default:
		w.DropBefore(w.Newest().Add(1))
	}
}

// Recent returns the whole samples the window keeps (its newest, at most
// WindowTail) and the time of the sample before the first of them (zero
// when there is none): for what is counted of each new sample as it
// comes, such as the time it shows idle.
func (w *Window) Recent() (before time.Time, tail []Sample) {
	if w.at.Len() > 0 {
		before = time.Unix(0, w.at.Last()).In(w.loc)
	}
	return before, w.tail
}

// Equal says whether two windows hold the same samples, as far as Decide
// reads them (go-cmp uses it).
func (w *Window) Equal(o *Window) bool {
	if w == nil || o == nil {
		return w == o
	}
	same := func(a, b []float64) bool {
		return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
	}
	for k := range w.max {
		if !slices.Equal(w.max[k].at, o.max[k].at) || !same(w.max[k].v, o.max[k].v) || !slices.Equal(w.nan[k], o.nan[k]) {
			return false
		}
	}
	return w.at.Equal(&o.at) && w.Newest().Equal(o.Newest()) && slices.EqualFunc(w.tail, o.tail, func(x, y Sample) bool {
		return x.At.Equal(y.At) && same([]float64{x.UtilPercent, x.MemActivityPercent, x.MemUsedMiB}, []float64{y.UtilPercent, y.MemActivityPercent, y.MemUsedMiB})
	})
}

// DropFrom drops the samples taken at t or after, as a source that reads
// its newest steps again drops what it held of them. Only the tail can
// be dropped from: it returns false, and drops nothing, when a reduced
// sample is at t or after (more than WindowTail samples to drop).
func (w *Window) DropFrom(t time.Time) bool {
	if w.at.Len() > 0 && w.at.Last() >= t.UnixNano() {
		return false
	}
	j := sort.Search(len(w.tail), func(j int) bool { return !w.tail[j].At.Before(t) })
	w.tail = w.tail[:j]
	return true
}
