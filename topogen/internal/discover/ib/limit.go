package ib

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Limits bound what Parse reads, so that an endless input (/dev/zero, a
// pipe that never ends, a log written over the dump) is refused with a
// message instead of taking the host's memory.
type Limits struct {
	// MaxBytes is the most bytes of a dump (0: DefaultMaxBytes). The
	// largest fabric in the tests, 10,000 hosts on 8 rails, is 32 MiB.
	MaxBytes int64
	// MaxLine is the longest line, in bytes (0: DefaultMaxLine). A dump's
	// lines are a few hundred bytes: a node description is at most 64.
	MaxLine int
}

// Defaults of Limits.
const (
	DefaultMaxBytes = 256 << 20
	DefaultMaxLine  = 64 << 10
)

// ErrTooLarge is wrapped by the error of a dump larger than its
// Limits.MaxBytes, ErrLineTooLong by that of a line longer than MaxLine.
var (
	ErrTooLarge    = errors.New("ib: dump too large")
	ErrLineTooLong = errors.New("ib: line too long")
)

// limitError is the error of a limit: its message, wrapping ErrTooLarge
// or ErrLineTooLong (whose words it does not repeat).
type limitError struct {
	msg  string
	kind error
}

func (e limitError) Error() string { return e.msg }
func (e limitError) Unwrap() error { return e.kind }

// tooLarge is the error of a dump of size bytes (-1: more than max).
func tooLarge(size, max int64) error {
	what := "larger than " + formatBytes(max)
	if size >= 0 {
		what = fmt.Sprintf("%s, more than %s", formatBytes(size), formatBytes(max))
	}
	return limitError{fmt.Sprintf("ib: the dump is %s, the most topogen reads (a fabric of 10,000 hosts on 8 rails dumps 32 MiB)", what), ErrTooLarge}
}

// capped passes a dump through, failing once it passes the byte limit or
// once a run of bytes without a newline passes the line limit (so a pipe
// read whole is refused early); it counts lines to say which. The parser
// checks every line it splits against the line limit as well.
type capped struct {
	r        io.Reader
	lim      Limits
	read     int64 // bytes so far
	lines    int   // newlines so far
	lineRead int   // bytes since the last newline
	err      error
}

func newCapped(r io.Reader, lim Limits) *capped {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	if lim.MaxLine <= 0 {
		lim.MaxLine = DefaultMaxLine
	}
	return &capped{r: r, lim: lim}
}

func (c *capped) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	// Never read more than one byte past a limit.
	if room := c.lim.MaxBytes + 1 - c.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.read += int64(n)
	// A run of bytes without a newline longer than a line may be; the
	// lines between two newlines of one read are the parser's to check.
	b := p[:n]
	if first := bytes.IndexByte(b, '\n'); first >= 0 {
		if c.lineRead+first > c.lim.MaxLine {
			c.err = c.lineErr(c.lines + 1)
		}
		c.lines += bytes.Count(b, []byte{'\n'})
		c.lineRead = n - bytes.LastIndexByte(b, '\n') - 1
	} else {
		c.lineRead += n
	}
	if c.err == nil && c.lineRead > c.lim.MaxLine {
		c.err = c.lineErr(c.lines + 1)
	}
	if c.err == nil && c.read > c.lim.MaxBytes {
		c.err = tooLarge(-1, c.lim.MaxBytes)
	}
	if c.err != nil {
		return 0, c.err
	}
	return n, err
}

func (c *capped) lineErr(line int) error { return lineTooLong(line, c.lim.MaxLine) }

func lineTooLong(line, max int) error {
	return limitError{fmt.Sprintf("ib: line %d is longer than %s, where a dump's lines are a few hundred bytes: this is no ibnetdiscover dump",
		line, formatBytes(int64(max))), ErrLineTooLong}
}

// formatBytes writes n as whole MiB or KiB where it is one, else in bytes.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
