package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSessions: a session is recorded before its job, pinned once (a later
// pin does not move it), its activity only moves forward, its first end
// stays, and lists hold the user's own, open or lately ended.
func TestSessions(t *testing.T) { eachDB(t, testSessions) }

func testSessions(t *testing.T, b *backend) {
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	id, err := NewSessionID()
	if err != nil || len(id) != 32 {
		t.Fatalf("id %q, %v", id, err)
	}
	if other, _ := NewSessionID(); other == id {
		t.Fatal("two sessions got one id")
	}
	in := Session{ID: id, User: "alice", Cluster: "c1", Template: "jupyterlab", Server: "jupyterlab", Account: "acme-llm",
		Dir: "/home/alice/.strata/sessions/" + id, IdleLimit: 30 * time.Minute}
	if err := s.CreateSession(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(t.Context(), in); err == nil {
		t.Error("a second session of one id")
	}
	if err := s.SetSessionJob(t.Context(), id, 42); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.PinSession(t.Context(), id, "gpu01", 41234); !ok || err != nil {
		t.Fatalf("pin = %v %v", ok, err)
	}
	if ok, _ := s.PinSession(t.Context(), id, "gpu02", 1); ok {
		t.Error("a second pin moved the session")
	}
	early, late := now.Add(-time.Hour), now.Add(-time.Minute)
	for _, at := range []time.Time{late, early} {
		if err := s.SessionActivity(t.Context(), id, at); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetSession(t.Context(), id)
	want := in
	want.JobID, want.Host, want.Port, want.Created, want.LastActivity = 42, "gpu01", 41234, now, late
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("session: %v\n%s", err, cmp.Diff(want, got))
	}
	open, _ := s.OpenSessions(t.Context())
	if len(open) != 1 || open[0].ID != id {
		t.Errorf("open = %+v", open)
	}
	if ok, err := s.EndSession(t.Context(), id, "idle", now); !ok || err != nil {
		t.Fatalf("end = %v %v", ok, err)
	}
	if ok, _ := s.EndSession(t.Context(), id, "cancelled", now.Add(time.Minute)); ok {
		t.Error("a second end replaced the first")
	}
	got, _ = s.GetSession(t.Context(), id)
	if !got.Ended.Equal(now) || got.EndReason != "idle" {
		t.Errorf("ended = %v %q", got.Ended, got.EndReason)
	}
	if open, _ := s.OpenSessions(t.Context()); len(open) != 0 {
		t.Errorf("open after the end = %+v", open)
	}
	if l, _ := s.Sessions(t.Context(), "alice", now); len(l) != 1 {
		t.Errorf("ended at the cut: %+v", l)
	}
	if l, _ := s.Sessions(t.Context(), "alice", now.Add(time.Second)); len(l) != 0 {
		t.Errorf("ended before the cut: %+v", l)
	}
	if l, _ := s.Sessions(t.Context(), "bob", time.Time{}); len(l) != 0 {
		t.Errorf("bob's = %+v", l)
	}
	if _, err := s.GetSession(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing = %v", err)
	}
}
