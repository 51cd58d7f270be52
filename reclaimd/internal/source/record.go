package source

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Recorder writes samples in the format ParseRecording reads, so that a real
// node can be captured (reclaimd agent --record) and replayed later. Each
// Record call flushes, so a recording cut short by a crash loses at most the
// call in progress. It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	w      *csv.Writer
	start  time.Time
	last   time.Duration
	header bool
}

// NewRecorder returns a Recorder writing to w with offsets counted from
// start; a zero start means the time of the first sample recorded.
func NewRecorder(w io.Writer, start time.Time) *Recorder {
	return &Recorder{w: csv.NewWriter(w), start: start}
}

// Record writes one row per sample, with its offset from the sample's At.
// Samples must come in time order, one call per moment, as a source
// produces them.
func (r *Recorder) Record(samples []Sample) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(samples) == 0 {
		return nil
	}
	if r.start.IsZero() {
		r.start = samples[0].At
	}
	if !r.header {
		if err := r.w.Write(columnNames[:]); err != nil {
			return fmt.Errorf("record samples: %w", err)
		}
		r.header = true
	}
	for _, s := range samples {
		offset := s.At.Sub(r.start)
		if offset < r.last {
			return fmt.Errorf("record GPU %d at %s: it is before the last sample recorded (%s after the start); record samples in time order",
				s.GPU, s.At.Format(time.RFC3339Nano), r.last)
		}
		r.last = offset
		if err := r.w.Write(row(offset, s)); err != nil {
			return fmt.Errorf("record samples: %w", err)
		}
	}
	r.w.Flush()
	if err := r.w.Error(); err != nil {
		return fmt.Errorf("record samples: %w", err)
	}
	return nil
}

// row formats s as a recording's row, in columnNames order.
func row(offset time.Duration, s Sample) []string {
	opt := func(p *float64) string {
		if p == nil {
			return ""
		}
		return formatNumber(*p)
	}
	ids := func(ids []int64) string {
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = strconv.FormatInt(id, 10)
		}
		return strings.Join(parts, listSeparator)
	}
	pids := make([]int64, len(s.PIDs))
	for i, p := range s.PIDs {
		pids[i] = int64(p)
	}
	r := make([]string, numColumns)
	r[colOffset] = formatOffset(offset)
	r[colGPU] = strconv.Itoa(s.GPU)
	r[colUUID] = s.UUID
	r[colModel] = s.Model
	r[colUtil] = opt(s.UtilPercent)
	r[colMemActivity] = opt(s.MemActivityPercent)
	r[colSMActive] = opt(s.SMActivePercent)
	r[colMemUsed] = formatNumber(s.MemUsedMiB)
	r[colMemTotal] = formatNumber(s.MemTotalMiB)
	r[colPCIeRx], r[colPCIeTx] = opt(s.PCIeRxKBs), opt(s.PCIeTxKBs)
	r[colNVLinkRx], r[colNVLinkTx] = opt(s.NVLinkRxKBs), opt(s.NVLinkTxKBs)
	r[colMIG] = strconv.FormatBool(s.MIG)
	r[colPIDs] = ids(pids)
	r[colJobs] = ids(s.JobIDs)
	return r
}

// formatOffset writes d as exact decimal seconds: 10, 12.5, 0.000000001.
func formatOffset(d time.Duration) string {
	sec, frac := d/time.Second, d%time.Second
	if frac == 0 {
		return strconv.FormatInt(int64(sec), 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%09d", sec, frac), "0")
}

// formatNumber writes f in the shortest form that reads back exactly.
func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
