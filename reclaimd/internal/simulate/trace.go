package simulate

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Job is one run of a job in a trace.
type Job struct {
	ID        int64
	User      string
	Account   string
	Tenant    string
	Class     string
	QOS       string
	Partition string
	// Start and End bound the run as it happened: it held GPUs from
	// Start until End.
	Start, End time.Time
	GPUs       []decide.GPUKey
}

// Trace is what a simulation runs over: the jobs, and the samples of their
// GPUs.
type Trace struct {
	// Jobs are the runs, ordered by start, then id (as the readers return
	// them).
	Jobs []Job
	// Samples holds each GPU's samples ordered by time, at most one per
	// time.
	Samples map[decide.GPUKey][]decide.Sample
	// SampleInterval is how often a GPU was sampled; 0 means
	// decide.DefaultSampleInterval.
	SampleInterval time.Duration
	// Notes are caveats of the trace's source that the report repeats in
	// its header ("flat series from per-job averages: …").
	Notes []string
}

// ReadTrace parses a trace's jobs and samples files (see [ParseJobs] and
// [ParseSamples]); the names are the files' names, for messages. The
// problems of both files are reported together.
func ReadTrace(jobsName string, jobs io.Reader, samplesName string, samples io.Reader) (Trace, error) {
	js, jerr := ParseJobs(jobsName, jobs)
	ss, serr := ParseSamples(samplesName, samples)
	if err := errors.Join(jerr, serr); err != nil {
		return Trace{}, err
	}
	return Trace{Jobs: js, Samples: ss, SampleInterval: inferInterval(ss)}, nil
}

// LoadTrace reads a trace from its jobs and samples files.
func LoadTrace(jobsPath, samplesPath string) (Trace, error) {
	jf, err := os.Open(jobsPath)
	if err != nil {
		return Trace{}, fmt.Errorf("open trace jobs: %w", err)
	}
	defer jf.Close()
	sf, err := os.Open(samplesPath)
	if err != nil {
		return Trace{}, fmt.Errorf("open trace samples: %w", err)
	}
	defer sf.Close()
	return ReadTrace(jobsPath, jf, samplesPath, sf)
}

// inferInterval returns the commonest gap between consecutive samples of a
// GPU (the shortest of equally common ones), or 0 when no GPU has two
// samples.
func inferInterval(samples map[decide.GPUKey][]decide.Sample) time.Duration {
	count := map[time.Duration]int{}
	for _, ss := range samples {
		for i := 1; i < len(ss); i++ {
			count[ss[i].At.Sub(ss[i-1].At)]++
		}
	}
	var best time.Duration
	for d, n := range count {
		if n > count[best] || n == count[best] && d < best {
			best = d
		}
	}
	return best
}

// WriteCSV writes the trace in the format [ReadTrace] reads: the jobs to
// jobs, the samples to samples, times in RFC 3339 UTC. Its notes are not
// written; a converted trace loses them.
func (t Trace) WriteCSV(jobs, samples io.Writer) error {
	jw := csv.NewWriter(jobs)
	_ = jw.Write(jobColumns)
	for _, j := range t.Jobs {
		gpus := make([]string, len(j.GPUs))
		for i, g := range j.GPUs {
			gpus[i] = g.String()
		}
		_ = jw.Write([]string{strconv.FormatInt(j.ID, 10), j.User, j.Account, j.Tenant, j.Class, j.QOS, j.Partition,
			formatTime(j.Start), formatTime(j.End), strings.Join(gpus, ";")})
	}
	jw.Flush()
	if err := jw.Error(); err != nil {
		return fmt.Errorf("write trace jobs: %w", err)
	}

	sw := csv.NewWriter(samples)
	_ = sw.Write(sampleColumns)
	keys := make([]decide.GPUKey, 0, len(t.Samples))
	for k := range t.Samples {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	for _, k := range keys {
		for _, s := range t.Samples[k] {
			_ = sw.Write([]string{formatTime(s.At), k.Node, strconv.Itoa(k.Index), num(s.UtilPercent), num(s.MemActivityPercent), num(s.MemUsedMiB)})
		}
	}
	sw.Flush()
	if err := sw.Error(); err != nil {
		return fmt.Errorf("write trace samples: %w", err)
	}
	return nil
}
