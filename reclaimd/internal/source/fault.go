package source

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultKind is what went wrong with a GPU.
type FaultKind string

// The fault kinds a source reports. The agent's snapshot and the
// controller's store use these words.
const (
	// FaultXid is an Xid critical error (NVML's EventTypeXidCriticalError);
	// Code is the Xid (79: the GPU fell off the bus).
	FaultXid FaultKind = "xid"
	// FaultECC is an uncorrectable (double-bit) ECC error
	// (EventTypeDoubleBitEccError). Code is 0.
	FaultECC FaultKind = "ecc_uncorrectable"
	// FaultRetiredPages says a page retirement or row remap is pending: the
	// GPU must be reset before the bad memory is out of use
	// (EventTypeDramRetirementEvent, or GetRetiredPagesPendingStatus /
	// GetRemappedRows reporting a pending one). Code is 0.
	FaultRetiredPages FaultKind = "retired_pages_pending"
	// FaultRowRemap says a row remap failed: the GPU has run out of spare
	// rows and needs service (EventTypeDramRetirementFailure, or
	// GetRemappedRows reporting a failure). Code is 0.
	FaultRowRemap FaultKind = "row_remap_failure"
)

// FaultKinds are the kinds, in the order the docs list them.
var FaultKinds = []FaultKind{FaultXid, FaultECC, FaultRetiredPages, FaultRowRemap}

// Known reports whether k is one of FaultKinds.
func (k FaultKind) Known() bool {
	for _, x := range FaultKinds {
		if k == x {
			return true
		}
	}
	return false
}

// Fault is one fault event of one GPU.
type Fault struct {
	At   time.Time // when the source saw it
	GPU  int       // NVML index
	UUID string    // "GPU-…"; empty where the source does not know it
	Kind FaultKind
	Code int // the Xid for FaultXid, else 0
}

// MaxFaultCode bounds an Xid: NVIDIA's catalogue stays far below it.
const MaxFaultCode = 65535

// FaultFile injects faults for demos and the test beds, beside a Replay:
// each call of Faults returns the faults of the lines appended to the
// file since the last call, stamped now. The file need not exist yet.
// One fault a line, CSV without a header:
//
//	# gpu,kind[,code]: lines with # are comments
//	3,xid,79
//	0,ecc_uncorrectable
//	1,row_remap_failure
//
// gpu is the NVML index (0 to 1023); kind is xid, ecc_uncorrectable,
// retired_pages_pending or row_remap_failure; code is the Xid, required
// for xid and absent (or 0) for the rest. A line not yet ended by a
// newline is read once it is. A bad line is reported as "path:line:
// message" and skipped; the lines after it are read. A file that shrank
// (truncated to start over) is read again from its start.
//
// To inject an Xid 79 on GPU 3 of a replayed node while it runs:
//
//	echo 3,xid,79 >>/run/strata/faults.csv
type FaultFile struct {
	Path string

	mu     sync.Mutex
	offset int64
	line   int
}

// Faults returns the faults of the lines appended since the last call.
func (f *FaultFile) Faults(ctx context.Context, now time.Time) ([]Fault, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.Open(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fault file: %w", err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() < f.offset {
		f.offset, f.line = 0, 0
	}
	if _, err := fh.Seek(f.offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("fault file: %w", err)
	}
	r := bufio.NewReader(fh)
	var out []Fault
	var errs []error
	for {
		text, err := r.ReadString('\n')
		if err != nil { // an unended line waits for its newline
			break
		}
		f.offset += int64(len(text))
		f.line++
		fault, ok, perr := ParseFaultLine(text)
		if perr != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", f.Path, f.line, perr))
			continue
		}
		if ok {
			fault.At = now
			out = append(out, fault)
		}
	}
	return out, errors.Join(errs...)
}

// ParseFaultLine reads one line of a fault file; false for a blank line
// or a comment.
func ParseFaultLine(text string) (Fault, bool, error) {
	text = strings.TrimSpace(text)
	if text == "" || strings.HasPrefix(text, "#") {
		return Fault{}, false, nil
	}
	parts := strings.Split(text, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if len(parts) < 2 || len(parts) > 3 {
		return Fault{}, false, fmt.Errorf("%q: want gpu,kind[,code], such as 3,xid,79", text)
	}
	gpu, err := strconv.Atoi(parts[0])
	if err != nil || gpu < 0 || gpu > maxGPUIndex {
		return Fault{}, false, fmt.Errorf("gpu %q: want an index from 0 to %d", parts[0], maxGPUIndex)
	}
	f := Fault{GPU: gpu, Kind: FaultKind(parts[1])}
	if !f.Kind.Known() {
		return Fault{}, false, fmt.Errorf("kind %q: want xid, ecc_uncorrectable, retired_pages_pending or row_remap_failure", parts[1])
	}
	if len(parts) == 3 {
		if f.Code, err = strconv.Atoi(parts[2]); err != nil || f.Code < 0 || f.Code > MaxFaultCode {
			return Fault{}, false, fmt.Errorf("code %q: want an Xid from 0 to %d", parts[2], MaxFaultCode)
		}
	}
	switch {
	case f.Kind == FaultXid && f.Code == 0:
		return Fault{}, false, errors.New("xid needs its code, such as 3,xid,79")
	case f.Kind != FaultXid && f.Code != 0:
		return Fault{}, false, fmt.Errorf("%s takes no code (only xid has one)", f.Kind)
	}
	return f, true, nil
}
