package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmark's lower bound (BenchmarkPolicyApply, build tag
// integration) from samples of per-object sacctmgr.

// tenantSample is the time sacctmgr took to add one tenant's objects to a
// slurmdbd that held size tenants.
type tenantSample struct {
	size int
	took time.Duration
}

// staircase is a lower bound on the time per-object sacctmgr takes for
// tenants from+1 to to, on the ground measured throughout: a tenant never
// costs less than one added to a slurmdbd with fewer tenants. Tenant i
// goes into a slurmdbd of i-1 tenants, so it costs at least a sample
// taken on a slurmdbd of at most i-1 tenants, and at least floor.
//
// A sample is one timing, and one that ran slow (a busy machine) would
// raise the bound of every tenant after it; on the same ground no sample
// is worth more than one on a larger slurmdbd, so each counts as the
// least of itself and those.
func staircase(from, to int, floor time.Duration, samples []tenantSample) time.Duration {
	worth := make([]time.Duration, len(samples))
	for i, s := range samples {
		worth[i] = s.took
		for _, larger := range samples {
			if larger.size > s.size {
				worth[i] = min(worth[i], larger.took)
			}
		}
	}
	var sum time.Duration
	for i := from + 1; i <= to; i++ {
		lb := floor
		for j, s := range samples {
			if s.size <= i-1 {
				lb = max(lb, worth[j])
			}
		}
		sum += lb
	}
	return sum
}

// TestStaircase: after a baseline of 2 tenants, tenants 3 to 6 go into
// slurmdbds of 2 to 5 tenants, floor 10 s.
func TestStaircase(t *testing.T) {
	s := func(n int) time.Duration { return time.Duration(n) * time.Second }
	for name, tc := range map[string]struct {
		samples []tenantSample
		want    time.Duration
	}{
		// Tenant 3 gets the floor (a 1 s sample never lowers it),
		// tenants 4 and 5 the 20 s sample on 3, tenant 6 the 50 s on 5.
		"steps": {[]tenantSample{{3, s(20)}, {5, s(50)}, {2, s(1)}}, s(10 + 20 + 20 + 50)},
		// A 90 s sample on 3 counts as the 30 s one on 4: tenant 4
		// gets 30, tenants 5 and 6 too.
		"a slow sample is capped by a larger slurmdbd's": {[]tenantSample{{3, s(90)}, {4, s(30)}}, s(10 + 30 + 30 + 30)},
		// A sample on a slurmdbd no tenant goes into only caps.
		"a sample past the run only caps": {[]tenantSample{{3, s(40)}, {9, s(25)}}, s(10 + 25 + 25 + 25)},
		"no samples":                      {nil, s(40)},
	} {
		if got := staircase(2, 6, s(10), tc.samples); got != tc.want {
			t.Errorf("%s: staircase = %s, want %s", name, got, tc.want)
		}
	}
	if got := staircase(6, 6, s(10), nil); got != 0 {
		t.Errorf("no tenants left: %s, want 0", got)
	}
}

// The benchmark's alternating rounds (BenchmarkPolicyApply): the order of
// its runs, the CPU time of the bed's daemons, and medians.

// Tools the rounds alternate.
const (
	toolLoad  = "load"
	toolApply = "apply"
)

// benchOrder is the order of rounds × 2 runs: load, apply, apply, load,
// load, apply, … (ABBA), so that a steady drift of the machine's load
// weighs on both tools alike.
func benchOrder(rounds int) []string {
	var order []string
	for i := range rounds {
		if i%2 == 0 {
			order = append(order, toolLoad, toolApply)
		} else {
			order = append(order, toolApply, toolLoad)
		}
	}
	return order
}

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat's times
// (100 on every architecture Go runs on).
const clockTick = time.Second / 100

// statCPU is the CPU time, user and system, of every thread of a process
// from its /proc/<pid>/stat line (fields 14 and 15, after the command
// name in parentheses, which may hold spaces and parentheses itself).
func statCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat line without a command name: %.40q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line with %d fields after the command name, want 13 or more", len(f))
	}
	var sum time.Duration
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		// A count past a century of CPU time is no process's: refused
		// rather than overflowing into a negative duration.
		if err != nil || n < 0 || n > int64(100*365*24*time.Hour/clockTick) {
			return 0, fmt.Errorf("/proc stat time %q: not a tick count", s)
		}
		sum += time.Duration(n) * clockTick
	}
	return sum, nil
}

// median of ds (the mean of the middle two when their number is even);
// 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func TestBenchOrder(t *testing.T) {
	for rounds, want := range map[int][]string{
		0: nil,
		1: {toolLoad, toolApply},
		2: {toolLoad, toolApply, toolApply, toolLoad},
		3: {toolLoad, toolApply, toolApply, toolLoad, toolLoad, toolApply},
	} {
		if got := benchOrder(rounds); !slices.Equal(got, want) {
			t.Errorf("benchOrder(%d) = %v, want %v", rounds, got, want)
		}
	}
}

func TestStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       time.Duration
		err        bool
	}{
		// mariadbd's line on a test bed: utime 1234, stime 56 ticks.
		{"real", "4242 (mariadbd) S 1 4242 4242 0 -1 4194560 9811 0 0 0 1234 56 0 0 20 0 24 0 31337 1290000000 25000 18446744073709551615", 12900 * time.Millisecond, false},
		{"a name with spaces and parentheses", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5", 70 * time.Millisecond, false},
		{"no name", "7 a R 1", 0, true},
		{"cut short", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 3", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 3 x 0", 0, true},
		{"negative", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 -3 4 0", 0, true},
		// Found by FuzzStatCPU: ticks past int64 nanoseconds overflowed
		// into a negative time.
		{"overflowing", ")0 0 0 0 0 0 0 0 0 0 0 0 922700000000", 0, true},
	} {
		got, err := statCPU(tc.line)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: statCPU = %s, %v; want %s, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func FuzzStatCPU(f *testing.F) {
	f.Add("4242 (mariadbd) S 1 4242 4242 0 -1 4194560 9811 0 0 0 1234 56 0 0 20 0 24 0 31337")
	f.Add("7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5")
	f.Add(")0 0 0 0 0 0 0 0 0 0 0 0 922700000000")
	f.Fuzz(func(t *testing.T, line string) {
		if d, err := statCPU(line); err == nil && d < 0 {
			t.Errorf("statCPU(%q) = %s, want no negative time", line, d)
		}
	})
}

func TestMedian(t *testing.T) {
	s := func(n int) time.Duration { return time.Duration(n) * time.Second }
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{s(5)}, s(5)},
		{[]time.Duration{s(9), s(1), s(5)}, s(5)},
		{[]time.Duration{s(9), s(1), s(5), s(3)}, s(4)},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
