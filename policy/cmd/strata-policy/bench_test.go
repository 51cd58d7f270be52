package main

import (
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
