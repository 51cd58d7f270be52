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

// TestTermValidFor: a term is valid for a margin only while at least
// that much of the claim is left by this host's clock; a term of another
// generation (TermOf) is not valid at all.
func TestTermValidFor(t *testing.T) {
	if err := Always.ValidFor(time.Hour); err != nil {
		t.Errorf("Always: %v", err)
	}
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	l := &Lease{Name: "strata-bridge", Holder: "a", TTL: 10 * time.Second, now: func() time.Time { return now }}
	l.gen, l.until, l.wall = 3, now.Add(10*time.Second), now.Add(10*time.Second)
	for _, tc := range []struct {
		gen     int64
		elapsed time.Duration
		ok      bool
	}{
		{3, 0, true},
		{3, 7 * time.Second, true},
		{3, 8 * time.Second, true},                   // exactly the margin left
		{3, 8*time.Second + time.Millisecond, false}, // less than the margin
		{2, 0, false},                                // an earlier generation
		{0, 0, false},
	} {
		now = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC).Add(tc.elapsed)
		err := l.TermOf(tc.gen).ValidFor(2 * time.Second)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrLost)) {
			t.Errorf("generation %d after %s: %v; want ok %v", tc.gen, tc.elapsed, err, tc.ok)
		}
	}
}
