package store

import (
	"encoding/json"
	"testing"
	"time"
)

// A run is classified once, even across a restart; the failures a new
// run ends are returned once.
func TestFailuresOncePerRun(t *testing.T) { eachDB(t, testFailuresOncePerRun) }

func testFailuresOncePerRun(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	start := time.Unix(1764417600, 0).UTC()
	at := start.Add(time.Hour)
	f := Failure{JobID: 7, Start: start, Class: "nccl", Evidence: json.RawMessage(`{"state":"FAILED"}`), Action: "retry", Reason: "retry 1/1",
		FailedAt: start.Add(time.Minute), ClassifiedAt: at}
	if _, added, err := s.AddFailure(ctx, f); err != nil || !added {
		t.Fatalf("first: %v %v", added, err)
	}
	s.Close()
	s = b.open(t)
	if _, added, err := s.AddFailure(ctx, f); err != nil || added {
		t.Fatalf("the same run again: added %v, %v", added, err)
	}
	if ok, err := s.Classified(ctx, 7, start); err != nil || !ok {
		t.Errorf("Classified = %v, %v", ok, err)
	}
	again, err := s.SaveRuns(ctx, []Run{{JobID: 7, Start: start.Add(2 * time.Minute), Restarts: 1, Nodes: []string{"gpu2"}}}, at)
	if err != nil || len(again) != 1 || again[0].Class != "nccl" || again[0].RunningAgain == nil {
		t.Fatalf("SaveRuns: %+v, %v", again, err)
	}
	again, err = s.SaveRuns(ctx, []Run{{JobID: 7, Start: start.Add(2 * time.Minute), Restarts: 1}}, at)
	if err != nil || len(again) != 0 {
		t.Errorf("the same run again: %+v, %v", again, err)
	}
	runs, err := s.Runs(ctx, time.Time{})
	if err != nil || len(runs) != 1 || runs[0].Nodes[0] != "gpu2" {
		t.Errorf("runs %+v, %v", runs, err)
	}
	fs, err := s.FailuresSince(ctx, at, 0)
	if err != nil || len(fs) != 1 {
		t.Errorf("since: %+v, %v", fs, err)
	}
	if fs, _ := s.FailuresSince(ctx, at.Add(time.Second), 0); len(fs) != 0 {
		t.Errorf("since later: %+v", fs)
	}
}
