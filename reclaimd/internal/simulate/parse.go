package simulate

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Bounds on values, so that a typo is an error rather than a GPU the size
// of a data centre or a trace that would take a century to simulate.
const (
	maxErrors   = 20   // reported per file; the rest are counted
	maxGPUIndex = 1023 // as reclaimd's agent
	maxMiB      = 1 << 30
	// maxUnix is 9999-12-31T23:59:59Z, the last time RFC 3339 can write.
	maxUnix = 253402300799
)

// The columns of the jobs file.
var (
	jobColumns         = []string{"job_id", "user", "account", "tenant", "class", "qos", "partition", "start", "end", "gpus"}
	requiredJobColumns = []string{"job_id", "start", "end", "gpus"}
)

// The columns of the samples file.
var (
	sampleColumns         = []string{"time", "node", "gpu", "util", "mem_activity", "mem_used_mib"}
	requiredSampleColumns = []string{"time", "node", "gpu", "util", "mem_activity"}
)

// ParseJobs reads the jobs file of a trace (see the package documentation
// for the format). name is the file's name, for messages.
//
// Each row is checked: job_id a positive whole number (Slurm's numeric id,
// sacct's JobIDRaw: "123_4" is an array task's display name), start and end
// times with end after start, gpus one or more node:index pairs, each once,
// indexes from 0 to 1023, and no control characters in names. Two rows
// with the same job_id are two runs of one job and must not overlap. Every
// bad line is reported (up to 20), as "name:line: message".
//
// The jobs come back ordered by start, then job id.
func ParseJobs(name string, r io.Reader) ([]Job, error) {
	p := &parser{name: name}
	var jobs []Job
	var lines []int
	p.read(r, jobColumns, requiredJobColumns, "jobs", func(line int, f fields) {
		j, err := parseJobRow(f)
		if err != nil {
			p.errorf(line, "%v", err)
			return
		}
		jobs = append(jobs, j)
		lines = append(lines, line)
	})
	// Runs of one job must not overlap: Slurm runs a job once at a time.
	byID := map[int64][]int{}
	for i, j := range jobs {
		for _, k := range byID[j.ID] {
			o := jobs[k]
			if j.Start.Before(o.End) && o.Start.Before(j.End) {
				p.errorf(lines[i], "job_id %d runs from %s to %s, overlapping its run on line %d: two runs of one job cannot overlap; give them their own ids if they are different jobs",
					j.ID, formatTime(j.Start), formatTime(j.End), lines[k])
				break
			}
		}
		byID[j.ID] = append(byID[j.ID], i)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	sortJobs(jobs)
	return jobs, nil
}

func sortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// parseJobRow reads one row of the jobs file; the first bad field is the
// error.
func parseJobRow(f fields) (Job, error) {
	var j Job
	id := f.get("job_id")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return Job{}, fmt.Errorf("job_id %q: want Slurm's numeric job id, a whole number above 0 (sacct's JobIDRaw)", id)
	}
	j.ID = n
	for _, c := range []struct {
		col string
		dst *string
	}{{"user", &j.User}, {"account", &j.Account}, {"tenant", &j.Tenant}, {"class", &j.Class}, {"qos", &j.QOS}, {"partition", &j.Partition}} {
		v := f.get(c.col)
		if err := checkName(c.col, v); err != nil {
			return Job{}, err
		}
		*c.dst = v
	}
	if j.Start, err = parseTime("start", f.get("start")); err != nil {
		return Job{}, err
	}
	if j.End, err = parseTime("end", f.get("end")); err != nil {
		return Job{}, err
	}
	if !j.End.After(j.Start) {
		return Job{}, fmt.Errorf("end %s is not after start %s", f.get("end"), f.get("start"))
	}
	if j.GPUs, err = parseGPUs(f.get("gpus")); err != nil {
		return Job{}, err
	}
	return j, nil
}

// parseGPUs reads "node:index;node:index".
func parseGPUs(s string) ([]decide.GPUKey, error) {
	if s == "" {
		return nil, errors.New(`gpus is empty: list the run's GPUs as node:index, separated by ";" (a run without GPUs has nothing to reclaim: leave it out)`)
	}
	parts := strings.Split(s, ";")
	gpus := make([]decide.GPUKey, 0, len(parts))
	for _, part := range parts {
		part = strings.TrimSpace(part)
		node, idx, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("gpus %q: %q is not node:index", s, part)
		}
		k, err := gpuKey(node, idx)
		if err != nil {
			return nil, fmt.Errorf("gpus %q: %w", s, err)
		}
		if slices.Contains(gpus, k) {
			return nil, fmt.Errorf("gpus %q: %s is listed twice", s, k)
		}
		gpus = append(gpus, k)
	}
	return gpus, nil
}

// gpuKey checks a node name and a GPU index.
func gpuKey(node, index string) (decide.GPUKey, error) {
	node, index = strings.TrimSpace(node), strings.TrimSpace(index)
	if node == "" {
		return decide.GPUKey{}, errors.New("empty node name")
	}
	if i := strings.IndexFunc(node, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == ';' || r == ':' }); i >= 0 {
		return decide.GPUKey{}, fmt.Errorf("node %q: space, control character, ':' or ';' at byte %d", node, i)
	}
	n, err := strconv.Atoi(index)
	if err != nil || n < 0 || n > maxGPUIndex {
		return decide.GPUKey{}, fmt.Errorf("gpu index %q on %s: want a whole number from 0 to %d (the NVML index Slurm reports)", index, node, maxGPUIndex)
	}
	return decide.GPUKey{Node: node, Index: n}, nil
}

// checkName rejects control characters in a name field, which would garble
// the report.
func checkName(col, v string) error {
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%s %q: control character at byte %d", col, v, i)
	}
	return nil
}

// ParseSamples reads the samples file of a trace (see the package
// documentation for the format). name is the file's name, for messages.
//
// Each row is checked: a time, a node name, a GPU index from 0 to 1023,
// util and mem_activity percentages from 0 to 100, mem_used_mib (when
// given) from 0 to 1 PiB; a GPU has at most one sample per time. A missing
// value is left out, never written as NaN or empty: reclaimd would treat a
// GPU without a value as stale. Every bad line is reported (up to 20), as
// "name:line: message".
//
// Each GPU's samples come back ordered by time.
func ParseSamples(name string, r io.Reader) (map[decide.GPUKey][]decide.Sample, error) {
	type lined struct {
		s    decide.Sample
		line int
	}
	p := &parser{name: name}
	series := map[decide.GPUKey][]lined{}
	p.read(r, sampleColumns, requiredSampleColumns, "samples", func(line int, f fields) {
		k, s, err := parseSampleRow(f)
		if err != nil {
			p.errorf(line, "%v", err)
			return
		}
		series[k] = append(series[k], lined{s, line})
	})
	out := make(map[decide.GPUKey][]decide.Sample, len(series))
	keys := make([]decide.GPUKey, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys) // so that the errors come in a stable order
	for _, k := range keys {
		ls := series[k]
		slices.SortStableFunc(ls, func(a, b lined) int { return a.s.At.Compare(b.s.At) })
		samples := make([]decide.Sample, len(ls))
		for i, l := range ls {
			if i > 0 && l.s.At.Equal(ls[i-1].s.At) {
				p.errorf(l.line, "%s has two samples at %s (the other on line %d): one sample per GPU and time", k, formatTime(l.s.At), ls[i-1].line)
			}
			samples[i] = l.s
		}
		out[k] = samples
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseSampleRow reads one row of the samples file; the first bad field is
// the error.
func parseSampleRow(f fields) (decide.GPUKey, decide.Sample, error) {
	var s decide.Sample
	var err error
	if s.At, err = parseTime("time", f.get("time")); err != nil {
		return decide.GPUKey{}, s, err
	}
	k, err := gpuKey(f.get("node"), f.get("gpu"))
	if err != nil {
		return decide.GPUKey{}, s, err
	}
	if s.UtilPercent, err = parseNumber("util", f.get("util"), 100); err != nil {
		return decide.GPUKey{}, s, err
	}
	if s.MemActivityPercent, err = parseNumber("mem_activity", f.get("mem_activity"), 100); err != nil {
		return decide.GPUKey{}, s, err
	}
	if v := f.get("mem_used_mib"); v != "" {
		if s.MemUsedMiB, err = parseNumber("mem_used_mib", v, maxMiB); err != nil {
			return decide.GPUKey{}, s, err
		}
	}
	return k, s, nil
}

// parseNumber reads a finite number from 0 to max.
func parseNumber(col, v string, max float64) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > max {
		if v == "" {
			return 0, fmt.Errorf("%s is empty: leave the sample out where there is no value", col)
		}
		return 0, fmt.Errorf("%s %q: want a number from 0 to %s", col, v, strconv.FormatFloat(max, 'f', -1, 64))
	}
	return f, nil
}

// parseTime reads RFC 3339 or Unix seconds, with up to nine decimals.
func parseTime(col, v string) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, fmt.Errorf(`%s %q: want an RFC 3339 time ("2026-11-29T12:00:00Z") or Unix seconds ("1795953600")`, col, v)
	}
	if v == "" {
		return bad()
	}
	if v[0] >= '0' && v[0] <= '9' && !strings.ContainsAny(v, "-:T") {
		whole, frac, _ := strings.Cut(v, ".")
		sec, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || len(frac) > 9 || strings.ContainsFunc(frac, func(r rune) bool { return r < '0' || r > '9' }) {
			return bad()
		}
		if sec > maxUnix {
			return time.Time{}, fmt.Errorf("%s %q: Unix seconds after the year 9999 (milliseconds? write seconds)", col, v)
		}
		var nsec int64
		if frac != "" {
			nsec, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		}
		return time.Unix(sec, nsec).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return bad()
	}
	return t, nil
}

// formatTime writes a time as the trace files do: RFC 3339 in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func compareKeys(a, b decide.GPUKey) int {
	if c := strings.Compare(a.Node, b.Node); c != 0 {
		return c
	}
	return cmp.Compare(a.Index, b.Index)
}

// parser collects the errors of one file.
type parser struct {
	name string
	errs []error
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...)))
}

// err joins the errors, the first maxErrors of them and a count of the
// rest.
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

func (p *parser) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d:%d: %w", p.name, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: read: %w", p.name, err)
}

// skipBOM drops the UTF-8 byte-order mark that spreadsheets write at the
// start of a CSV file, which would otherwise hide a comment or the first
// column's name.
func skipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && string(b) == "\ufeff" {
		_, _ = br.Discard(3)
	}
	return br
}

// fields are one row's values by column name.
type fields struct {
	cols   map[string]int
	record []string
}

// get returns the trimmed value of a column, "" when the file has no such
// column.
func (f fields) get(col string) string {
	i, ok := f.cols[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(f.record[i])
}

// read reads a CSV file with a header naming its columns and calls row for
// each record that has as many fields as the header; what rows hold is
// called in messages ("jobs", "samples"). A header column not in columns
// is an error, unless columns is nil (a foreign format whose other columns
// are ignored).
func (p *parser) read(r io.Reader, columns, required []string, what string, row func(line int, f fields)) {
	cr := csv.NewReader(skipBOM(r))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1 // checked here, with a better message
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true

	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		example := columns
		if example == nil {
			example = required
		}
		p.errs = append(p.errs, fmt.Errorf("%s: no header: the first line that is not a comment must name the columns, e.g. %s", p.name, strings.Join(example, ",")))
		return
	}
	if err != nil {
		p.errs = append(p.errs, p.csvError(err))
		return
	}
	line, _ := cr.FieldPos(0)
	cols := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		switch _, dup := cols[h]; {
		case columns != nil && !slices.Contains(columns, h):
			p.errorf(line, "unknown column %q; the columns are %s", h, strings.Join(columns, ", "))
		case dup:
			p.errorf(line, "column %q named twice", h)
		default:
			cols[h] = i
		}
	}
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			p.errorf(line, "missing column %q; the header needs at least %s", c, strings.Join(required, ","))
		}
	}
	if len(p.errs) > 0 {
		return
	}
	width, rows := len(header), 0
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.errs = append(p.errs, p.csvError(err))
			return // the reader may have lost its place
		}
		line, _ := cr.FieldPos(0)
		rows++
		if len(record) != width {
			p.errorf(line, "%d fields, but the header names %d columns", len(record), width)
			continue
		}
		row(line, fields{cols: cols, record: record})
	}
	if rows == 0 {
		p.errs = append(p.errs, fmt.Errorf("%s: no %s: the file has a header but no rows", p.name, what))
	}
}
