package priority

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// bedWeights are the test beds' slurm.conf (test/testbed/slurm/etc):
// PriorityWeightFairshare=10000, Age=1000, QOS=5000, TRES=GRES/gpu=1000,
// PriorityCalcPeriod=1, PriorityMaxAge at its default of 7 days.
var bedWeights = Weights{Fairshare: 10000, Age: 1000, QOS: 5000, TRES: map[string]float64{"gres/gpu": 1000}, CalcPeriod: time.Minute}

// capturedAccrue is the accrue (and submit) time of the captured job.
const capturedAccrue = 1795983272

// snapshotOf polls a bed replaying release with jobs, at the time at.
func snapshotOf(t *testing.T, release string, at time.Time, jobs ...clustertest.Job) *cluster.Snapshot {
	t.Helper()
	bed := clustertest.New(t, release, jobs...)
	p := cluster.New(cluster.Config{Name: "c", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
		Now: func() time.Time { return at }})
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p.Snapshot()
}

// TestPriorityFactors: the factors worked out from the captured records
// (a job of 2 of partition gpu's 32 GPUs, alice's fair-share factor 0,
// QOS normal of priority 0) add up to the priority slurmctld gave the job
// (62), and to the priorities it would give the same job older, of a
// user with a fair-share factor of 1, or nicer; weights other than the
// cluster's leave a part unexplained.
func TestPriorityFactors(t *testing.T) {
	at := time.Unix(capturedAccrue+30, 0)
	type want struct {
		factors     map[string]float64
		consistent  bool
		unexplained int64
	}
	tests := map[string]struct {
		job     clustertest.Job
		weights Weights
		want    want
	}{
		"captured": {
			job:     clustertest.Job{ID: 1, State: "PENDING"},
			weights: bedWeights,
			want:    want{factors: map[string]float64{"age": 0.025, "fairshare": 0, "qos": 0, "tres:gres/gpu": 62.5}, consistent: true},
		},
		"half the max age": {
			// 3.5 days old: an age factor of 0.5, 500 points, 499.8 two
			// minutes before (the window of slurmctld's last pass).
			job:     clustertest.Job{ID: 2, State: "PENDING", Priority: 62 + 500, AccrueTime: capturedAccrue + 30 - 302400},
			weights: bedWeights,
			want:    want{factors: map[string]float64{"age": 499.9, "fairshare": 0, "qos": 0, "tres:gres/gpu": 62.5}, consistent: true},
		},
		"fair-share factor 1": {
			job:     clustertest.Job{ID: 3, State: "PENDING", User: "root", Account: "root", Priority: 10062},
			weights: bedWeights,
			want:    want{factors: map[string]float64{"age": 0.025, "fairshare": 10000, "qos": 0, "tres:gres/gpu": 62.5}, consistent: true},
		},
		"nice": {
			job:     clustertest.Job{ID: 4, State: "PENDING", Priority: 52, Nice: 10},
			weights: bedWeights,
			want:    want{factors: map[string]float64{"age": 0.025, "fairshare": 0, "qos": 0, "tres:gres/gpu": 62.5, "nice": 10}, consistent: true},
		},
		"other weights": {
			job:     clustertest.Job{ID: 5, State: "PENDING"},
			weights: Weights{Fairshare: 10000, Age: 1000, QOS: 5000, TRES: map[string]float64{"gres/gpu": 2000}},
			want:    want{factors: map[string]float64{"age": 0.05, "fairshare": 0, "qos": 0, "tres:gres/gpu": 125}, unexplained: 62 - 125},
		},
		"size and partition": {
			// Without their weights in the cluster's slurm.conf, these
			// factors are ones slurmctld did not add.
			job:     clustertest.Job{ID: 6, State: "PENDING"},
			weights: Weights{Partition: 1000, JobSize: 1000, TRES: map[string]float64{"gres/gpu": 1000}},
			want: want{factors: map[string]float64{"partition": 1000, "job_size": 1000 * (1.0/4 + 1.0/64) / 2, "tres:gres/gpu": 62.5},
				unexplained: 62 - 1195},
		},
	}
	for _, release := range []string{"26.05", "24.11"} {
		for name, tc := range tests {
			t.Run(release+"/"+name, func(t *testing.T) {
				snap := snapshotOf(t, release, at, tc.job)
				w := tc.weights
				o := OrderQueue(snap, &w)
				pl := o.Places[0]
				if pl == nil || pl.Factors == nil {
					t.Fatalf("no factors: %+v", pl)
				}
				f := pl.Factors
				got := want{factors: map[string]float64{}, consistent: f.Consistent, unexplained: f.Unexplained}
				for k, v := range f.ByName {
					got.factors[k] = v
				}
				for k, v := range f.TRES {
					got.factors["tres:"+k] = v
				}
				if f.Nice != 0 {
					got.factors["nice"] = f.Nice
				}
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 0.01 })); diff != "" {
					t.Errorf("factors (-want +got):\n%s", diff)
				}
				if p := snap.Jobs[0].Priority; f.Consistent && int64(math.Floor(f.Sum())) != p {
					t.Errorf("consistent factors add up to %g, Slurm's priority is %d", f.Sum(), p)
				}
			})
		}
	}
}

// TestQueueOrder: each partition's pending jobs by priority, then
// submission, then ID; a held job has no place; the factor holding a job
// back is the one it lacks most against the jobs ahead.
func TestQueueOrder(t *testing.T) {
	at := time.Unix(capturedAccrue+30, 0)
	snap := snapshotOf(t, "26.05", at,
		clustertest.Job{ID: 10, State: "PENDING"},
		clustertest.Job{ID: 11, State: "PENDING", User: "root", Account: "root", Priority: 10062},
		clustertest.Job{ID: 12, State: "PENDING", Priority: 562, AccrueTime: capturedAccrue + 30 - 302400},
		clustertest.Job{ID: 13, State: "PENDING", Hold: true},
		clustertest.Job{ID: 14, State: "RUNNING"},
		clustertest.Job{ID: 9, State: "PENDING"},
	)
	o := OrderQueue(snap, &bedWeights)
	type place struct {
		Position int
		Ahead    []int64
		Holding  string
	}
	got := map[int64]place{}
	for i, pl := range o.Places {
		p := place{Position: pl.Position}
		for _, a := range pl.Ahead {
			p.Ahead = append(p.Ahead, snap.Jobs[a].ID)
		}
		p.Holding, _, _ = o.HoldingBack(pl)
		got[snap.Jobs[i].ID] = p
	}
	want := map[int64]place{
		11: {Position: 1},
		12: {Position: 2, Ahead: []int64{11}, Holding: "fairshare"},
		9:  {Position: 3, Ahead: []int64{11, 12}, Holding: "fairshare"},
		10: {Position: 4, Ahead: []int64{11, 12, 9}, Holding: "fairshare"},
		13: {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("places (-want +got):\n%s", diff)
	}
	// Against job 12 alone, job 9 lacks age most.
	o.Places[5].Ahead = o.Places[5].Ahead[1:]
	if name, gap, _ := o.HoldingBack(o.Places[5]); name != "age" || math.Abs(gap-499.9) > 0.1 {
		t.Errorf("holding back = %s %g, want age 499.9", name, gap)
	}
}

// BenchmarkQueueOrder: ordering a snapshot's 2,000 pending jobs and
// working out their factors, once per poll that changed the job list.
func BenchmarkQueueOrder(b *testing.B) {
	var jobs []clustertest.Job
	for i := range 2000 {
		jobs = append(jobs, clustertest.Job{ID: int64(100000 + i), State: "PENDING", Priority: int64(62 + i%500), AccrueTime: capturedAccrue - int64(i)})
	}
	bed := clustertest.New(b, "26.05", jobs...)
	p := cluster.New(cluster.Config{Name: "c", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
		Now: func() time.Time { return time.Unix(capturedAccrue+30, 0) }})
	if err := p.Poll(b.Context()); err != nil {
		b.Fatal(err)
	}
	snap := p.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		OrderQueue(snap, &bedWeights)
	}
}
