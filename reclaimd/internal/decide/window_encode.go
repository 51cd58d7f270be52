package decide

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// windowEncoding is the version of AppendBinary's format; a window
// written in another is refused by DecodeWindow, never guessed at.
const windowEncoding = 1

// AppendBinary appends the window, as Decide reads it, to b in a compact
// form, for a controller that keeps its windows across a restart: the
// sample times as runs of equal differences (a source sampling at a
// steady interval writes a few bytes a window, not 8 a sample), values
// that are whole numbers as varints. DecodeWindow reads it back into a
// window equal to w (Equal), with the same gaps and interval.
func (w *Window) AppendBinary(b []byte) []byte {
	b = append(b, windowEncoding)
	utc := byte(0)
	if w.loc == time.Local {
		utc = 1 // Prometheus's times: time.UnixMilli is in Local
	}
	b = append(b, utc)
	b = binary.AppendVarint(b, w.gapStep)
	b = appendTimesOf(b, w.at.Len(), w.at.At)
	for k := range w.max {
		b = appendTimes(b, w.max[k].at)
		for _, v := range w.max[k].v {
			b = appendValue(b, v)
		}
		b = appendTimes(b, w.nan[k])
	}
	b = appendTimesOf(b, len(w.tail), func(i int) int64 { return w.tail[i].At.UnixNano() })
	for i := range w.tail {
		s := &w.tail[i]
		b = appendValue(b, s.UtilPercent)
		b = appendValue(b, s.MemActivityPercent)
		b = appendValue(b, s.MemUsedMiB)
	}
	return b
}

// appendTimes writes ascending times: their number, the first, and the
// differences between the next ones as runs of (difference change, run
// length), so that a steady interval is one run.
func appendTimes(b []byte, ts []int64) []byte {
	return appendTimesOf(b, len(ts), func(i int) int64 { return ts[i] })
}

// appendTimesOf is appendTimes of the n times t(0), t(1), ...
func appendTimesOf(b []byte, n int, t func(int) int64) []byte {
	b = binary.AppendUvarint(b, uint64(n))
	if n == 0 {
		return b
	}
	b = binary.AppendVarint(b, t(0))
	var prev int64 // the previous difference
	for i := 1; i < n; {
		d := t(i) - t(i-1)
		j := i + 1
		for j < n && t(j)-t(j-1) == d {
			j++
		}
		b = binary.AppendVarint(b, d-prev)
		b = binary.AppendUvarint(b, uint64(j-i))
		prev, i = d, j
	}
	return b
}

// appendValue writes a whole number of at most 2^50 as an even varint
// (twice its zigzag), anything else as 1 and its 8 bytes.
func appendValue(b []byte, v float64) []byte {
	if i := int64(v); float64(i) == v && math.Abs(v) < 1<<50 && !(v == 0 && math.Signbit(v)) {
		return binary.AppendUvarint(b, zigzag(i)<<1)
	}
	b = binary.AppendUvarint(b, 1)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

func zigzag(i int64) uint64 { return uint64(i<<1) ^ uint64(i>>63) }

// timesScratch holds the arrays a window's times are read into before
// they are kept (4 bytes each where they can be: see times), so that
// reading back thousands of windows does not leave an array of each.
var timesScratch = sync.Pool{New: func() any { return new([]int64) }}

// windowReader reads AppendBinary's format; the first error sticks.
type windowReader struct {
	b   []byte
	err error
}

var errShort = errors.New("cut short")

func (r *windowReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *windowReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

// maxTimes bounds the times of one list read back: a corrupt length
// allocates no more than it (runs of equal differences let a few bytes
// stand for many times, so the bytes left bound nothing).
const maxTimes = 1 << 20

// times reads ascending times into an array of their number.
func (r *windowReader) times() []int64 { return r.timesInto(nil) }

// timesInto reads ascending times, appended to buf[:0] (a scratch array
// the caller keeps from window to window, or nil).
func (r *windowReader) timesInto(buf []int64) []int64 {
	n64 := r.uvarint()
	if r.err == nil && n64 > maxTimes {
		r.err = fmt.Errorf("%d times, more than %d", n64, maxTimes)
	}
	n := int(n64)
	if n == 0 || r.err != nil {
		return nil
	}
	ts := slices.Grow(buf[:0], n)
	ts = append(ts, r.varint())
	var d int64
	for len(ts) < n && r.err == nil {
		d += r.varint()
		run := r.uvarint()
		if r.err == nil && (run == 0 || run > uint64(n-len(ts))) {
			r.err = fmt.Errorf("a run of %d times where %d are left", run, n-len(ts))
		}
		if r.err == nil && d < 0 {
			r.err = errors.New("times out of order")
		}
		for range run {
			next := ts[len(ts)-1] + d
			if r.err != nil || next < ts[len(ts)-1] {
				r.err = cmpErr(r.err, errors.New("times out of range"))
				break
			}
			ts = append(ts, next)
		}
	}
	if r.err != nil {
		return nil
	}
	return ts
}

func (r *windowReader) value() float64 {
	u := r.uvarint()
	if r.err != nil {
		return 0
	}
	if u&1 == 0 {
		z := u >> 1
		return float64(int64(z>>1) ^ -int64(z&1))
	}
	if u != 1 || len(r.b) < 8 {
		r.err = errShort
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// DecodeWindow reads a window that AppendBinary wrote at the start of b
// and returns it with the rest of b. A window it cannot read whole (cut
// short, another format, times out of order) is an error: its reader
// starts that GPU over.
func DecodeWindow(b []byte) (*Window, []byte, error) {
	if len(b) < 2 || b[0] != windowEncoding || b[1] > 1 {
		return nil, b, fmt.Errorf("window: not format %d", windowEncoding)
	}
	w := &Window{loc: time.UTC}
	if b[1] == 1 {
		w.loc = time.Local
	}
	r := &windowReader{b: b[2:]}
	if w.gapStep = r.varint(); w.gapStep < 0 {
		r.err = errors.New("a negative interval")
	}
	buf := timesScratch.Get().(*[]int64)
	*buf = r.timesInto((*buf)[:0])
	w.at.set(*buf)
	timesScratch.Put(buf)
	for k := range w.max {
		w.max[k].at = r.times()
		if n := len(w.max[k].at); n > 0 {
			w.max[k].v = make([]float64, n)
			for i := range w.max[k].v {
				w.max[k].v[i] = r.value()
			}
		}
		w.nan[k] = r.times()
	}
	if ts := r.times(); len(ts) > 0 {
		w.tail = make([]Sample, len(ts), max(len(ts), WindowTail+1))
		for i, t := range ts {
			w.tail[i] = Sample{At: time.Unix(0, t).In(w.loc), UtilPercent: r.value(), MemActivityPercent: r.value(), MemUsedMiB: r.value()}
		}
		if len(ts) > WindowTail {
			r.err = fmt.Errorf("a tail of %d samples, more than %d", len(ts), WindowTail)
		}
		if w.at.Len() > 0 && r.err == nil && ts[0] < w.at.Last() {
			r.err = errors.New("tail older than the reduced samples")
		}
	}
	if r.err == nil {
		r.err = w.check()
	}
	if r.err == nil && w.gapStep > 0 {
		// The gaps follow from the times (a sampling clock's jitter makes
		// one of every other sample: written, they were most of it).
		w.measureGaps(w.gapStep)
	}
	if r.err != nil {
		return nil, r.b, fmt.Errorf("window: %w", r.err)
	}
	return w, r.b, nil
}

func cmpErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

// check holds a window read back to what Add makes, so that no corrupt
// window is judged: each queue's times rising and values falling, the
// tail's times rising.
func (w *Window) check() error {
	for k := range w.max {
		q := &w.max[k]
		for i := 1; i < len(q.at); i++ {
			if q.at[i] <= q.at[i-1] || !(q.v[i] < q.v[i-1]) {
				return errors.New("a maximum queue out of order")
			}
		}
		if slices.ContainsFunc(q.v, math.IsNaN) {
			return errors.New("a NaN in a maximum queue")
		}
	}
	for i := 1; i < len(w.tail); i++ {
		if !w.tail[i].At.After(w.tail[i-1].At) {
			return errors.New("the newest samples out of order")
		}
	}
	return nil
}
