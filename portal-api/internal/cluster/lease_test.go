package cluster

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestLease: two portals on one database with a poll lease: only the
// holder reads slurmrestd, the other serves the very snapshot it read;
// when the holder stops renewing, the other takes over and polls, going
// on from the shared snapshot.
func TestLease(t *testing.T) {
	for _, release := range []string{"26.05", "24.11"} {
		t.Run(release, func(t *testing.T) {
			bed := clustertest.New(t, release,
				clustertest.Job{ID: 10, User: "alice", Account: "acme-llm"},
				clustertest.Job{ID: 11, User: "bob", Account: "globex-rl", State: "PENDING", Reason: "Priority"})
			st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			st.SetClock(func() time.Time { return now })
			mk := func(holder string) *Poller {
				return New(Config{Name: "gpu1", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
					Interval: 10 * time.Second, StaleAfter: time.Minute, Metrics: NewMetrics(prometheus.NewRegistry()),
					Now: func() time.Time { return now }, Lease: st.PollLease("gpu1", holder, 30*time.Second)})
			}
			a, b := mk("a"), mk("b")
			// b polls first: it takes the free lease and is the holder.
			if err := b.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			a, b = b, a
			for range 3 {
				if err := a.Poll(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := b.Poll(t.Context()); err != nil {
					t.Fatal(err)
				}
				now = now.Add(10 * time.Second)
			}
			if !a.Leader() || b.Leader() {
				t.Fatalf("leader: a %v, b %v", a.Leader(), b.Leader())
			}
			if got := bed.JobsRequests(); got != 4 {
				t.Errorf("slurmrestd's job listings: %d, want 4 (the holder's polls only)", got)
			}
			opts := []cmp.Option{cmp.AllowUnexported(Snapshot{}), cmpopts.EquateEmpty()}
			if diff := cmp.Diff(a.Snapshot(), b.Snapshot(), opts...); diff != "" {
				t.Errorf("the follower's snapshot differs from the holder's (-holder +follower):\n%s", diff)
			}
			if h := b.Health(); !h.Healthy || h.Stale {
				t.Errorf("the follower's health: %+v", h)
			}
			// The holder stops (no more polls); its lease runs out.
			bed.SetJobs(clustertest.Job{ID: 12, User: "carol", Account: "acme-llm"})
			now = now.Add(31 * time.Second)
			if err := b.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !b.Leader() {
				t.Fatal("the follower did not take over a lease that ran out")
			}
			if got := bed.JobsRequests(); got != 5 {
				t.Errorf("slurmrestd's job listings after the takeover: %d, want 5", got)
			}
			if j := b.Snapshot().Jobs; len(j) != 1 || j[0].ID != 12 {
				t.Errorf("the new holder's jobs: %+v", j)
			}
			// The old holder comes back: it follows.
			if err := a.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if a.Leader() || bed.JobsRequests() != 5 {
				t.Errorf("the old holder polled again: leader %v, listings %d", a.Leader(), bed.JobsRequests())
			}
			if j := a.Snapshot().Jobs; len(j) != 1 || j[0].ID != 12 {
				t.Errorf("the old holder serves %+v", j)
			}
		})
	}
}
