package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A fault is kept once however often an agent repeats it, and
// FaultsBetween gives a node's faults of a time range.
func TestFaults(t *testing.T) { eachDB(t, testFaults) }

func testFaults(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	xid := Fault{Node: "gpu3", GPU: 3, UUID: "GPU-3", Kind: "xid", Code: 79, At: t0}
	ecc := Fault{Node: "gpu2", GPU: 0, Kind: "ecc_uncorrectable", At: t0.Add(time.Minute)}
	added, err := s.AddFaults(ctx, []Fault{xid, ecc}, t0.Add(time.Second))
	if err != nil || len(added) != 2 || added[0].ID == 0 {
		t.Fatalf("first AddFaults: %+v, %v", added, err)
	}
	again, err := s.AddFaults(ctx, []Fault{xid, ecc, {Node: "gpu3", GPU: 3, Kind: "xid", Code: 48, At: t0}}, t0.Add(2*time.Second))
	if err != nil || len(again) != 1 || again[0].Code != 48 {
		t.Fatalf("repeated faults: %+v, %v; want only the Xid 48", again, err)
	}
	got, err := s.FaultsBetween(ctx, "gpu3", t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []Fault{{ID: 1, Node: "gpu3", GPU: 3, UUID: "GPU-3", Kind: "xid", Code: 79, At: t0, ReceivedAt: t0.Add(time.Second)},
		{ID: again[0].ID, Node: "gpu3", GPU: 3, Kind: "xid", Code: 48, At: t0, ReceivedAt: t0.Add(2 * time.Second)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gpu3's faults (-want +got):\n%s", diff)
	}
	if all, _ := s.FaultsBetween(ctx, "", t0.Add(time.Second), t0.Add(time.Hour)); len(all) != 1 || all[0].Node != "gpu2" {
		t.Errorf("every node's faults from +1s: %+v", all)
	}
}

func TestNodeHealth(t *testing.T) { eachDB(t, testNodeHealth) }

func testNodeHealth(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	ok := false
	at := t0.Add(time.Minute)
	h := NodeHealth{Node: "gpu3", Drained: true, Reason: "strata: Xid 79 on GPU 3 (GPU fell off the bus)", FaultID: 1, DrainedAt: &t0,
		CheckAt: &at, CheckOK: &ok, CheckOutput: "fail"}
	if err := s.SaveNodeHealth(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Intent(ctx, Record{Node: "gpu3", Kind: "drain", Reason: h.Reason, DecidedAt: t0}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = b.open(t)
	got, err := s.NodeHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]NodeHealth{"gpu3": h}, got); diff != "" {
		t.Errorf("node health (-want +got):\n%s", diff)
	}
	recs, err := s.NodeRecords(ctx, "gpu3")
	if err != nil || len(recs) != 1 || recs[0].Node != "gpu3" || recs[0].Status != StatusIntent {
		t.Errorf("gpu3's records: %+v, %v", recs, err)
	}
	if jobs, _ := s.Job(ctx, 0); len(jobs) != 0 {
		t.Errorf("a node's record among job 0's: %+v", jobs)
	}
}
