package decide_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Size of the benchmark cluster: the 1,000 nodes × 8 GPUs with
// 2,000 running jobs and 10 samples per GPU.
const (
	benchNodes   = 1000
	benchSamples = 10
)

// flatSample is a sample as a source adapter reads it, before the
// snapshot groups samples by GPU.
type flatSample struct {
	gpu decide.GPUKey
	decide.Sample
}

// benchCluster builds the benchmark's cycle. Every 4 nodes hold 8 jobs:
// one of 16 GPUs across 2 nodes, and jobs of 1, 1, 2, 4 and 2, 2, 4 GPUs
// on the other two. Jobs are, in turn, busy, idle, bursty then idle,
// memory-bound and partly idle; some are warned or signalled already, and
// some exempt. Samples come every 3 minutes, 10 per 30-minute window.
func benchCluster() ([]decide.Job, []flatSample, map[int64]decide.JobState, time.Time, reclaimrules.Rules) {
	const step = 3 * time.Minute
	now := t0.Add(3 * time.Hour)
	var jobs []decide.Job
	states := map[int64]decide.JobState{}
	node := func(n int) string { return fmt.Sprintf("gpu-%04d", n) }
	add := func(g []decide.GPUKey) {
		id := int64(len(jobs) + 1)
		j := job(id, g)
		j.Start = t0.Add(-time.Duration(id%60) * time.Minute)
		if id%50 == 0 {
			j.Account = "ops"
		}
		switch id % 7 {
		case 0:
			states[id] = decide.JobState{Phase: decide.Warned, Since: now.Add(-20 * time.Minute), RunStart: j.Start,
				WarnedAt: now.Add(-20 * time.Minute), Rule: "llm", Actions: 1}
		case 1:
			states[id] = decide.JobState{Phase: decide.Signalled, Since: now.Add(-6 * time.Minute), RunStart: j.Start,
				WarnedAt: now.Add(-21 * time.Minute), SignalledAt: now.Add(-6 * time.Minute), Rule: "llm", Actions: 2}
		}
		jobs = append(jobs, j)
	}
	for n := 0; n < benchNodes; n += 4 {
		add(append(gpus(node(n), 8), gpus(node(n+1), 8)...))
		c, d := gpus(node(n+2), 8), gpus(node(n+3), 8)
		add(c[0:1])
		add(c[1:2])
		add(c[2:4])
		add(c[4:8])
		add(d[0:2])
		add(d[2:4])
		add(d[4:8])
	}
	var flat []flatSample
	for _, j := range jobs {
		for gi, g := range j.GPUs {
			for i := benchSamples - 1; i >= 0; i-- {
				at := now.Add(-time.Duration(i) * step)
				s := decide.Sample{At: at, MemUsedMiB: 30000}
				switch j.ID % 5 {
				case 0: // busy
					s.UtilPercent, s.MemActivityPercent = 90, 50
				case 1: // idle
					s.UtilPercent, s.MemActivityPercent = 0, 0.2
				case 2: // bursty, then idle for the window
					if i == benchSamples-1 {
						s.UtilPercent = 0.5
					}
				case 3: // memory-bound
					s.UtilPercent, s.MemActivityPercent = 3, 60
				case 4: // partly idle: the first GPU works
					if gi == 0 {
						s.UtilPercent = 70
					}
				}
				flat = append(flat, flatSample{g, s})
			}
		}
	}
	r := llmRules()
	r.Rules[0].Idle.Window = reclaimrules.Duration(benchSamples * step)
	return jobs, flat, states, now, r
}

// snapshot groups samples by GPU, as the daemon does each cycle.
func snapshot(jobs []decide.Job, flat []flatSample, states map[int64]decide.JobState, now time.Time) decide.Snapshot {
	m := make(map[decide.GPUKey][]decide.Sample, benchNodes*8)
	for _, f := range flat {
		m[f.gpu] = append(m[f.gpu], f.Sample)
	}
	return decide.Snapshot{Taken: now, Jobs: jobs, Samples: m, SampleInterval: 3 * time.Minute, SourceOK: true, SlurmOK: true, States: states}
}

// TestBenchCluster: the benchmark measures the work it claims to, not a
// cluster where every job is skipped early.
func TestBenchCluster(t *testing.T) {
	jobs, flat, states, now, r := benchCluster()
	s := snapshot(jobs, flat, states, now)
	total := 0
	for _, j := range jobs {
		total += len(j.GPUs)
	}
	if len(jobs) != 2000 || total != benchNodes*8 || len(s.Samples) != benchNodes*8 || len(flat) != total*benchSamples {
		t.Fatalf("%d jobs, %d GPUs, %d GPUs with samples, %d samples", len(jobs), total, len(s.Samples), len(flat))
	}
	d := decide.Decide(s, now, r)
	kinds := map[decide.Kind]int{}
	for _, a := range d.Actions {
		kinds[a.Kind]++
	}
	reasons := map[decide.SkipReason]int{}
	for _, sk := range d.Skipped {
		reasons[sk.Reason]++
	}
	t.Logf("actions %v, skipped %v", kinds, reasons)
	for _, k := range []decide.Kind{decide.Warn, decide.Notify, decide.Recover} {
		if kinds[k] == 0 {
			t.Errorf("no %s action", k)
		}
	}
	if kinds[decide.Signal]+kinds[decide.Requeue] != 10 {
		t.Errorf("%d signals and requeues, want the limit of 10", kinds[decide.Signal]+kinds[decide.Requeue])
	}
	for _, r := range []decide.SkipReason{decide.SkipBusy, decide.SkipExempt, decide.SkipActionLimit} {
		if reasons[r] == 0 {
			t.Errorf("no job skipped as %s", r)
		}
	}
	if reasons[decide.SkipStaleData] != 0 {
		t.Errorf("%d jobs with stale data: the fixture is wrong", reasons[decide.SkipStaleData])
	}
}

// BenchmarkDecide is one cycle's decision for 1,000 nodes × 8 GPUs and
// 2,000 jobs. Run with -cpu 1: the goal is well under 100 ms.
func BenchmarkDecide(b *testing.B) {
	jobs, flat, states, now, r := benchCluster()
	s := snapshot(jobs, flat, states, now)
	b.ReportAllocs()
	for b.Loop() {
		decide.Decide(s, now, r)
	}
}

// BenchmarkSnapshotAndDecide adds grouping the cycle's 80,000 samples by
// GPU, the part of building the snapshot that scales with the cluster.
func BenchmarkSnapshotAndDecide(b *testing.B) {
	jobs, flat, states, now, r := benchCluster()
	b.ReportAllocs()
	for b.Loop() {
		decide.Decide(snapshot(jobs, flat, states, now), now, r)
	}
}
