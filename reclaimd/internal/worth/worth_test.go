package worth

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func TestHandovers(t *testing.T) {
	g0, g1, g2 := GPU{"gpu1", 0}, GPU{"gpu1", 1}, GPU{"gpu2", 0}
	// The reclaimed job 100 held gpu1:0 and gpu1:1 from 11:00 with a two
	// hours' limit (end 13:00); it was requeued at 12:00.
	rec := Reclaim{ID: 7, JobID: 100, Tenant: "lab-a", Rule: "train", At: at(0), LimitEnd: at(60), GPUs: []GPU{g0, g1}}
	type want struct {
		job     int64
		gpu     GPU
		seconds float64
		gain    time.Duration
	}
	tests := map[string]struct {
		reclaims []Reclaim
		runs     []Run
		now      time.Time
		want     []want
	}{
		"one job on both GPUs, ended before the limit": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 201, Tenant: "lab-b", Start: at(1), End: at(31), GPUs: []GPU{g0, g1}}},
			now:      at(90),
			want:     []want{{201, g0, 30 * 60, 59 * time.Minute}, {201, g1, 30 * 60, 59 * time.Minute}},
		},
		"started in the second of the action (Slurm's whole seconds)": {
			reclaims: []Reclaim{{ID: 7, JobID: 100, At: at(0).Add(300 * time.Millisecond), LimitEnd: at(60), GPUs: []GPU{g0}}},
			runs:     []Run{{JobID: 217, Start: at(0), End: at(10), GPUs: []GPU{g0}}},
			now:      at(90),
			want:     []want{{217, g0, 10 * 60, 60 * time.Minute}},
		},
		"beneficiary started before the action": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 202, Start: at(-5), End: at(30), GPUs: []GPU{g0}}},
			now:      at(90),
		},
		"on another GPU": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 203, Start: at(1), End: at(30), GPUs: []GPU{g2}}},
			now:      at(90),
		},
		"started after the limit end": {
			reclaims: []Reclaim{{ID: 7, JobID: 100, At: at(0), LimitEnd: at(3), GPUs: []GPU{g0}}},
			runs:     []Run{{JobID: 204, Start: at(4), End: at(30), GPUs: []GPU{g0}}},
			now:      at(90),
		},
		"ran past the limit end: clipped": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 205, Start: at(2), End: at(120), GPUs: []GPU{g0}}},
			now:      at(150),
			want:     []want{{205, g0, 58 * 60, 58 * time.Minute}},
		},
		"started later than the gap": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 206, Start: at(6), End: at(30), GPUs: []GPU{g0}}},
			now:      at(90),
		},
		"two beneficiaries on one GPU in sequence": {
			reclaims: []Reclaim{rec},
			runs: []Run{
				{JobID: 207, Start: at(1), End: at(20), GPUs: []GPU{g0}},
				{JobID: 208, Start: at(22), End: at(50), GPUs: []GPU{g0}},
				// Long after the one before ended: the GPU sat unused.
				{JobID: 209, Start: at(57), End: at(70), GPUs: []GPU{g0}},
			},
			now:  at(90),
			want: []want{{207, g0, 19 * 60, 59 * time.Minute}, {208, g0, 28 * 60, 38 * time.Minute}},
		},
		"still running: counted until now": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 210, Start: at(1), GPUs: []GPU{g1}}},
			now:      at(11),
			want:     []want{{210, g1, 10 * 60, 59 * time.Minute}},
		},
		"still running past the limit end: clipped": {
			reclaims: []Reclaim{rec},
			runs:     []Run{{JobID: 210, Start: at(1), GPUs: []GPU{g1}}},
			now:      at(200),
			want:     []want{{210, g1, 59 * 60, 59 * time.Minute}},
		},
		"beneficiaries of two tenants": {
			reclaims: []Reclaim{rec},
			runs: []Run{
				{JobID: 211, Tenant: "lab-b", Account: "b1", Start: at(1), End: at(11), GPUs: []GPU{g0}},
				{JobID: 212, Tenant: "lab-c", Account: "c1", Start: at(2), End: at(32), GPUs: []GPU{g1}},
			},
			now:  at(90),
			want: []want{{211, g0, 10 * 60, 59 * time.Minute}, {212, g1, 30 * 60, 58 * time.Minute}},
		},
		"the reclaimed job back on its GPU ends the chain": {
			reclaims: []Reclaim{rec},
			runs: []Run{
				{JobID: 100, Start: at(1), End: at(10), GPUs: []GPU{g0}},
				{JobID: 213, Start: at(11), End: at(20), GPUs: []GPU{g0}},
			},
			now: at(90),
		},
		"no time limit: no figure": {
			reclaims: []Reclaim{{ID: 7, JobID: 100, At: at(0), GPUs: []GPU{g0}}},
			runs:     []Run{{JobID: 214, Start: at(1), End: at(10), GPUs: []GPU{g0}}},
			now:      at(90),
		},
		"a later reclaim on the GPU takes the later starts": {
			reclaims: []Reclaim{rec, {ID: 8, JobID: 215, At: at(20), LimitEnd: at(100), GPUs: []GPU{g0}}},
			runs: []Run{
				{JobID: 215, Start: at(1), End: at(20), GPUs: []GPU{g0}},
				{JobID: 216, Start: at(21), End: at(80), GPUs: []GPU{g0}},
			},
			now: at(120),
			// 215 took the GPU from reclaim 7 until it was reclaimed
			// itself; 216 is reclaim 8's (checked below).
			want: []want{{215, g0, 19 * 60, 59 * time.Minute}, {216, g0, 59 * 60, 79 * time.Minute}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := []want{}
			for _, h := range Handovers(tc.reclaims, tc.runs, tc.now, DefaultGap) {
				got = append(got, want{h.JobID, h.GPU, h.Seconds, h.StartGain})
				if h.JobID == 216 && h.Reclaim != 8 {
					t.Errorf("job 216 counted for reclaim %d, want 8 (the later reclaim on its GPU)", h.Reclaim)
				}
				if h.JobID == 215 && h.Reclaim != 7 {
					t.Errorf("job 215 counted for reclaim %d, want 7", h.Reclaim)
				}
			}
			if tc.want == nil {
				tc.want = []want{}
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); d != "" {
				t.Errorf("handovers (-want +got):\n%s", d)
			}
		})
	}
}

func TestHandoverTenantsAndBound(t *testing.T) {
	rec := Reclaim{ID: 1, JobID: 100, At: at(0), LimitEnd: at(60), GPUs: []GPU{{"n", 0}, {"n", 1}}}
	if got, want := rec.BoundSeconds(), 2*3600.0; got != want {
		t.Errorf("bound %v, want %v", got, want)
	}
	hs := Handovers([]Reclaim{rec}, []Run{
		{JobID: 2, Tenant: "b", Account: "acct-b", Start: at(1), End: at(11), GPUs: []GPU{{"n", 0}}},
		{JobID: 3, Tenant: "c", Account: "acct-c", Start: at(1), End: at(31), GPUs: []GPU{{"n", 1}}},
	}, at(90), DefaultGap)
	if len(hs) != 2 || hs[0].Tenant != "b" || hs[0].Account != "acct-b" || hs[1].Tenant != "c" {
		t.Fatalf("handovers %+v: want one of tenant b and one of tenant c", hs)
	}
	if got := Totals(hs)[1]; got != 40*60 {
		t.Errorf("total %v s, want %v", got, 40*60)
	}
}
