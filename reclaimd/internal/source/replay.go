package source

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Recording is a sequence of frames, each the node's GPUs at one moment,
// as ParseRecording reads them and a Recorder writes them.
type Recording struct {
	Name   string  // where it came from, for messages
	Frames []Frame // by ascending Offset, at least one
}

// Frame is the node at one moment of a Recording.
type Frame struct {
	Offset  time.Duration // since the start of the recording
	Samples []Sample      // by ascending GPU; At is zero
}

// The columns of a recording, in the order a Recorder writes them.
const (
	colOffset = iota
	colGPU
	colUUID
	colModel
	colUtil
	colMemActivity
	colSMActive
	colMemUsed
	colMemTotal
	colPCIeRx
	colPCIeTx
	colNVLinkRx
	colNVLinkTx
	colMIG
	colPIDs
	colJobs
	numColumns
)

var columnNames = [numColumns]string{
	"offset_seconds", "gpu", "uuid", "model", "util", "mem_activity", "sm_active",
	"mem_used_mib", "mem_total_mib", "pcie_rx_kbs", "pcie_tx_kbs", "nvlink_rx_kbs", "nvlink_tx_kbs",
	"mig", "pids", "jobs",
}

var requiredColumns = []int{colOffset, colGPU, colUtil, colMemActivity, colMemUsed}

// Bounds on values, so that a typo (a byte count in a MiB column, say) is an
// error rather than a GPU the size of a data centre.
const (
	maxGPUIndex   = 1023
	maxMiB        = 1 << 30 // 1 PiB
	maxKBs        = 1 << 40 // 1 EiB/s
	maxErrors     = 20      // reported per file; the rest are counted
	listSeparator = ";"
)

// ErrReplayEnded is returned (wrapped) by a Replay that does not loop once
// its recording is over.
var ErrReplayEnded = errors.New("the recording is over")

// LoadRecording reads and parses the recording at path.
func LoadRecording(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	defer f.Close()
	return ParseRecording(path, f)
}

// ParseRecording reads recorded GPU samples in this CSV format (RFC 4180 as
// encoding/csv reads it), which an admin can also write by hand:
//
//	# Two GPUs: 0 busy with job 1001, 1 idle and empty. Lines with # are comments.
//	offset_seconds,gpu,util,mem_activity,mem_used_mib,pids,jobs
//	0,0,97,41,30500,4242,1001
//	0,1,0,0,0,,
//	10,0,95,39,30500,4242,1001
//	10,1,0,0,0,,
//
// The first record is the header. It names the columns, in any order:
// offset_seconds, gpu, util, mem_activity and mem_used_mib are required;
// uuid, model, sm_active, mem_total_mib, pcie_rx_kbs, pcie_tx_kbs,
// nvlink_rx_kbs, nvlink_tx_kbs, mig, pids and jobs are optional. A Recorder
// writes them all.
//
//   - offset_seconds: decimal seconds (0, 10, 12.5) since the recording
//     started, never decreasing down the file. The rows of one offset are
//     one frame: the node at that moment, each GPU at most once.
//   - gpu: the NVML index, 0 to 1023.
//   - util, mem_activity, sm_active: percent, 0 to 100. Empty means not
//     measured (util and mem_activity on a MIG GPU, sm_active before Hopper).
//   - mem_used_mib, mem_total_mib: MiB; used is at most total when total is
//     given.
//   - pcie_rx_kbs, pcie_tx_kbs, nvlink_rx_kbs, nvlink_tx_kbs: KiB/s; empty
//     means not measured.
//   - mig: true or false (empty: false).
//   - pids, jobs: process ids and Slurm job ids, separated by ";" (empty:
//     none). The agent uses jobs as given and looks the pids up in /proc,
//     where the processes of a replayed node do not exist.
//
// Blank lines are skipped and fields are trimmed. Every bad line is reported
// (up to 20), each as "name:line: message"; name is the file's name.
func ParseRecording(name string, r io.Reader) (*Recording, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1 // checked here, with a better message
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true

	p := parser{name: name}
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: no header: the first line that is not a comment must name the columns, e.g. %s", name, strings.Join(columnsOf(requiredColumns), ","))
	}
	if err != nil {
		return nil, p.csvError(err)
	}
	line, _ := cr.FieldPos(0)
	width := len(header)
	cols, err := p.header(line, header)
	if err != nil {
		return nil, err
	}

	rec := &Recording{Name: name}
	firstLine := map[int]int{} // GPU -> line of the current frame
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.errs = append(p.errs, p.csvError(err))
			break // the reader may have lost its place
		}
		line, _ := cr.FieldPos(0)
		if len(record) != width {
			p.errorf(line, "%d fields, but the header names %d columns", len(record), width)
			continue
		}
		offset, s, err := parseRow(cols, record)
		if err != nil {
			p.errorf(line, "%v", err)
			continue
		}
		n := len(rec.Frames)
		switch {
		case n == 0 || offset > rec.Frames[n-1].Offset:
			rec.Frames = append(rec.Frames, Frame{Offset: offset})
			clear(firstLine)
		case offset < rec.Frames[n-1].Offset:
			p.errorf(line, "offset_seconds %s comes after %s: offsets must not decrease", record[cols[colOffset]], formatOffset(rec.Frames[n-1].Offset))
			continue
		}
		if l, dup := firstLine[s.GPU]; dup {
			p.errorf(line, "gpu %d appears twice at offset %s (first on line %d)", s.GPU, formatOffset(offset), l)
			continue
		}
		firstLine[s.GPU] = line
		f := &rec.Frames[len(rec.Frames)-1]
		f.Samples = append(f.Samples, s)
	}
	if len(p.errs) == 0 && len(rec.Frames) == 0 {
		return nil, fmt.Errorf("%s: no samples: the file has a header but no rows", name)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	for i := range rec.Frames {
		slices.SortFunc(rec.Frames[i].Samples, func(a, b Sample) int { return a.GPU - b.GPU })
	}
	return rec, nil
}

// parser collects the errors of one file.
type parser struct {
	name string
	errs []error
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...)))
}

func (p *parser) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d:%d: %w", p.name, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: read: %w", p.name, err)
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	errs := p.errs
	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], fmt.Errorf("%s: and %d more errors", p.name, len(p.errs)-maxErrors))
	}
	return errors.Join(errs...)
}

// header maps each column to its field index (-1: absent).
func (p *parser) header(line int, header []string) ([]int, error) {
	cols := make([]int, numColumns)
	for i := range cols {
		cols[i] = -1
	}
	for i, h := range header {
		h = strings.TrimSpace(h)
		c := slices.Index(columnNames[:], h)
		switch {
		case c < 0:
			p.errorf(line, "unknown column %q; the columns are %s", h, strings.Join(columnNames[:], ", "))
		case cols[c] >= 0:
			p.errorf(line, "column %q named twice", h)
		default:
			cols[c] = i
		}
	}
	for _, c := range requiredColumns {
		if cols[c] < 0 {
			p.errorf(line, "missing column %q; the header needs at least %s", columnNames[c], strings.Join(columnsOf(requiredColumns), ","))
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return cols, nil
}

func columnsOf(cs []int) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = columnNames[c]
	}
	return out
}

// parseRow reads one row into a Sample; the first bad field is the error.
func parseRow(cols []int, record []string) (time.Duration, Sample, error) {
	field := func(c int) (string, bool) {
		if cols[c] < 0 {
			return "", false
		}
		return strings.TrimSpace(record[cols[c]]), true
	}
	var s Sample
	offsetText, _ := field(colOffset)
	offset, err := parseOffset(offsetText)
	if err != nil {
		return 0, Sample{}, err
	}
	gpuText, _ := field(colGPU)
	gpu, err := strconv.Atoi(gpuText)
	if err != nil || gpu < 0 || gpu > maxGPUIndex {
		return 0, Sample{}, fmt.Errorf("gpu %q: want an index from 0 to %d", gpuText, maxGPUIndex)
	}
	s.GPU = gpu
	for _, c := range []int{colUUID, colModel} {
		v, _ := field(c)
		if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
			return 0, Sample{}, fmt.Errorf("%s %q: control character at byte %d", columnNames[c], v, i)
		}
	}
	s.UUID, _ = field(colUUID)
	s.Model, _ = field(colModel)

	optional := []struct {
		col int
		max float64
		dst **float64
	}{
		{colUtil, 100, &s.UtilPercent},
		{colMemActivity, 100, &s.MemActivityPercent},
		{colSMActive, 100, &s.SMActivePercent},
		{colPCIeRx, maxKBs, &s.PCIeRxKBs},
		{colPCIeTx, maxKBs, &s.PCIeTxKBs},
		{colNVLinkRx, maxKBs, &s.NVLinkRxKBs},
		{colNVLinkTx, maxKBs, &s.NVLinkTxKBs},
	}
	for _, o := range optional {
		v, _ := field(o.col)
		if v == "" {
			continue
		}
		f, err := parseNumber(columnNames[o.col], v, o.max)
		if err != nil {
			return 0, Sample{}, err
		}
		*o.dst = &f
	}
	for _, m := range []struct {
		col int
		dst *float64
	}{{colMemUsed, &s.MemUsedMiB}, {colMemTotal, &s.MemTotalMiB}} {
		v, present := field(m.col)
		if !present || (v == "" && m.col == colMemTotal) {
			continue
		}
		f, err := parseNumber(columnNames[m.col], v, maxMiB)
		if err != nil {
			return 0, Sample{}, err
		}
		*m.dst = f
	}
	if s.MemTotalMiB > 0 && s.MemUsedMiB > s.MemTotalMiB {
		return 0, Sample{}, fmt.Errorf("mem_used_mib %s exceeds mem_total_mib %s", formatNumber(s.MemUsedMiB), formatNumber(s.MemTotalMiB))
	}
	if v, _ := field(colMIG); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return 0, Sample{}, fmt.Errorf("mig %q: want true or false", v)
		}
		s.MIG = b
	}
	v, _ := field(colPIDs)
	ids, err := parseIDs("pids", v)
	if err != nil {
		return 0, Sample{}, err
	}
	for _, id := range ids {
		s.PIDs = append(s.PIDs, int(id))
	}
	v, _ = field(colJobs)
	if s.JobIDs, err = parseIDs("jobs", v); err != nil {
		return 0, Sample{}, err
	}
	return offset, s, nil
}

func parseOffset(v string) (time.Duration, error) {
	bad := func() error {
		return fmt.Errorf("offset_seconds %q: want decimal seconds since the start, such as 0, 10 or 12.5", v)
	}
	if v == "" || strings.ContainsAny(v, "+-hmsuµn") {
		return 0, bad()
	}
	d, err := time.ParseDuration(v + "s")
	if err != nil || d < 0 {
		return 0, bad()
	}
	return d, nil
}

func parseNumber(name, v string, limit float64) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > limit {
		return 0, fmt.Errorf("%s %q: want a number from 0 to %s", name, v, formatNumber(limit))
	}
	return f, nil
}

// parseIDs reads ";"-separated positive ids into a sorted, distinct list;
// nil when v is empty.
func parseIDs(name, v string) ([]int64, error) {
	if v == "" {
		return nil, nil
	}
	var out []int64
	for part := range strings.SplitSeq(v, listSeparator) {
		part = strings.TrimSpace(part)
		id, err := strconv.ParseUint(part, 10, 32)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%s %q: want positive integers separated by %q", name, v, listSeparator)
		}
		out = append(out, int64(id))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Replay is a source that plays a Recording back relative to a start time:
// at now, it returns the last frame whose offset is at most now - start
// (the first frame before that), stamped now.
//
// The recording lasts until its last offset plus the step before it (a
// single frame lasts for ever). After that a looping Replay starts again
// from offset 0, and one that does not loop fails with ErrReplayEnded.
type Replay struct {
	rec    *Recording
	loop   bool
	length time.Duration // 0: for ever

	mu    sync.Mutex
	start time.Time
}

// NewReplay returns a source that plays rec back from start; a zero start
// means the time of the first Sample call.
func NewReplay(rec *Recording, start time.Time, loop bool) *Replay {
	r := &Replay{rec: rec, loop: loop, start: start}
	if n := len(rec.Frames); n >= 2 {
		last := rec.Frames[n-1].Offset
		r.length = last + (last - rec.Frames[n-2].Offset)
	}
	return r
}

// Sample returns the frame due at now.
func (r *Replay) Sample(ctx context.Context, now time.Time) ([]Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay %s: %w", r.rec.Name, err)
	}
	if len(r.rec.Frames) == 0 {
		return nil, fmt.Errorf("replay %s: the recording has no frames", r.rec.Name)
	}
	r.mu.Lock()
	if r.start.IsZero() {
		r.start = now
	}
	elapsed := now.Sub(r.start)
	r.mu.Unlock()

	if r.length > 0 && elapsed >= r.length {
		if !r.loop {
			return nil, fmt.Errorf("replay %s: %s after the start, past its end at %s: %w",
				r.rec.Name, elapsed, r.length, ErrReplayEnded)
		}
		elapsed %= r.length
	}
	frames := r.rec.Frames
	i := sort.Search(len(frames), func(i int) bool { return frames[i].Offset > elapsed }) - 1
	if i < 0 {
		i = 0
	}
	out := make([]Sample, len(frames[i].Samples))
	for k, s := range frames[i].Samples {
		out[k] = s.Clone()
		out[k].At = now
	}
	return out, nil
}
