package core

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestInstanceLoop: a running portal beats, and settles on its own the
// records another portal on its database left open when it stopped
// beating, with what Slurm shows and the stopped instance's name, while
// the open record of a portal that still beats (an action under way) is
// left alone.
func TestInstanceLoop(t *testing.T) {
	h := newHarness(t)
	jobs := append([]clustertest.Job(nil), gpu1Jobs...)
	jobs[1].State, jobs[1].Reason = "CANCELLED", ""
	h.beds["gpu1"].SetJobs(jobs...)
	path := filepath.Join(t.TempDir(), "portal.db")
	var skew atomic.Int64 // how far the portals' clock is ahead of the real one
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	open := func(name string) *store.Store {
		s, err := store.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.SetClock(clock)
		if err := s.Register(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		return s
	}
	self, dead, busy := open("portal-self"), open("portal-dead"), open("portal-busy")
	act := store.Audit{User: "mem2", Via: "token", Cluster: "gpu1", Action: "cancel", Target: "910102"}
	deadRec, err := dead.Intent(t.Context(), act)
	if err != nil {
		t.Fatal(err)
	}
	busyRec, err := busy.Intent(t.Context(), act)
	if err != nil {
		t.Fatal(err)
	}
	// Past the timeout, busy beats again and dead does not.
	skew.Store(int64(store.InstanceTimeout + time.Second))
	if err := busy.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Clusters: h.server.clusters, Store: self, BeatInterval: 20 * time.Millisecond, SettleInterval: 50 * time.Millisecond})
	before, _ := self.Instances(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.InstanceLoop().Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the loop: %v", err)
		}
	}()
	record := func(id int64) store.Audit {
		log, err := self.AuditLog(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range log {
			if a.ID == id {
				return a
			}
		}
		t.Fatalf("no record %d", id)
		return store.Audit{}
	}
	deadline := time.Now().Add(10 * time.Second)
	for record(deadRec).Result == "" {
		if time.Now().After(deadline) {
			t.Fatal("the stopped portal's record is still open")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := record(deadRec)
	if got.Result != store.ResultOK || !strings.Contains(got.Error, "portal instance portal-dead stopped") ||
		!strings.Contains(got.Error, "Slurm showed job 910102 CANCELLED") {
		t.Errorf("the stopped portal's record: %q %q", got.Result, got.Error)
	}
	time.Sleep(200 * time.Millisecond) // a few more passes
	if r := record(busyRec); r.Result != "" {
		t.Errorf("the live portal's record was settled: %+v", r)
	}
	after, _ := self.Instances(t.Context())
	var b0, b1 time.Time
	for i := range before {
		if before[i].Name == "portal-self" {
			b0, b1 = before[i].BeatAt, after[i].BeatAt
		}
	}
	if !b1.After(b0) {
		t.Errorf("portal-self's beat did not move: %v, then %v", b0, b1)
	}
}
