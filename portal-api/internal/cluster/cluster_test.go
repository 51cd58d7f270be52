package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

func poller(t *testing.T, bed *clustertest.Bed, now *time.Time) (*Poller, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	p := New(Config{Name: "gpu1", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
		Interval: 10 * time.Second, StaleAfter: time.Minute, Metrics: m, Now: func() time.Time { return *now }})
	return p, m
}

// TestPoll: one snapshot per poll, on both parsers; an unchanged cluster
// keeps its jobs, a changed one gets them, and the snapshot holds the
// nodes, partitions and shares.
func TestPoll(t *testing.T) {
	for _, release := range []string{"26.05", "24.11"} {
		t.Run(release, func(t *testing.T) {
			bed := clustertest.New(t, release,
				clustertest.Job{ID: 10, User: "alice", Account: "acme-llm"},
				clustertest.Job{ID: 11, User: "bob", Account: "globex-rl", State: "PENDING", Reason: "Priority"})
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			p, m := poller(t, bed, &now)
			if h := p.Health(); h.Healthy || !h.Stale || p.Snapshot() != nil {
				t.Fatalf("before a poll: %+v", h)
			}
			if err := p.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			s := p.Snapshot()
			if len(s.Jobs) != 2 || s.Jobs[1].StateReason != "Priority" || s.Jobs[0].User != "alice" || len(s.Jobs[0].GPUs) != 2 {
				t.Fatalf("jobs = %+v", s.Jobs)
			}
			if len(s.Nodes) == 0 || len(s.Partitions) == 0 || len(s.Shares) == 0 || s.Info.Parser == "" ||
				len(s.Associations) == 0 || len(s.QOS) == 0 || len(s.Users) == 0 {
				t.Errorf("snapshot lacks nodes, partitions, shares or info: %+v", s)
			}
			// Unchanged: the jobs are kept.
			if err := p.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(p.Snapshot().Jobs) != 2 {
				t.Errorf("unchanged poll lost the jobs: %+v", p.Snapshot().Jobs)
			}
			bed.SetJobs(clustertest.Job{ID: 12, User: "carol", Account: "acme-llm"})
			if err := p.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if j := p.Snapshot().Jobs; len(j) != 1 || j[0].ID != 12 {
				t.Errorf("changed poll: %+v", j)
			}
			if got := bed.JobsRequests(); got != 3 {
				t.Errorf("job listings = %d, want 3", got)
			}
			if m.Requests("gpu1") < 3 {
				t.Errorf("requests counted = %v", m.Requests("gpu1"))
			}
		})
	}
}

// TestStale: a cluster that stops answering keeps its last snapshot, is
// unhealthy at once and stale after StaleAfter, and recovers.
func TestStale(t *testing.T) {
	bed := clustertest.New(t, "26.05", clustertest.Job{ID: 10, User: "alice", Account: "acme-llm"})
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p, _ := poller(t, bed, &now)
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	bed.Stop()
	now = now.Add(30 * time.Second)
	if err := p.Poll(t.Context()); err == nil {
		t.Fatal("a poll of a stopped cluster succeeded")
	}
	h := p.Health()
	if h.Healthy || h.Stale || h.Err == "" || h.Age != 30*time.Second || len(p.Snapshot().Jobs) != 1 {
		t.Errorf("30s after: %+v", h)
	}
	now = now.Add(time.Minute)
	if h := p.Health(); !h.Stale || h.Age != 90*time.Second {
		t.Errorf("90s after: %+v", h)
	}
	bed.Start()
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := p.Health(); !h.Healthy || h.Stale || h.Age != 0 {
		t.Errorf("recovered: %+v", h)
	}
}

// TestDownAtStart: a cluster that does not answer at start is only an
// unhealthy, stale cluster, and is connected to once it answers.
func TestDownAtStart(t *testing.T) {
	bed := clustertest.New(t, "26.05")
	bed.Stop()
	now := time.Now()
	p, _ := poller(t, bed, &now)
	if err := p.Poll(t.Context()); err == nil {
		t.Fatal("poll of a stopped cluster succeeded")
	}
	if h := p.Health(); h.Healthy || !h.Stale || h.Err == "" {
		t.Errorf("health = %+v", h)
	}
	bed.Start()
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOnSnapshot: each hook sees every snapshot a poll publishes, once,
// after it is published; a failed poll publishes none.
func TestOnSnapshot(t *testing.T) {
	bed := clustertest.New(t, "26.05", clustertest.Job{ID: 10, User: "alice", Account: "acme-llm"})
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p, _ := poller(t, bed, &now)
	var seen [2][]*Snapshot
	for i := range seen {
		p.OnSnapshot(func(s *Snapshot) {
			if p.Snapshot() != s {
				t.Error("hook called before the snapshot was published")
			}
			seen[i] = append(seen[i], s)
		})
	}
	var want []*Snapshot
	poll := func(ok bool) {
		t.Helper()
		if err := p.Poll(t.Context()); (err == nil) != ok {
			t.Fatalf("poll: %v", err)
		}
		if ok {
			want = append(want, p.Snapshot())
		}
	}
	poll(true)
	poll(true)
	bed.Stop()
	poll(false)
	bed.Start()
	poll(true)
	for i, got := range seen {
		if !slices.Equal(got, want) {
			t.Errorf("hook %d saw %p, want %p", i, got, want)
		}
	}
}

// TestSoon: Soon brings the next poll forward to SoonAfter, not the
// interval; Soons made together make one early poll; without one the
// poller waits its interval.
func TestSoon(t *testing.T) {
	bed := clustertest.New(t, "26.05", clustertest.Job{ID: 10, User: "alice", Account: "acme-llm"})
	m := NewMetrics(prometheus.NewRegistry())
	p := New(Config{Name: "gpu1", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
		Interval: time.Hour, SoonAfter: 50 * time.Millisecond, Metrics: m})
	polls := make(chan *Snapshot, 16)
	p.OnSnapshot(func(s *Snapshot) { polls <- s })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-polls:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no poll within 10 s (the interval is an hour)", what)
		}
	}
	none := func(what string) {
		t.Helper()
		select {
		case <-polls:
			t.Fatalf("%s: a poll nobody asked for", what)
		case <-time.After(300 * time.Millisecond):
		}
	}
	wait("the first poll")
	none("after the first poll")
	for range 5 {
		p.Soon()
	}
	wait("after 5 Soons")
	none("the 5 Soons made together")
	p.Soon()
	wait("after one more Soon")
}
