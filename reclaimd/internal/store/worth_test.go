package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// A reclaim is kept once; the runs on its GPUs and the handovers worked
// out from them are kept and replaced, and Worth adds them up.
func TestWorth(t *testing.T) { eachDB(t, testWorth) }

func testWorth(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	gpu := GPU{Node: "gpu1", Index: 0}
	r := Reclaim{RecordID: 7, JobID: 42, Tenant: "acme", Rule: "train", Kind: "requeue", At: t0, LimitEnd: t0.Add(time.Hour), GPUs: []GPU{gpu}}
	for range 2 {
		if err := s.AddReclaim(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	open, err := s.OpenReclaims(ctx, t0.Add(time.Minute))
	if err != nil || len(open) != 1 || open[0].RecordID != 7 || !open[0].LimitEnd.Equal(t0.Add(time.Hour)) {
		t.Fatalf("open reclaims: %+v, %v", open, err)
	}
	if open, _ := s.OpenReclaims(ctx, t0.Add(2*time.Hour)); len(open) != 0 {
		t.Errorf("open after the limit: %+v", open)
	}
	run := FreedRun{JobID: 43, Start: t0.Add(time.Minute), GPU: gpu, Tenant: "beta", SeenAt: t0.Add(2 * time.Minute)}
	if err := s.SaveFreedRuns(ctx, []FreedRun{run}); err != nil {
		t.Fatal(err)
	}
	run.End, run.SeenAt = t0.Add(11*time.Minute), t0.Add(12*time.Minute)
	if err := s.SaveFreedRuns(ctx, []FreedRun{run}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.FreedRuns(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]FreedRun{run}, runs); diff != "" {
		t.Errorf("freed runs (-want +got):\n%s", diff)
	}
	end := run.End
	h := Handover{RecordID: 7, Handover: reclaimapi.Handover{JobID: 43, Start: run.Start, GPU: gpu, Tenant: "beta", End: &end,
		CountedUntil: end, GPUSeconds: 600, StartGainSeconds: 30.5}}
	before, err := s.ReplaceHandovers(ctx, []int64{7}, []Handover{h})
	if err != nil || before[7] != 0 {
		t.Fatalf("first handovers: %v, %v", before, err)
	}
	h.GPUSeconds = 601.25
	if before, err = s.ReplaceHandovers(ctx, []int64{7}, []Handover{h}); err != nil || before[7] != 600 {
		t.Fatalf("replaced handovers: before %v, %v; want 600", before, err)
	}
	w, err := s.Worth(ctx, t0, 0, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Reclaims) != 1 || !w.Reclaims[0].Final || w.Reclaims[0].ObservedGPUSeconds != 601.25 || w.Reclaims[0].BoundGPUSeconds != 3600 {
		t.Errorf("worth: %+v", w.Reclaims)
	}
	if diff := cmp.Diff([]reclaimapi.WorthTotal{{Tenant: "acme", Rule: "train", Reclaims: 1, BoundGPUSeconds: 3600, ObservedGPUSeconds: 601.25,
		Beneficiaries: 1, StartGainSeconds: 30.5}}, w.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
}
