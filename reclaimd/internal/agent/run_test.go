package agent

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// Run samples at once, then every interval, and returns nil when its
// context ends; time is synctest's, so the test takes no real time.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, err := source.LoadRecording(twoGPUs)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a, err := New(Config{
			Node: "gpu01", Source: source.NewReplay(rec, time.Time{}, true),
			Interval: 10 * time.Second, Window: time.Minute,
			Procs: ProcFS{Root: t.TempDir()}, Logger: discard(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()

		sampledAt := func() []time.Duration {
			var out []time.Duration
			for _, p := range a.Snapshot().GPUs[1].Samples {
				out = append(out, p.At.Sub(start))
			}
			return out
		}
		synctest.Wait()
		if got := sampledAt(); len(got) != 1 || got[0] != 0 {
			t.Fatalf("right after Run started: samples at %v, want one at 0s", got)
		}
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if got := sampledAt(); len(got) != 4 || got[3] != 30*time.Second {
			t.Fatalf("35 s in: samples at %v, want 0s, 10s, 20s, 30s", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		s := a.Snapshot()
		// Now 1h0m35s: the last minute holds the samples from 59m40s to 1h0m30s.
		if got := sampledAt(); len(got) != 6 || got[0] != time.Hour-20*time.Second {
			t.Errorf("an hour later: samples at %v, want the 6 of the last minute", got)
		}
		if !s.SourceOK || s.GPUs[1].Samples[0].JobIDs[0] != 1002 {
			t.Errorf("snapshot: source ok %v, GPU 1 jobs %v", s.SourceOK, s.GPUs[1].Samples[0].JobIDs)
		}

		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v after cancel, want nil", err)
			}
		default:
			t.Fatal("Run did not return after its context was cancelled")
		}
		before := len(sampledAt())
		time.Sleep(time.Minute)
		if n := len(sampledAt()); n > before {
			t.Errorf("sampled after Run returned")
		}
	})
}

// A sample in progress when Run stops is not counted against the source.
func TestSampleOnceCancelled(t *testing.T) {
	a, _ := replayAgent(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := a.SampleOnce(ctx); err == nil {
		t.Fatal("SampleOnce(cancelled) = nil")
	}
	if s := a.Snapshot(); s.LastError != "" {
		t.Errorf("a cancelled sample was kept as the source's error: %q", s.LastError)
	}
}
