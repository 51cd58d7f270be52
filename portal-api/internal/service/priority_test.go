package service

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// bedWeights are the test beds' slurm.conf (test/testbed/slurm/etc):
// PriorityWeightFairshare=10000, Age=1000, QOS=5000, TRES=GRES/gpu=1000,
// PriorityCalcPeriod=1, PriorityMaxAge at its default of 7 days.
var bedWeights = PriorityWeights{Fairshare: 10000, Age: 1000, QOS: 5000, TRES: map[string]float64{"gres/gpu": 1000}, CalcPeriod: time.Minute}

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
