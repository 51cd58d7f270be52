//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/policy/internal/apply"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/spec"
	"github.com/strata-hpc/strata/test/policygen"
)

// Environment of BenchmarkPolicyApply (`make bench-policy` sets it).
const (
	// benchBedVar names the environment file of a private test bed: the
	// benchmark empties its slurmdbd, so never a shared one.
	benchBedVar = "STRATA_BENCH_TESTBED"
	// benchResetVar is a shell command that empties that test bed's
	// slurmdbd (testbed.sh up --fresh ...).
	benchResetVar = "STRATA_BENCH_RESET"
	// benchScaleVar is the policy: tenants x projects x members
	// (default 20x10x20).
	benchScaleVar = "STRATA_BENCH_SCALE"
	// benchBaselineVar runs per-object sacctmgr on the first N tenants
	// only (default: all) and scales its time to the whole policy by the
	// number of calls, for a full-size run that would take hours; 0 skips
	// it (sacctmgr load and apply only).
	benchBaselineVar = "STRATA_BENCH_SACCTMGR_TENANTS"
	// benchSamplesVar lists tenant counts ("80,120,160"), above the
	// baseline's: after the baseline, apply brings the slurmdbd to each
	// and sacctmgr adds one more tenant there, timed, for a tighter lower
	// bound on the per-object run that was not made.
	benchSamplesVar = "STRATA_BENCH_SACCTMGR_SAMPLES"
	// benchRoundsVar is how many times each of sacctmgr load and apply
	// runs (default 1), alternating (benchOrder): the machine's load
	// moves wall times by tens of percent from one run to the next.
	benchRoundsVar = "STRATA_BENCH_ROUNDS"
)

// BenchmarkPolicyApply compares, each time on an empty slurmdbd, the
// obvious way to load a tenant policy, one `sacctmgr -i add` per QOS,
// account and user association, and the way admins and ColdFront load
// one, `sacctmgr load` of a flat file (the QOS added first: a load cannot
// make them), with `strata-policy apply --apply`, and times the no-op
// re-apply. After each, plan must find Slurm in sync, and the load's and
// apply's slurmdbd must list the same associations, limits and defaults.
// Load and apply run STRATA_BENCH_ROUNDS times each, alternating
// (benchOrder), and each run records its wall time, the CPU time of the
// bed's daemons and of the client, and the machine's load average: on a
// shared machine CPU time moves much less with other work than wall time.
// It prints a table and reports the medians as metrics. Run it with `make
// bench-policy`.
func BenchmarkPolicyApply(b *testing.B) {
	env, reset := os.Getenv(benchBedVar), os.Getenv(benchResetVar)
	if env == "" || reset == "" {
		b.Skipf("%s and %s are not set: run `make bench-policy`, which starts a private test bed", benchBedVar, benchResetVar)
	}
	bed, err := testbed.Load(env)
	if err != nil {
		b.Fatal(err)
	}
	s, err := benchScale(os.Getenv(benchScaleVar))
	if err != nil {
		b.Fatal(err)
	}
	s.Cluster, s.Partition, s.Seed = bed.Cluster, bed.Partition, 1
	baseline := s
	if v := os.Getenv(benchBaselineVar); v != "" {
		if baseline.Tenants, err = strconv.Atoi(v); err != nil || baseline.Tenants < 0 || baseline.Tenants > s.Tenants {
			b.Fatalf("%s=%q: give a number of tenants from 0 (none) to %d", benchBaselineVar, v, s.Tenants)
		}
	}
	var samples []int
	for f := range strings.FieldsFuncSeq(os.Getenv(benchSamplesVar), func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= baseline.Tenants || n >= s.Tenants || len(samples) > 0 && n <= samples[len(samples)-1] {
			b.Fatalf("%s=%q: give increasing tenant counts above %d and below %d", benchSamplesVar, os.Getenv(benchSamplesVar), baseline.Tenants, s.Tenants)
		}
		samples = append(samples, n)
	}
	rounds := 1
	if v := os.Getenv(benchRoundsVar); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			b.Fatalf("%s=%q: give a number of rounds, 1 or more", benchRoundsVar, v)
		}
	}
	var r benchResult
	for b.Loop() {
		r = benchOnce(b, bed, reset, s, baseline, samples, benchOrder(rounds))
	}
	fmt.Print(r.table(bed))
	for _, f := range r.applyFailed {
		b.Errorf("apply: slurmdbd does not hold the policy after it: %s", f)
	}
	if r.loadFailed != "" {
		// Its time is no baseline: a load that keeps nothing is not the
		// way to put a policy into slurmdbd.
		b.Errorf("the baseline sacctmgr load FAILED: %s", r.loadFailed)
	}
	if baseline.Tenants > 0 {
		b.ReportMetric(r.sacctmgrFull().Seconds(), "sacctmgr-s")
		b.ReportMetric(r.sacctmgrFull().Seconds()/r.apply.Seconds(), "speedup")
	}
	if r.loadFailed == "" {
		b.ReportMetric(r.load.Seconds(), "load-s")
		b.ReportMetric(r.load.Seconds()/r.apply.Seconds(), "speedup-load")
		cl, ca := r.median(toolLoad, benchRun.cpuTotal), r.median(toolApply, benchRun.cpuTotal)
		b.ReportMetric(cl.Seconds(), "load-cpu-s")
		b.ReportMetric(ca.Seconds(), "apply-cpu-s")
		b.ReportMetric(cl.Seconds()/ca.Seconds(), "speedup-load-cpu")
	}
	b.ReportMetric(r.apply.Seconds(), "apply-s")
	b.ReportMetric(r.noop[0].Seconds(), "noop-s")
	b.ReportMetric(r.noop[1].Seconds(), "noop-rest-s")
	b.ReportMetric(float64(r.applyRequests), "apply-requests")
}

type benchResult struct {
	stats, baseStats policygen.Stats
	sacctmgr         time.Duration   // measured, on baseStats
	blocks           []time.Duration // of the sacctmgr run: the QOS, then each tenant's objects
	// When sacctmgr ran on some tenants only: one more tenant's objects
	// (sampleCalls calls) added by sacctmgr to the slurmdbd that holds the
	// whole policy, and the whole run's time derived from the measures.
	sample               time.Duration
	sampleCalls          int
	lowerBound, estimate time.Duration
	lowerBound2          time.Duration
	// Samples: one more tenant added by sacctmgr to a slurmdbd that holds
	// a number of tenants, and the lower bound they give (see staircase).
	samples         []tenantSample
	lowerBound3     time.Duration
	baselineMatches string // what plan says after the sacctmgr run
	perObject       bool   // whether (a) ran
	calls           int    // of (a)
	// What slurmdbd lists after (a) when it ran on the whole policy, and
	// whether apply's slurmdbd lists the same.
	perObjectListing []string
	perObjectSame    string
	// The runs of sacctmgr load of the flat file (after loadQOS sacctmgr
	// calls for the QOS) and of apply, in their order, and the medians of
	// their wall times.
	runs        []benchRun
	load, apply time.Duration
	loadQOS     int
	// loadFailed says why a load is no baseline (it exited 0 but slurmdbd
	// does not hold the policy), empty when every one is; applyFailed
	// lists the apply runs after which slurmdbd did not.
	loadFailed            string
	applyFailed           []string
	maxPacket             string           // the bed's MariaDB max_allowed_packet
	noop                  [2]time.Duration // reading associations through sacctmgr, then slurmrestd (noopReads)
	applyRequests         int              // of the first apply
	applySummary          string
	noopSummary           [2]string
	loadBefore, loadAfter string
}

// noopReads are the ways the no-op re-apply is timed (--read-with).
var noopReads = [2]string{readSacctmgr, readREST}

// sacctmgrFull is the per-object sacctmgr time of the whole policy:
// measured, or the estimate.
func (r benchResult) sacctmgrFull() time.Duration {
	if r.estimate > 0 {
		return r.estimate
	}
	return r.sacctmgr
}

// sampleTenant adds one tenant of the policy's shape, named by prefix,
// to the slurmdbd by per-object sacctmgr and times it (its QOS, added
// first, are not timed).
func sampleTenant(b *testing.B, bed *testbed.Bed, dir string, full policygen.Spec, prefix string) (time.Duration, int) {
	extra := full
	extra.Tenants, extra.Prefix = 1, prefix
	var st policygen.Stats
	_, state := benchPolicy(b, dir, prefix+".yaml", extra, &st)
	blocks := sacctmgrCalls(b, state)
	runSacctmgr(b, bed, blocks[0])
	calls, t := 0, time.Now()
	for _, bl := range blocks[1:] {
		runSacctmgr(b, bed, bl)
		calls += len(bl)
	}
	return time.Since(t), calls
}

// perObjectRun is measurement (a): per-object sacctmgr, tenant by tenant,
// from an empty slurmdbd, with the samples on the way to the whole policy.
func (r *benchResult) perObjectRun(b *testing.B, bed *testbed.Bed, reset, dir, baseFile string, baseState *compile.State, full policygen.Spec, samples []int) {
	resetBed(b, reset)
	blocks := sacctmgrCalls(b, baseState)
	calls := 0
	for _, bl := range blocks {
		calls += len(bl)
	}
	if calls != r.baseStats.Objects() {
		b.Fatalf("%d sacctmgr calls for %d objects", calls, r.baseStats.Objects())
	}
	for _, bl := range blocks {
		t := time.Now()
		runSacctmgr(b, bed, bl)
		r.blocks = append(r.blocks, time.Since(t))
		r.sacctmgr += r.blocks[len(r.blocks)-1]
	}
	r.baselineMatches = inSync(b, bed, baseFile)
	if r.baseStats == r.stats {
		r.perObjectListing = slurmdbdListing(b, bed)
	}
	// Samples on the way to the whole policy: apply brings the slurmdbd
	// from the baseline's tenants to k (policygen's first tenants are the
	// same whatever the count), then sacctmgr adds one more tenant.
	for j, k := range samples {
		sp := full
		sp.Tenants = k
		var st policygen.Stats
		file, _ := benchPolicy(b, dir, fmt.Sprintf("sample%d.yaml", k), sp, &st)
		if code, out := benchPolicyRun(b, bed, file, "apply", "--apply"); code != exitOK {
			b.Fatalf("apply %d tenants: exit %d:\n%s", k, code, tail(out))
		}
		took, _ := sampleTenant(b, bed, dir, full, fmt.Sprintf("zs%d", k))
		// The slurmdbd held k tenants and the j sample tenants before.
		r.samples = append(r.samples, tenantSample{size: k + j, took: took})
	}

	r.calls = calls
}

// benchOnce runs the measurements, each from an empty slurmdbd.
func benchOnce(b *testing.B, bed *testbed.Bed, reset string, full, base policygen.Spec, samples []int, order []string) benchResult {
	var r benchResult
	r.loadBefore = loadAverage()
	dir := b.TempDir()
	fullFile, fullState := benchPolicy(b, dir, "policy.yaml", full, &r.stats)
	baseFile, baseState := fullFile, fullState
	r.baseStats = r.stats
	if base.Tenants != full.Tenants && base.Tenants > 0 {
		baseFile, baseState = benchPolicy(b, dir, "baseline.yaml", base, &r.baseStats)
	}
	r.perObject = base.Tenants > 0
	if r.perObject {
		r.perObjectRun(b, bed, reset, dir, baseFile, baseState, full, samples)
	}

	// (a2) sacctmgr load of the flat file of the same state, after the QOS,
	// and (b) strata-policy apply, alternating, each on an empty slurmdbd;
	// (c) the same apply again after the first (b).
	flat := flatFile(b, fullState)
	qos := sacctmgrCalls(b, fullState)[0]
	r.loadQOS = len(qos)
	listings := make([][]string, len(order))
	var applied []string // after the first apply: what every run must list
	for i, tool := range order {
		resetBed(b, reset)
		run := benchRun{tool: tool}
		dbd := bedDaemons(b, bed)
		run.loadStart, run.before = loadAverage(), cpuNow(b, dbd)
		start := time.Now()
		switch tool {
		case toolLoad:
			runSacctmgr(b, bed, qos)
			run.qos = time.Since(start)
			if out, err := benchSacctmgrInput(bed, flat, "load", "file=/dev/stdin"); err != nil {
				b.Fatalf("sacctmgr load: %v\n%s", err, tail(string(out)))
			}
			run.wall = time.Since(start)
		case toolApply:
			code, out := benchPolicyRunLevel(b, bed, "info", fullFile, "apply", "--apply")
			run.wall = time.Since(start)
			if code != exitOK {
				b.Fatalf("apply: exit %d:\n%s", code, tail(out))
			}
			run.timeline = timeline(start, out)
			run.summary, run.requests = requestsLine(b, out)
		}
		run.after, run.loadEnd = cpuNow(b, dbd), loadAverage()
		run.log = dbdErrors(bed)
		run.inSync = inSync(b, bed, fullFile)
		listings[i] = slurmdbdListing(b, bed)
		if tool == toolApply && applied == nil {
			applied = listings[i]
			r.applySummary, r.applyRequests = run.summary, run.requests
			for j, mode := range noopReads {
				t := time.Now()
				code, out := benchPolicyRun(b, bed, fullFile, "apply", "--apply", "--read-with", mode)
				r.noop[j] = time.Since(t)
				if code != exitOK || !strings.Contains(out, "Slurm matches") {
					b.Fatalf("apply again: exit %d, want no change:\n%s", code, tail(out))
				}
				r.noopSummary[j], _ = requestsLine(b, out)
			}
		}
		r.runs = append(r.runs, run)
	}
	r.maxPacket = maxAllowedPacket(bed)
	for i := range r.runs {
		run := &r.runs[i]
		run.same = sameListing(listings[i], applied)
		if run.inSync == "yes" && strings.HasPrefix(run.same, "yes") {
			continue
		}
		if run.tool == toolApply {
			// apply reads back what it wrote: this is a defect of apply,
			// or of slurmdbd, and no result.
			run.failed = fmt.Sprintf("plan after it in sync: %s; it lists the same as the first apply: %s", run.inSync, run.same)
			r.applyFailed = append(r.applyFailed, fmt.Sprintf("run %d: %s", i+1, run.failed))
			continue
		}
		// A load slurmdbd loses still exits 0: it is caught only here.
		run.failed = fmt.Sprintf("it exited 0 after %s, but slurmdbd then lists %d lines of associations and users against %d after apply; "+
			"plan after it in sync: %s; MariaDB max_allowed_packet %s; slurmdbd.log: %s",
			round(run.wall), len(listings[i]), len(applied), run.inSync, r.maxPacket, run.log)
		if r.loadFailed == "" {
			r.loadFailed = fmt.Sprintf("run %d: %s", i+1, run.failed)
		}
	}
	r.load, r.apply = r.median(toolLoad, benchRun.wallTime), r.median(toolApply, benchRun.wallTime)
	if r.perObjectListing != nil {
		r.perObjectSame = sameListing(r.perObjectListing, applied)
	}

	if r.perObject && base.Tenants != full.Tenants {
		calls := r.calls
		// One more tenant of the same shape, by sacctmgr, on the slurmdbd
		// that now holds the whole policy: what the last tenants of a
		// whole sacctmgr run would cost.
		r.sample, r.sampleCalls = sampleTenant(b, bed, dir, full, "zz")
		// Each tenant costs sacctmgr more than the one before, as its
		// calls read a larger slurmdbd: the tenants measured, scaled,
		// are a lower bound; growing in a straight line from the first
		// tenant's time (measured on an empty slurmdbd) to the sample's
		// (on a full one), an estimate.
		r.lowerBound = time.Duration(float64(r.sacctmgr) * float64(r.stats.Objects()) / float64(calls))
		// Tighter, on the same ground: each tenant not run costs at least
		// the least of the last three measured.
		last := slices.Min(r.blocks[max(1, len(r.blocks)-3):])
		r.lowerBound2 = r.sacctmgr + time.Duration(full.Tenants-base.Tenants)*last
		if len(r.samples) > 0 {
			// The sample on the full slurmdbd caps the others (see
			// staircase), though no tenant of the run goes into one as large.
			all := append(slices.Clone(r.samples), tenantSample{size: full.Tenants, took: r.sample})
			r.lowerBound3 = r.sacctmgr + staircase(base.Tenants, full.Tenants, last, all)
		}
		n, t1 := time.Duration(full.Tenants), r.blocks[1]
		r.estimate = r.blocks[0] + n*t1 + (r.sample-t1)*(n-1)/2
	}
	r.loadAfter = loadAverage()
	return r
}

// inSync is what plan says of the slurmdbd against the policy: "yes",
// or "no (...)" with plan's first line.
func inSync(b *testing.B, bed *testbed.Bed, file string) string {
	code, out := benchPolicyRun(b, bed, file, "plan")
	if code == exitOK {
		return "yes"
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return fmt.Sprintf("no (plan exits %d: %s)", code, first)
}

// flatFile is the sacctmgr flat file of the state: every account and
// user, as an admin would write it for `sacctmgr load`.
func flatFile(b *testing.B, st *compile.State) []byte {
	accts := make([]*compile.Account, len(st.Accounts))
	for i := range st.Accounts {
		accts[i] = &st.Accounts[i]
	}
	users := make([]*compile.User, len(st.Users))
	for i := range st.Users {
		users[i] = &st.Users[i]
	}
	f, err := apply.FlatFile(st.Cluster, accts, users)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// slurmdbdListing is what slurmdbd holds of the policy's kind: every
// association with its parent, shares, QOS, limits and priority, and
// every user's default account, sorted.
func slurmdbdListing(b *testing.B, bed *testbed.Bed) []string {
	var lines []string
	for _, args := range [][]string{
		{"-n", "-P", "show", "associations", "format=Cluster,Account,User,Partition,ParentName,Fairshare,QOS,DefaultQOS,GrpTRES,GrpTRESMins,GrpJobs,MaxTRES,Priority"},
		{"-n", "-P", "show", "users", "format=User,DefaultAccount,AdminLevel"},
	} {
		out, err := exec.Command(filepath.Join(bed.Bin, "sacctmgr"), args...).Output()
		if err != nil {
			b.Fatalf("sacctmgr %s: %v", strings.Join(args, " "), err)
		}
		for l := range strings.Lines(string(out)) {
			lines = append(lines, args[3]+" "+strings.TrimSpace(l))
		}
	}
	slices.Sort(lines)
	return lines
}

// sameListing says "yes" when two listings are the same, or how they
// differ.
func sameListing(a, b []string) string {
	if slices.Equal(a, b) {
		return fmt.Sprintf("yes (%d lines)", len(a))
	}
	in := map[string]int{}
	for _, l := range a {
		in[l]++
	}
	for _, l := range b {
		in[l]--
	}
	var only []string
	for l, n := range in {
		if n != 0 {
			only = append(only, fmt.Sprintf("%+d %s", n, l))
		}
	}
	slices.Sort(only)
	return fmt.Sprintf("no, %d lines differ, e.g. %s", len(only), strings.Join(only[:min(3, len(only))], "; "))
}

// runSacctmgr makes the calls one after another.
func runSacctmgr(b *testing.B, bed *testbed.Bed, calls [][]string) {
	b.Helper()
	for _, args := range calls {
		if out, err := benchSacctmgr(bed, args...); err != nil {
			b.Fatalf("sacctmgr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func (r benchResult) table(bed *testbed.Bed) string {
	var w strings.Builder
	fmt.Fprintf(&w, "\nstrata-policy apply against sacctmgr load and per-object sacctmgr, %s, Slurm %s (test bed %s), %d CPUs, load average %s at the start, %s at the end\n",
		time.Now().UTC().Format("2006-01-02"), bed.Release, bed.Name, runtime.NumCPU(), r.loadBefore, r.loadAfter)
	fmt.Fprintf(&w, "MariaDB max_allowed_packet: %s\n", r.maxPacket)
	fmt.Fprintf(&w, "policy: %d tenants x %d projects x %d members = %d QOS, %d accounts, %d users, %d user associations (%d objects)\n\n",
		r.stats.Tenants, r.stats.Projects/r.stats.Tenants, r.stats.Associations/r.stats.Projects, r.stats.Classes,
		r.stats.Tenants+r.stats.Projects, r.stats.Users, r.stats.Associations, r.stats.Objects())
	fmt.Fprintf(&w, "| from an empty slurmdbd | requests | wall time |\n|---|---|---|\n")
	switch {
	case !r.perObject: // (a) skipped
	case r.estimate == 0:
		fmt.Fprintf(&w, "| per-object `sacctmgr -i add` | %d sacctmgr calls | %s |\n", r.stats.Objects(), round(r.sacctmgr))
	default:
		fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, the first %d tenants (measured) | %d sacctmgr calls | %s |\n",
			r.baseStats.Tenants, r.baseStats.Objects(), round(r.sacctmgr))
		fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, one more tenant on the full slurmdbd (measured) | %d sacctmgr calls | %s |\n",
			r.sampleCalls, round(r.sample))
		fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, whole policy: lower bound (the first %d tenants x %d/%d calls) | %d sacctmgr calls | %s |\n",
			r.baseStats.Tenants, r.stats.Objects(), r.baseStats.Objects(), r.stats.Objects(), round(r.lowerBound))
		fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, whole policy: lower bound (the first %d tenants, then %d tenants at the least time of the last 3 measured, %s) | %d sacctmgr calls | %s |\n",
			r.baseStats.Tenants, r.stats.Tenants-r.baseStats.Tenants, round(slices.Min(r.blocks[max(1, len(r.blocks)-3):])), r.stats.Objects(), round(r.lowerBound2))
		fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, whole policy: estimate (a tenant's time growing in a straight line from the first's, %s, to one on the full slurmdbd, %s) | %d sacctmgr calls | %s |\n",
			round(r.blocks[1]), round(r.sample), r.stats.Objects(), round(r.estimate))
		for _, sm := range r.samples {
			fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, one more tenant on a slurmdbd of %d tenants (measured) | %d sacctmgr calls | %s |\n",
				sm.size, r.sampleCalls, round(sm.took))
		}
		if r.lowerBound3 > 0 {
			fmt.Fprintf(&w, "| per-object `sacctmgr -i add`, whole policy: lower bound (the first %d tenants, then each tenant at least the largest sample on a slurmdbd no larger than the one it goes into) | %d sacctmgr calls | %s |\n",
				r.baseStats.Tenants, r.stats.Objects(), round(r.lowerBound3))
		}
	}
	nLoad, nApply := 0, 0
	for _, run := range r.runs {
		if run.tool == toolLoad {
			nLoad++
		} else {
			nApply++
		}
	}
	loadTime := round(r.load)
	if r.loadFailed != "" {
		loadTime = fmt.Sprintf("**FAILED**: exited 0 after %s and kept nothing of the policy (see below)", loadTime)
	}
	fmt.Fprintf(&w, "| `sacctmgr load` of the flat file, after %d sacctmgr calls for the QOS (%s), median of %d | %d sacctmgr calls + 1 load | %s |\n",
		r.loadQOS, round(r.median(toolLoad, func(r benchRun) time.Duration { return r.qos })), nLoad, r.loadQOS, loadTime)
	fmt.Fprintf(&w, "| `strata-policy apply --apply`, median of %d | %s | %s |\n", nApply, r.applySummary, round(r.apply))
	fmt.Fprintf(&w, "| `strata-policy apply --apply` again (no-op; associations read through sacctmgr, the default) | %s | %s |\n", r.noopSummary[0], round(r.noop[0]))
	fmt.Fprintf(&w, "| `strata-policy apply --apply --read-with rest` again (no-op; everything read through slurmrestd) | %s | %s |\n", r.noopSummary[1], round(r.noop[1]))
	w.WriteString(r.runsTable())
	w.WriteString("\n")
	if !r.perObject {
		w.WriteString("per-object sacctmgr: not run")
	} else if r.estimate == 0 {
		fmt.Fprintf(&w, "first apply: %.1fx faster than per-object sacctmgr", r.sacctmgr.Seconds()/r.apply.Seconds())
	} else {
		best := max(r.lowerBound, r.lowerBound2, r.lowerBound3)
		bounds := fmt.Sprintf("%.1fx, %.1fx", r.lowerBound.Seconds()/r.apply.Seconds(), r.lowerBound2.Seconds()/r.apply.Seconds())
		if r.lowerBound3 > 0 {
			bounds += fmt.Sprintf(", %.1fx", r.lowerBound3.Seconds()/r.apply.Seconds())
		}
		fmt.Fprintf(&w, "first apply: at least %.1fx faster than per-object sacctmgr (the lower bounds: %s), %.1fx by the estimate",
			best.Seconds()/r.apply.Seconds(), bounds, r.estimate.Seconds()/r.apply.Seconds())
	}
	if r.perObject {
		fmt.Fprintf(&w, "; slurmdbd after sacctmgr matches the policy: %s", r.baselineMatches)
	}
	if r.perObjectSame != "" {
		fmt.Fprintf(&w, "; it lists the same associations, limits and defaults as after apply: %s", r.perObjectSame)
	}
	w.WriteString("\n")
	if r.loadFailed != "" {
		fmt.Fprintf(&w, "sacctmgr load: FAILED, no baseline: %s\n", r.loadFailed)
	} else {
		cl, ca := r.median(toolLoad, benchRun.cpuTotal), r.median(toolApply, benchRun.cpuTotal)
		fmt.Fprintf(&w, "first apply, medians: %.2fx the speed of sacctmgr load by wall time (%s), %.2fx by CPU time (%s); "+
			"after every run plan found Slurm in sync and slurmdbd listed the same associations, limits and defaults as after the first apply\n",
			r.load.Seconds()/r.apply.Seconds(), lessTime(r.apply, r.load), cl.Seconds()/ca.Seconds(), lessTime(ca, cl))
	}
	if r.perObject {
		fmt.Fprintf(&w, "sacctmgr, time per tenant (the first is the QOS): %s\n", blockTimes(r.blocks))
	}
	for i, run := range r.runs {
		if run.timeline != "" {
			fmt.Fprintf(&w, "run %d (apply), its writes: %s\n", i+1, run.timeline)
		}
	}
	return w.String()
}

// runsTable lists every run of load and apply with its wall and CPU
// times and the machine's load, then the medians and their ratios.
func (r benchResult) runsTable() string {
	var w strings.Builder
	w.WriteString("\nEach run from an empty slurmdbd, in the order run (CPU time: of the bed's daemons from /proc/<pid>/stat, " +
		"and of the client, sacctmgr or strata-policy with its sacctmgr runs, from getrusage):\n\n" +
		"| run | what | wall time | CPU slurmdbd | CPU mariadbd | CPU slurmrestd | CPU slurmctld | CPU client | CPU total | load average at the start | at the end | slurmdbd holds the policy |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, run := range r.runs {
		c := run.cpu()
		held := run.same // "yes (N lines)"
		if run.failed != "" {
			held = "**no**: " + run.failed
		}
		fmt.Fprintf(&w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", i+1, run.tool, round(run.wall),
			cpuText(c[cpuSlurmdbd]), cpuText(c[cpuMariadbd]), cpuText(c[cpuSlurmrestd]), cpuText(c[cpuSlurmctld]), cpuText(c[cpuClient]),
			cpuText(run.cpuTotal()), run.loadStart, run.loadEnd, held)
	}
	part := func(i int) func(benchRun) time.Duration {
		return func(r benchRun) time.Duration { return r.cpu()[i] }
	}
	meds := map[string][]time.Duration{}
	for _, tool := range []string{toolLoad, toolApply} {
		m := []time.Duration{r.median(tool, benchRun.wallTime)}
		for i := range cpuParts {
			m = append(m, r.median(tool, part(i)))
		}
		meds[tool] = append(m, r.median(tool, benchRun.cpuTotal))
		fmt.Fprintf(&w, "| median | %s | %s | %s | %s | %s | %s | %s | %s | | | |\n", tool, round(m[0]),
			cpuText(m[1]), cpuText(m[2]), cpuText(m[3]), cpuText(m[4]), cpuText(m[5]), cpuText(meds[tool][6]))
	}
	ratio := func(i int) string {
		if meds[toolApply][i] <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", meds[toolLoad][i].Seconds()/meds[toolApply][i].Seconds())
	}
	fmt.Fprintf(&w, "| load / apply | | %s | %s | %s | %s | %s | %s | %s | | | |\n\n", ratio(0), ratio(1), ratio(2), ratio(3), ratio(4), ratio(5), ratio(6))
	return w.String()
}

// blockTimes lists the first and last few times of a run.
func blockTimes(ds []time.Duration) string {
	var parts []string
	for i, d := range ds {
		if i < 4 || i >= len(ds)-3 {
			parts = append(parts, round(d))
		} else if i == 4 {
			parts = append(parts, "...")
		}
	}
	return strings.Join(parts, " ")
}

func round(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

var requestsRE = regexp.MustCompile(`(\d+) requests to slurmrestd \((\d+) reads, (\d+) writes\) and (\d+) sacctmgr runs`)

// requestsLine finds apply's count of requests: "6 (4 reads, 2 writes) +
// 3 sacctmgr runs", and the total.
func requestsLine(b *testing.B, out string) (string, int) {
	m := requestsRE.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no request count in:\n%s", tail(out))
	}
	n, _ := strconv.Atoi(m[1])
	runs, _ := strconv.Atoi(m[4])
	return fmt.Sprintf("%s (%s reads, %s writes) + %s sacctmgr runs", m[1], m[2], m[3], m[4]), n + runs
}

func benchScale(v string) (policygen.Spec, error) {
	if v == "" {
		v = "20x10x20"
	}
	var s policygen.Spec
	if _, err := fmt.Sscanf(v, "%dx%dx%d", &s.Tenants, &s.Projects, &s.Members); err != nil || s.Tenants < 1 || s.Projects < 1 || s.Members < 1 {
		return s, fmt.Errorf("%s=%q: want tenants x projects x members, e.g. 200x10x20", benchScaleVar, v)
	}
	return s, nil
}

func benchPolicy(b *testing.B, dir, name string, s policygen.Spec, st *policygen.Stats) (string, *compile.State) {
	var buf bytes.Buffer
	var err error
	if *st, err = policygen.Write(&buf, s); err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := spec.Parse(file, buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	state, err := compile.Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	return file, state
}

// sacctmgrCalls are the per-object calls that make the state, one per
// QOS, account and user association, with the fields strata-policy writes:
// the QOS first, then tenant by tenant its account, its projects and its
// users' associations, as a script looping over a policy would. Each user
// must be in one tenant only, as policygen makes them.
func sacctmgrCalls(b *testing.B, st *compile.State) [][][]string {
	var qos [][]string
	for _, q := range st.QOS {
		args := []string{"add", "qos", q.Name, "Description=" + q.Description, "Priority=" + strconv.FormatInt(q.Priority, 10)}
		if q.MaxWall > 0 {
			args = append(args, "MaxWall="+strconv.FormatInt(int64(q.MaxWall/time.Minute), 10))
		}
		if len(q.MaxTRESPerJob) > 0 {
			args = append(args, "MaxTRESPerJob="+q.MaxTRESPerJob.String())
		}
		if len(q.Preempt) > 0 {
			args = append(args, "Preempt="+strings.Join(q.Preempt, ","))
		}
		if q.PreemptMode != "" {
			args = append(args, "PreemptMode="+q.PreemptMode)
		}
		qos = append(qos, args)
	}
	blocks := [][][]string{qos}
	tenantOf := map[string]string{}
	at := map[string]int{} // tenant → index in blocks
	for _, a := range st.Accounts {
		tenantOf[a.Name] = a.Tenant
		if _, ok := at[a.Tenant]; !ok {
			at[a.Tenant] = len(blocks)
			blocks = append(blocks, nil)
		}
		args := []string{"add", "account", a.Name, "Cluster=" + st.Cluster, "Parent=" + a.Parent, "Description=" + a.Description,
			"Organization=" + compile.Marker, "Fairshare=" + strconv.FormatInt(a.Fairshare, 10)}
		if len(a.QOS) > 0 {
			args = append(args, "QOS="+strings.Join(a.QOS, ","), "DefaultQOS="+a.DefaultQOS)
		}
		if len(a.GrpTRES) > 0 {
			args = append(args, "GrpTRES="+a.GrpTRES.String())
		}
		if len(a.GrpTRESMins) > 0 {
			args = append(args, "GrpTRESMins="+a.GrpTRESMins.String())
		}
		if a.GrpJobs > 0 {
			args = append(args, "GrpJobs="+strconv.FormatInt(a.GrpJobs, 10))
		}
		blocks[at[a.Tenant]] = append(blocks[at[a.Tenant]], args)
	}
	for _, u := range st.Users {
		// The default account first: sacctmgr sets a new user's default
		// with the first association.
		accts := []string{u.DefaultAccount}
		for _, a := range slices.Sorted(maps.Keys(u.Accounts)) {
			if a != u.DefaultAccount {
				accts = append(accts, a)
			}
		}
		t := tenantOf[u.DefaultAccount]
		for i, a := range accts {
			if tenantOf[a] != t {
				b.Fatalf("user %s is in tenants %s and %s: the benchmark's sacctmgr run wants one tenant per user", u.Name, t, tenantOf[a])
			}
			args := []string{"add", "user", u.Name, "Cluster=" + st.Cluster, "Account=" + a}
			if i == 0 {
				args = append(args, "DefaultAccount="+a)
			}
			if n := u.Accounts[a]; n > 0 {
				args = append(args, "GrpTRES=gres/gpu="+strconv.FormatInt(n, 10))
			}
			blocks[at[t]] = append(blocks[at[t]], args)
		}
	}
	return blocks
}

// benchSacctmgr runs the test bed's sacctmgr (its bin/ wrapper) with -i.
func benchSacctmgr(bed *testbed.Bed, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, filepath.Join(bed.Bin, "sacctmgr"), append([]string{"-i"}, args...)...).CombinedOutput()
}

// benchSacctmgrInput runs the test bed's sacctmgr with -i and input on its
// standard input.
func benchSacctmgrInput(bed *testbed.Bed, input []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bed.Bin, "sacctmgr"), append([]string{"-i"}, args...)...)
	cmd.Stdin = bytes.NewReader(input)
	return cmd.CombinedOutput()
}

// resetBed empties the bench bed's slurmdbd.
func resetBed(b *testing.B, reset string) {
	b.Helper()
	out, err := exec.Command("bash", "-c", reset).CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", reset, err, out)
	}
}

// benchPolicyRun runs strata-policy in this process, as the binary would.
func benchPolicyRun(b *testing.B, bed *testbed.Bed, file string, args ...string) (int, string) {
	return benchPolicyRunLevel(b, bed, "warn", file, args...)
}

// benchPolicyRunLevel is benchPolicyRun logging at level.
func benchPolicyRunLevel(b *testing.B, bed *testbed.Bed, level, file string, args ...string) (int, string) {
	var out, errb bytes.Buffer
	full := append([]string{"strata-policy", "--log-level", level}, args...)
	full = append(full, "--policy", file, "--url", bed.URL, "--user", bed.AdminUser, "--token-file", bed.TokenFile)
	full = append(full, "--sacctmgr", filepath.Join(bed.Bin, "sacctmgr"))
	err := run(context.Background(), full, &out, &errb)
	return cliexit.CodeOf(err), out.String() + errb.String() + fmt.Sprint(err)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// maxAllowedPacket is the bed's MariaDB max_allowed_packet ("256 MiB"):
// slurmdbd loses a load whose transaction log is larger.
func maxAllowedPacket(bed *testbed.Bed) string {
	out, err := exec.Command("chroot", bed.Root, "mariadb", "-N", "-e", "SELECT @@max_allowed_packet").Output()
	n, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || perr != nil {
		return fmt.Sprintf("? (%v)", errors.Join(err, perr))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// dbdErrorRE matches slurmdbd's log lines of a write it lost.
var dbdErrorRE = regexp.MustCompile(`(?m)^.*(gone away|Couldn't add txn|mysql_query failed).*$`)

// dbdErrors lists the first of slurmdbd's lost-write lines since the
// bed was reset, or says there are none.
func dbdErrors(bed *testbed.Bed) string {
	log, err := os.ReadFile(filepath.Join(bed.Root, "var/log/slurm/slurmdbd.log"))
	if err != nil {
		return fmt.Sprintf("? (%v)", err)
	}
	m := dbdErrorRE.FindAllString(string(log), 3)
	if len(m) == 0 {
		return "no storage errors"
	}
	for i := range m {
		m[i] = strings.TrimSpace(m[i])
		if len(m[i]) > 200 {
			m[i] = m[i][:200] + "..."
		}
	}
	return strings.Join(m, " | ")
}

// timelineRE matches apply's log lines of its batches and loads.
var timelineRE = regexp.MustCompile(`(?m)^time=(\S+) level=INFO msg="(policy batch applied|policy changes loaded|policy changes loaded in parts side by side|sacctmgr load)"(.*)$`)

// timeline says when, after start, apply logged each batch and load it
// wrote, and for the parts of a load when each asked to commit and
// committed: where its time goes.
func timeline(start time.Time, log string) string {
	var parts []string
	for _, m := range timelineRE.FindAllStringSubmatch(log, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		what := m[2]
		if what == "sacctmgr load" {
			f := logFields(m[3])
			what = fmt.Sprintf("part %s/%s asked after %s, done after %s", f["part"], f["of"], roundText(f["asked_after"]), roundText(f["took"]))
			if r := f["round"]; r != "" && r != "1" {
				what += " (round " + r + ")"
			}
			if f["late"] == "true" {
				what += ", told no: too late for its turn"
			}
		}
		parts = append(parts, fmt.Sprintf("+%s %s", round(at.Sub(start)), what))
	}
	return strings.Join(parts, "; ")
}

// logFields are the key=value fields of a slog text line.
func logFields(s string) map[string]string {
	f := map[string]string{}
	for kv := range strings.FieldsSeq(s) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			f[k] = v
		}
	}
	return f
}

// roundText rounds a logged duration.
func roundText(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return round(d)
}

func TestBenchTimeline(t *testing.T) {
	start := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	log := `time=2026-12-01T16:00:01.000Z level=INFO msg="policy batch applied" kind=qos changes=3
time=2026-12-01T16:00:05.000Z level=INFO msg="policy changes loaded" changes=2200 first=a last=b
time=2026-12-01T16:00:09.250Z level=INFO msg="sacctmgr load" part=1 of=2 bytes=10 committed=true asked_after=3.04s took=4.21s error=<nil>
time=2026-12-01T16:00:09.000Z level=WARN msg="sacctmgr load" part=9
time=2026-12-01T16:00:09.500Z level=INFO msg="sacctmgr load" part=2 of=2 round=1 committed=false late=true asked_after=1s took=8s error=<nil>
time=2026-12-01T16:00:10.000Z level=INFO msg="sacctmgr load" part=2 of=2 round=2 committed=true late=false asked_after=0.2s took=0.5s error=<nil>
time=2026-12-01T16:00:10.000Z level=INFO msg="policy changes loaded in parts side by side" changes=9 parts=2
`
	want := "+1s policy batch applied; +5s policy changes loaded; +9.3s part 1/2 asked after 3s, done after 4.2s; " +
		"+9.5s part 2/2 asked after 1s, done after 8s, told no: too late for its turn; +10s part 2/2 asked after 200ms, done after 500ms (round 2); " +
		"+10s policy changes loaded in parts side by side"
	if got := timeline(start, log); got != want {
		t.Errorf("timeline:\n got %s\nwant %s", got, want)
	}
}

// benchRun is one run of sacctmgr load or apply on an empty slurmdbd.
type benchRun struct {
	tool          string // toolLoad or toolApply
	wall          time.Duration
	qos           time.Duration // of a load: its sacctmgr calls for the QOS
	before, after cpuSample
	// The machine's load average (1, 5, 15 minutes) at the start and end.
	loadStart, loadEnd string
	inSync             string // what plan says after it
	same               string // whether slurmdbd lists the same as after the first apply
	log                string // slurmdbd's storage errors after it (dbdErrors)
	failed             string // why slurmdbd does not hold the policy after it; empty when it does
	// Of an apply: its requests, and when its writes finished (timeline).
	summary  string
	requests int
	timeline string
}

// What a run's CPU time is counted of: the bed's daemons that do its work,
// and the client, sacctmgr or strata-policy with its sacctmgr runs.
const (
	cpuSlurmdbd = iota
	cpuMariadbd
	cpuSlurmrestd
	cpuSlurmctld
	cpuClient
	cpuParts
)

// bedPidFiles are the pid files of the daemons counted, by cpu index.
var bedPidFiles = [cpuClient]string{cpuSlurmdbd: "slurmdbd", cpuMariadbd: "mariadb", cpuSlurmrestd: "slurmrestd", cpuSlurmctld: "slurmctld"}

// cpuSample is the CPU time used so far by each of the cpu parts.
type cpuSample [cpuParts]time.Duration

// cpu is the CPU time a run used, by part.
func (r benchRun) cpu() cpuSample {
	var d cpuSample
	for i := range d {
		d[i] = r.after[i] - r.before[i]
	}
	return d
}

func (r benchRun) wallTime() time.Duration { return r.wall }

// cpuTotal is the CPU time of the run: the bed's daemons and the client.
func (r benchRun) cpuTotal() time.Duration {
	var sum time.Duration
	for _, d := range r.cpu() {
		sum += d
	}
	return sum
}

// median is the median of a measure of the runs of a tool.
func (r benchResult) median(tool string, of func(benchRun) time.Duration) time.Duration {
	var ds []time.Duration
	for _, run := range r.runs {
		if run.tool == tool {
			ds = append(ds, of(run))
		}
	}
	return median(ds)
}

// bedDaemons are the pids of the bench bed's daemons, by cpu index, read
// after a reset restarted them; each must run in the bed's root.
func bedDaemons(b *testing.B, bed *testbed.Bed) [cpuClient]int {
	b.Helper()
	var pids [cpuClient]int
	for i, name := range bedPidFiles {
		f := filepath.Join(filepath.Dir(bed.Root), "pids", name+".pid")
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if pids[i], err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		if root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pids[i])); err != nil || root != bed.Root {
			b.Fatalf("%s: pid %d is not a daemon of the bed (root %q, %v)", f, pids[i], root, err)
		}
	}
	return pids
}

// cpuNow samples the CPU time used by the daemons so far, from their
// /proc/<pid>/stat, and by this process and its children that have ended
// (sacctmgr runs, the bed's own and apply's).
func cpuNow(b *testing.B, pids [cpuClient]int) cpuSample {
	b.Helper()
	var s cpuSample
	for i, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatalf("%s: %v", bedPidFiles[i], err)
		}
		if s[i], err = statCPU(string(data)); err != nil {
			b.Fatalf("%s: %v", bedPidFiles[i], err)
		}
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		s[cpuClient] += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s
}

// lessTime says how much less time (or more) a took than b.
func lessTime(a, b time.Duration) string {
	if a <= b {
		return fmt.Sprintf("%.1f%% less time", 100*(1-a.Seconds()/b.Seconds()))
	}
	return fmt.Sprintf("%.1f%% more time", 100*(a.Seconds()/b.Seconds()-1))
}

// cpuText is a CPU time for the table, in seconds.
func cpuText(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
