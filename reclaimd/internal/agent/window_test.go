package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

func TestWindowEviction(t *testing.T) {
	tests := map[string]struct {
		at     []time.Duration // samples added, after t0
		oldest time.Duration   // evict before t0 + oldest
		limit  int
		want   []time.Duration
	}{
		"nothing to drop": {
			at: []time.Duration{0, 10, 20}, oldest: 0, limit: 3,
			want: []time.Duration{0, 10, 20},
		},
		"by age; a sample at the boundary stays": {
			at: []time.Duration{0, 10, 20, 30}, oldest: 20, limit: 10,
			want: []time.Duration{20, 30},
		},
		"by count": {
			at: []time.Duration{0, 10, 20, 30}, oldest: 0, limit: 2,
			want: []time.Duration{20, 30},
		},
		"by age, then count": {
			at: []time.Duration{0, 10, 20, 30, 40}, oldest: 10, limit: 3,
			want: []time.Duration{20, 30, 40},
		},
		"by count, then age": {
			at: []time.Duration{0, 10, 20, 30, 40}, oldest: 35, limit: 3,
			want: []time.Duration{40},
		},
		"everything": {
			at: []time.Duration{0, 10}, oldest: 100, limit: 5,
			want: []time.Duration{},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			w := &window{}
			for i, d := range tt.at {
				w.add(source.Sample{At: t0.Add(d * time.Second)}, uint64(i+1))
			}
			w.evict(t0.Add(tt.oldest*time.Second), tt.limit)
			got := []time.Duration{}
			for k, p := range w.points {
				got = append(got, p.At.Sub(t0)/time.Second)
				if i := slices.Index(tt.at, p.At.Sub(t0)/time.Second); w.rounds[k] != uint64(i+1) {
					t.Errorf("point at %s has round %d, want %d", p.At.Sub(t0), w.rounds[k], i+1)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("left after evict (-want +got):\n%s", diff)
			}
		})
	}
}

// The agent evicts by Window and MaxSamples as it samples, and a snapshot
// leaves out what aged past the window since the last sample.
func TestAgentWindowBounds(t *testing.T) {
	a, c := replayAgent(t, true) // Window 1 min, every 10 s: 7 samples at most
	for range 10 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	c.Add(-10 * time.Second) // now: the last sample, at 90 s
	if n := len(a.Snapshot().GPUs[0].Samples); n != 7 {
		t.Errorf("%d samples after 10 rounds, want 7 (30 s to 90 s)", n)
	}
	a.mu.Lock()
	a.cfg.MaxSamples = 3
	a.mu.Unlock()
	if err := a.SampleOnce(t.Context()); err != nil { // at 90 s again
		t.Fatal(err)
	}
	if n := len(a.Snapshot().GPUs[0].Samples); n != 3 {
		t.Errorf("%d samples with MaxSamples 3, want 3", n)
	}
	c.Add(55 * time.Second) // sampling stopped; at 145 s only 85 s and later count
	s := a.Snapshot()
	if n := len(s.GPUs[0].Samples); n != 2 {
		t.Errorf("%d samples 55 s after sampling stopped, want the 2 taken at 90 s", n)
	}
	c.Add(time.Hour)
	if s := a.Snapshot(); len(s.GPUs) != 2 || len(s.GPUs[0].Samples) != 0 || s.GPUs[0].Samples == nil {
		t.Errorf("an hour later: %+v; want both GPUs with empty (not null) samples", s.GPUs)
	}
}
