package lease

import (
	"errors"
	"testing"
	"time"
)

// Always (a SQLite database: one host) is held; a lease never taken, or
// whose claim ran out by this host's clock, is not, whatever its
// generation was.
func TestTermWithoutDatabase(t *testing.T) {
	if err := Always.Valid(); err != nil {
		t.Errorf("Always: %v", err)
	}
	if err := Always.Check(t.Context(), nil); err != nil {
		t.Errorf("Always.Check: %v", err)
	}
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	l := &Lease{Name: "reclaimd/x", Holder: "a", TTL: 10 * time.Second, now: func() time.Time { return now }}
	if err := l.Term().Valid(); !errors.Is(err, ErrLost) {
		t.Errorf("a lease never taken: %v", err)
	}
	l.gen, l.until, l.wall = 4, now.Add(10*time.Second), now.Add(10*time.Second)
	tm := l.Term()
	if tm.Gen != 4 || tm.Valid() != nil || !l.State().Held || l.State().TTLSeconds != 10 {
		t.Fatalf("held: term %+v, state %+v", tm, l.State())
	}
	now = now.Add(10 * time.Second)
	if err := tm.Valid(); !errors.Is(err, ErrLost) {
		t.Errorf("at the end of the claim: %v", err)
	}
	if l.State().Held || l.Generation() != 0 {
		t.Errorf("state after the claim ended: %+v", l.State())
	}
}
