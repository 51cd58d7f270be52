package service

import (
	"encoding/json"
	"math"
	"slices"
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
var bedWeights = PriorityWeights{Fairshare: 10000, Age: 1000, QOS: 5000, TRES: map[string]float64{"gres/gpu": 1000}, CalcPeriod: time.Minute}

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
		weights PriorityWeights
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
			weights: PriorityWeights{Fairshare: 10000, Age: 1000, QOS: 5000, TRES: map[string]float64{"gres/gpu": 2000}},
			want:    want{factors: map[string]float64{"age": 0.05, "fairshare": 0, "qos": 0, "tres:gres/gpu": 125}, unexplained: 62 - 125},
		},
		"size and partition": {
			// Without their weights in the cluster's slurm.conf, these
			// factors are ones slurmctld did not add.
			job:     clustertest.Job{ID: 6, State: "PENDING"},
			weights: PriorityWeights{Partition: 1000, JobSize: 1000, TRES: map[string]float64{"gres/gpu": 1000}},
			want: want{factors: map[string]float64{"partition": 1000, "job_size": 1000 * (1.0/4 + 1.0/64) / 2, "tres:gres/gpu": 62.5},
				unexplained: 62 - 1195},
		},
	}
	for _, release := range []string{"26.05", "24.11"} {
		for name, tc := range tests {
			t.Run(release+"/"+name, func(t *testing.T) {
				snap := snapshotOf(t, release, at, tc.job)
				w := tc.weights
				o := orderQueue(snap, &w)
				pl := o.places[0]
				if pl == nil || pl.factors == nil {
					t.Fatalf("no factors: %+v", pl)
				}
				f := pl.factors
				got := want{factors: map[string]float64{}, consistent: f.consistent, unexplained: f.unexplained}
				for k, v := range f.byName {
					got.factors[k] = v
				}
				for k, v := range f.tres {
					got.factors["tres:"+k] = v
				}
				if f.nice != 0 {
					got.factors["nice"] = f.nice
				}
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 0.01 })); diff != "" {
					t.Errorf("factors (-want +got):\n%s", diff)
				}
				if p := snap.Jobs[0].Priority; f.consistent && int64(math.Floor(f.sum())) != p {
					t.Errorf("consistent factors add up to %g, Slurm's priority is %d", f.sum(), p)
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
	o := orderQueue(snap, &bedWeights)
	type place struct {
		Position int
		Ahead    []int64
		Holding  string
	}
	got := map[int64]place{}
	for i, pl := range o.places {
		p := place{Position: pl.position}
		for _, a := range pl.ahead {
			p.Ahead = append(p.Ahead, snap.Jobs[a].ID)
		}
		p.Holding, _, _ = o.holdingBack(pl)
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
	o.places[5].ahead = o.places[5].ahead[1:]
	if name, gap, _ := o.holdingBack(o.places[5]); name != "age" || math.Abs(gap-499.9) > 0.1 {
		t.Errorf("holding back = %s %g, want age 499.9", name, gap)
	}
}

// TestQueuePriority: GET /v1/queue shows each pending job's place, its
// factors, and of the jobs ahead only those the caller may read.
func TestQueuePriority(t *testing.T) {
	h := newHarness(t)
	for user, want := range map[string]map[int64][]int64{
		// gpu1's pending jobs are all of priority 62: in ID order.
		"mem":  {910102: {}},
		"vmem": {910103: {}},
		"ops":  {910102: {}, 910103: {910102}, 910105: {910102, 910103}, 920201: nil},
	} {
		code, body := h.do(user, "GET", "/v1/queue", nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", user, code, body)
		}
		var q struct {
			Groups []struct {
				Jobs []struct {
					ID        int64   `json:"id"`
					Position  int     `json:"position"`
					Ahead     int     `json:"ahead"`
					AheadJobs []int64 `json:"ahead_jobs"`
					Factors   *struct {
						Consistent  bool
						Unexplained int64
						Tres        map[string]float64
					}
				}
			}
		}
		if err := json.Unmarshal(body, &q); err != nil {
			t.Fatal(err)
		}
		got := map[int64][]int64{}
		for _, g := range q.Groups {
			for _, j := range g.Jobs {
				got[j.ID] = j.AheadJobs
				if j.ID/10000 != 91 {
					if j.Factors != nil {
						t.Errorf("%s: job %d of gpu2, which has no priority weights, has factors", user, j.ID)
					}
					continue
				}
				// The replayed record's priority is of its submission, ten
				// minutes before the harness's clock: by then slurmctld,
				// computing it every minute, would have added an age point.
				if j.Factors == nil || j.Factors.Consistent || j.Factors.Unexplained != -1 || j.Factors.Tres["gres/gpu"] != 62.5 {
					t.Errorf("%s: job %d: factors %+v", user, j.ID, j.Factors)
				}
				if j.Position != j.Ahead+1 || j.Ahead < len(j.AheadJobs) {
					t.Errorf("%s: job %d at %d with %d ahead (%v)", user, j.ID, j.Position, j.Ahead, j.AheadJobs)
				}
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				delete(got, id) // other users' pending jobs, checked elsewhere
			}
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []int64) bool { return slices.Equal(a, b) })); diff != "" {
			t.Errorf("%s: jobs ahead (-want +got):\n%s", user, diff)
		}
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
		orderQueue(snap, &bedWeights)
	}
}
