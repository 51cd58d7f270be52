//go:build integration

package controller_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// TestStandbyOnSlurm: two controllers of one real cluster (in this
// process, each with its own connections to the bed's PostgreSQL), one
// acting; the acting one dies after the warning (its connections cut
// first, so its lease is not handed over but runs out, then its loop
// stopped: a kill as the database sees it); the standby takes over and
// finishes the ladder: the job is signalled once (its trap sees SIGUSR1
// once) and requeued once (restart count 1).
func TestStandbyOnSlurm(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		idleNode := b.Nodes[len(b.Nodes)-1]
		idle := submit(t, c, b, "alice", idleNode, testbed.Unique("standby"))
		urls := replayAgents(t, b, nil)
		rules, err := reclaimrules.Parse([]byte(rulesJSON))
		if err != nil {
			t.Fatal(err)
		}
		pg := pgtest.New(t)
		open := func() *store.Store {
			st, err := store.OpenDatabase(ctx, store.Database{Setting: pg.URL, PasswordFile: pg.PasswordFile})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		view := open()
		ttl := 3 * time.Second
		var mu sync.Mutex
		acted := map[string][]string{}
		run := func(ctx context.Context, name string, st *store.Store) (*lease.Lease, <-chan struct{}) {
			l := &lease.Lease{DB: st.DB(), Name: "reclaimd", Holder: name, TTL: ttl}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = l.Keep(ctx, func(ctx context.Context, term lease.Term) error {
					ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
						Collector: &collect.Agents{URL: urls, Secret: agentSecret}, SignalBatchOnly: true, APIToken: apiTokenFunc,
						Term: term, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("controller", name)})
					if err != nil {
						return err
					}
					for {
						d, err := ctl.Cycle(ctx)
						if err == nil {
							mu.Lock()
							for _, a := range d.Actions {
								acted[name] = append(acted[name], string(a.Kind))
							}
							mu.Unlock()
						}
						select {
						case <-ctx.Done():
							return nil
						case <-time.After(2 * time.Second):
						}
					}
				}, nil)
			}()
			return l, done
		}
		stA := open()
		ctxA, killA := context.WithCancel(ctx)
		defer killA()
		la, doneA := run(ctxA, "a", stA)
		waitFor(t, 10*time.Second, func() bool { return la.State().Held })
		lb, _ := run(ctx, "b", open())
		outcomes := func() string {
			recs, err := view.Job(ctx, idle)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range recs {
				out = append(out, r.Kind+":"+r.Status)
			}
			return strings.Join(out, ",")
		}
		waitFor(t, 2*time.Minute, func() bool { return outcomes() == "warn:done" })
		if lb.State().Held {
			t.Fatal("b holds the lease while a acts")
		}
		// a dies: its connections go first, so its lease is left to run out.
		_ = stA.Close()
		killA()
		<-doneA
		killed := time.Now()
		waitFor(t, ttl+ttl/3+5*time.Second, func() bool { return lb.State().Held })
		if d := time.Since(killed); d > ttl+ttl/3+time.Second {
			t.Errorf("b took over %v after a died; want within %v", d, ttl+ttl/3)
		}
		waitFor(t, 2*time.Minute, func() bool { return strings.HasPrefix(outcomes(), "warn:done,signal:done") })
		name := jobName(t, c, idle)
		b.WaitFile(t, b.JobDir+"/"+name+".out", "got USR1", 30*time.Second) // before the requeue's run truncates it
		waitFor(t, 2*time.Minute, func() bool { return outcomes() == "warn:done,signal:done,requeue:done" })
		j := testbed.WaitJob(t, c, idle, 30*time.Second, "requeued", func(j slurmrest.Job) bool { return j.RestartCount == 1 })
		if !strings.HasPrefix(j.AdminComment, "strata: reclaimed (requeue, rule test)") {
			t.Errorf("admin comment = %q", j.AdminComment)
		}
		time.Sleep(5 * time.Second) // more cycles of b: nothing more
		mu.Lock()
		got := map[string]string{"a": strings.Join(acted["a"], ","), "b": strings.Join(acted["b"], ",")}
		mu.Unlock()
		if got["a"] != "warn" || got["b"] != "signal,requeue" {
			t.Errorf("actions: a %q, b %q; want a warn, b signal and requeue", got["a"], got["b"])
		}
		if o := outcomes(); o != "warn:done,signal:done,requeue:done" {
			t.Errorf("records %s", o)
		}
		if j, err := c.Job(ctx, idle); err != nil || j.RestartCount != 1 {
			t.Errorf("restart count %d, %v; want 1 (one requeue)", j.RestartCount, err)
		}
	})
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not within %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
