package failure

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultSignatures are the stderr lines that make a failed job's class
// nccl: NCCL's own errors, PyTorch's NCCL watchdog timeouts, and CUDA
// errors NCCL reports. Each is a regular expression (RE2), matched
// case-insensitively against each line; testdata/stderr holds real lines
// users posted, with where each came from.
var DefaultSignatures = []string{
	`Watchdog caught collective operation timeout`,
	`NCCL (error|failure)`,
	`unhandled cuda error`,
	`ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclRemoteError`,
	`NCCL communicator was aborted`,
}

// MaxLineBytes is the longest stderr line a matcher reads; the rest of a
// longer line is not looked at (a progress bar without newlines can be
// megabytes).
const MaxLineBytes = 4096

// Matcher matches stderr lines against signatures.
type Matcher struct {
	sigs []string
	res  []*regexp.Regexp
}

// NewMatcher compiles the signatures (nil or empty: DefaultSignatures).
// Every signature that does not compile is reported.
func NewMatcher(sigs []string) (*Matcher, error) {
	if len(sigs) == 0 {
		sigs = DefaultSignatures
	}
	m := &Matcher{sigs: sigs}
	var bad []string
	for i, s := range sigs {
		if strings.TrimSpace(s) == "" {
			bad = append(bad, fmt.Sprintf("signature %d is empty", i))
			continue
		}
		re, err := regexp.Compile("(?i)" + s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("signature %d %q: %v", i, s, err))
			continue
		}
		m.res = append(m.res, re)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("nccl signatures: %s", strings.Join(bad, "; "))
	}
	return m, nil
}

// Match returns the last line of lines that matches a signature, and the
// signature; the last, because the error nearest the end is the one the
// job died of. A nil matcher matches the default signatures.
func (m *Matcher) Match(lines []string) (line, sig string, ok bool) {
	if m == nil {
		m = defaultMatcher
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if len(l) > MaxLineBytes {
			l = l[:MaxLineBytes]
		}
		for j, re := range m.res {
			if re.MatchString(l) {
				return strings.TrimSpace(l), m.sigs[j], true
			}
		}
	}
	return "", "", false
}

// DefaultMatcher matches DefaultSignatures.
func DefaultMatcher() *Matcher { return defaultMatcher }

var defaultMatcher = func() *Matcher {
	m, err := NewMatcher(nil)
	if err != nil {
		panic(err)
	}
	return m
}()

// Tail returns the last n lines of b, without a final empty line.
func Tail(b []byte, n int) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, "\r")
	}
	return lines
}
