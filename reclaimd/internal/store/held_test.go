package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestHeld: the nodes' states are saved, replaced and removed, read back
// byte for byte (every byte value, NUL included), and only under the kind
// they were saved under; a first save removes what another kind left.
func TestHeld(t *testing.T) { eachDB(t, testHeld) }

func testHeld(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if err := s.SaveHeld(ctx, "agents/v1 rules=a", map[string][]byte{"n1": all, "n2": {1}}, nil, true, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveHeld(ctx, "agents/v1 rules=a", map[string][]byte{"n2": {2, 0}}, []string{"n1"}, false, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Held(ctx, "agents/v1 rules=a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"n2": {2, 0}}, got); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
	if err := s.SaveHeld(ctx, "agents/v1 rules=a", map[string][]byte{"n1": all}, nil, false, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Held(ctx, "agents/v1 rules=a"); err != nil || !cmp.Equal(got, map[string][]byte{"n1": all, "n2": {2, 0}}) {
		t.Errorf("held = %v, %v; want n1 with every byte value and n2", got, err)
	}
	// Under another kind (other rules): nothing is read, and the first
	// save drops the rest.
	if got, err := s.Held(ctx, "agents/v1 rules=b"); err != nil || len(got) != 0 {
		t.Errorf("held under another kind = %v, %v; want none", got, err)
	}
	if err := s.SaveHeld(ctx, "agents/v1 rules=b", map[string][]byte{"n3": {3}}, nil, true, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Held(ctx, "agents/v1 rules=a"); err != nil || len(got) != 0 {
		t.Errorf("held under the old kind after a first save = %v, %v; want none", got, err)
	}
	// Read one row at a time; an error of the caller ends the read.
	if err := s.SaveHeld(ctx, "agents/v1 rules=a", map[string][]byte{"n4": {4}}, nil, false, t0.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	seen := map[string][]byte{}
	if err := s.EachHeld(ctx, "agents/v1 rules=b", func(node string, b []byte) error { seen[node] = b; return nil }); err != nil ||
		!cmp.Equal(seen, map[string][]byte{"n3": {3}}) {
		t.Errorf("each held under rules=b = %v, %v; want n3 alone", seen, err)
	}
	stop := errors.New("stop")
	if err := s.EachHeld(ctx, "agents/v1 rules=b", func(string, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("each held with a caller that fails: %v, want its error", err)
	}
	// A restart that resumed from rules=b drops what rules=a left.
	if err := s.DropHeldOtherThan(ctx, "agents/v1 rules=b"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Held(ctx, "agents/v1 rules=a"); err != nil || len(got) != 0 {
		t.Errorf("held under rules=a after dropping other kinds = %v, %v; want none", got, err)
	}
	if got, err := s.Held(ctx, "agents/v1 rules=b"); err != nil || !cmp.Equal(got, map[string][]byte{"n3": {3}}) {
		t.Errorf("held under rules=b after dropping other kinds = %v, %v; want n3 kept", got, err)
	}
}
