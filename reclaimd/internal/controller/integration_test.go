//go:build integration

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

const rulesJSON = `{
  "apiVersion": "strata/v1", "kind": "ReclaimRules",
  "exempt": {"users": ["bob"]},
  "rules": [{
    "name": "test",
    "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
    "warn": "10s",
    "signal": {"name": "USR1", "wait": "10s"},
    "action": "requeue"
  }]
}`

const trap = `#!/bin/bash
trap 'echo "got USR1 restart=${SLURM_RESTART_COUNT:-0}"' USR1
echo "start restart=${SLURM_RESTART_COUNT:-0}"
for i in $(seq 900); do sleep 1; done
`

// replayAgents serves one agent per node, each replaying a recording in
// which every GPU is idle (util 0) or busy (util 90), with its window
// filled with the last 80 s at once.
func replayAgents(t *testing.T, b *testbed.Bed, busy map[string]bool) func(string) string {
	t.Helper()
	ctx := testbed.Context(t)
	urls := map[string]string{}
	var agents []*agent.Agent
	var clock struct {
		sync.Mutex
		t time.Time
	}
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.t }
	for _, node := range b.Nodes {
		util := 0
		if busy[node] {
			util = 90
		}
		var csv strings.Builder
		csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib\n")
		for off := 0; off <= 10; off += 10 {
			for g := 0; g < b.GPUsPerNode; g++ {
				fmt.Fprintf(&csv, "%d,%d,%d,%d,2048\n", off, g, util, util/2)
			}
		}
		rec, err := source.ParseRecording(node, strings.NewReader(csv.String()))
		if err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Config{Node: node, Source: source.NewReplay(rec, time.Time{}, true), Interval: 10 * time.Second,
			Window: 5 * time.Minute, Now: now, Procs: agent.ProcFS{Root: t.TempDir()}, Secret: agentSecret})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		srv := httptest.NewServer(a.Handler())
		t.Cleanup(srv.Close)
		urls[node] = srv.URL
	}
	sample := func(at time.Time) {
		clock.Lock()
		clock.t = at
		clock.Unlock()
		for _, a := range agents {
			if err := a.SampleOnce(ctx); err != nil {
				t.Errorf("agent sample: %v", err)
			}
		}
	}
	start := time.Now()
	for back := 80 * time.Second; back > 0; back -= 10 * time.Second {
		sample(start.Add(-back))
	}
	sample(start)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample(time.Now())
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func(node string) string { return urls[node] }
}

func submit(t *testing.T, c *slurmrest.Client, b *testbed.Bed, user, node, name string) int64 {
	t.Helper()
	res, err := c.Submit(testbed.Context(t), user, slurmrest.JobSpec{Name: name, Script: trap, Account: b.Account, Partition: b.Partition,
		TRESPerNode: "gres/gpu:2", NodeList: node, TimeLimit: 30 * time.Minute, WorkDir: b.JobDir,
		StdOut: b.JobDir + "/" + name + ".out", Requeue: ptr(true),
		// The script traps USR1: it asks for the signal (the rules' mode
		// is the default, skip-unless-requested).
		Comment: "strata:signal"})
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Cancel(context.Background(), res.JobID) })
	testbed.WaitJob(t, c, res.JobID, time.Minute, "running", slurmrest.Job.Running)
	return res.JobID
}

func ptr[T any](v T) *T { return &v }

// TestReclaimLadder: an idle job is warned, signalled (its trap sees
// SIGUSR1) and requeued; a busy job on another node and an exempt job on
// the idle node are never touched; the API explains every step.
func TestReclaimLadder(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		idleNode, busyNode := b.Nodes[len(b.Nodes)-1], b.Nodes[len(b.Nodes)-2]
		idle := submit(t, c, b, "alice", idleNode, testbed.Unique("idle"))
		exempt := submit(t, c, b, "bob", idleNode, testbed.Unique("exempt"))
		busy := submit(t, c, b, "alice", busyNode, testbed.Unique("busy"))
		urls := replayAgents(t, b, map[string]bool{busyNode: true})

		rules, err := reclaimrules.Parse([]byte(rulesJSON))
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: urls, Secret: agentSecret}, SignalBatchOnly: true, APIToken: apiTokenFunc,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		deadline := time.Now().Add(4 * time.Minute)
		for time.Now().Before(deadline) {
			d, err := ctl.Cycle(ctx)
			if err != nil {
				t.Fatalf("cycle: %v", err)
			}
			for _, a := range d.Actions {
				if a.JobID != idle {
					t.Fatalf("action on job %d (idle job is %d): %+v", a.JobID, idle, a)
				}
				kinds = append(kinds, string(a.Kind))
			}
			if len(kinds) > 0 && kinds[len(kinds)-1] == string(decide.Requeue) {
				break
			}
			time.Sleep(5 * time.Second)
		}
		if strings.Join(kinds, ",") != "warn,signal,requeue" {
			t.Fatalf("actions on the idle job = %v, want warn, signal, requeue", kinds)
		}
		b.WaitFile(t, b.JobDir+"/"+jobName(t, c, idle)+".out", "got USR1", 30*time.Second)
		j := testbed.WaitJob(t, c, idle, 30*time.Second, "requeued", func(j slurmrest.Job) bool { return j.RestartCount == 1 })
		if !strings.HasPrefix(j.AdminComment, "strata: reclaimed (requeue, rule test)") {
			t.Errorf("admin comment = %q", j.AdminComment)
		}
		for _, id := range []int64{busy, exempt} {
			j, err := c.Job(ctx, id)
			if err != nil || !j.Running() || j.RestartCount != 0 || j.AdminComment != "" {
				t.Errorf("job %d was touched: %+v, %v", id, j, err)
			}
			if recs, _ := st.Job(ctx, id); len(recs) != 0 {
				t.Errorf("job %d has decisions: %+v", id, recs)
			}
		}

		// The API explains it.
		srv := httptest.NewServer(withToken(ctl.Handler(time.Minute)))
		defer srv.Close()
		resp, err := http.Get(fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, idle))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var jr controller.JobReclaim
		if err := json.NewDecoder(resp.Body).Decode(&jr); err != nil {
			t.Fatal(err)
		}
		var outcomes []string
		for _, r := range jr.Records {
			outcomes = append(outcomes, r.Kind+":"+r.Status)
		}
		if strings.Join(outcomes, ",") != "warn:done,signal:done,requeue:done" || !strings.Contains(jr.Records[0].Reason, "2 of 2 GPUs idle") {
			t.Errorf("GET /v1/jobs/%d/reclaim = %+v", idle, jr)
		}
		// A busy job is known (observed) but has no decisions.
		r, err := http.Get(fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, busy))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var br controller.JobReclaim
		if err := json.NewDecoder(r.Body).Decode(&br); err != nil || len(br.Records) != 0 || br.State == nil || br.State.Phase != decide.Observed {
			t.Errorf("GET /v1/jobs/%d/reclaim for the busy job = %+v, %v: want observed, no decisions", busy, br, err)
		}
	})
}

func jobName(t *testing.T, c *slurmrest.Client, id int64) string {
	j, err := c.Job(testbed.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.Name
}

// TestRecoverOpenIntent: a crash left an intent to requeue a job that is
// still the same run; the restarted controller carries it out once, and a
// second recovery finds nothing to do.
func TestRecoverOpenIntent(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		id := submit(t, c, b, "alice", b.Nodes[0], testbed.Unique("crash"))
		j, err := c.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ev := decide.Evidence{JobStart: j.StartTime, TotalGPUs: len(j.GPUs), IdleGPUs: len(j.GPUs)}
		for _, g := range j.GPUs {
			ev.GPUs = append(ev.GPUs, decide.GPUEvidence{GPU: decide.GPUKey{Node: g.Node, Index: g.Index}, Idle: true})
		}
		raw, _ := json.Marshal(ev)
		rid, err := st.Intent(ctx, store.Record{JobID: id, Kind: "requeue", Rule: "test", Reason: "crash test", Evidence: raw, DecidedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		rules, _ := reclaimrules.Parse([]byte(rulesJSON))
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: func(string) string { return "http://127.0.0.1:1" }, Secret: agentSecret}})
		if err != nil {
			t.Fatal(err)
		}
		if err := ctl.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		testbed.WaitJob(t, c, id, 30*time.Second, "requeued once", func(j slurmrest.Job) bool { return j.RestartCount == 1 })
		if err := ctl.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if j, _ := c.Job(ctx, id); j.RestartCount != 1 {
			t.Errorf("restart count %d after a second recovery, want 1", j.RestartCount)
		}
		recs, _ := st.Job(ctx, id)
		if len(recs) != 1 || recs[0].ID != rid || recs[0].Status != store.StatusDone {
			t.Errorf("records = %+v, want the one intent, done", recs)
		}
	})
}

// switchable is the network edge between reclaimd and slurmrestd: a proxy
// that can refuse every request, as a stopped slurmrestd would.
type switchable struct {
	mu   sync.Mutex
	down bool
	next http.Handler
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		// Drop the connection without an answer.
		hj, ok := w.(http.Hijacker)
		if ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	s.next.ServeHTTP(w, r)
}

func (s *switchable) set(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

// TestCancelThroughOutage: under a rule that cancels, an idle job is warned
// and cancelled; while slurmrestd is unreachable for a cycle nothing is done
// and /healthz says why, and the next cycle goes on.
func TestCancelThroughOutage(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		admin := b.Client(t)
		target, err := url.Parse(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		edge := &switchable{next: httputil.NewSingleHostReverseProxy(target)}
		proxy := httptest.NewServer(edge)
		defer proxy.Close()
		cfg := b.Config()
		cfg.URL = proxy.URL
		c, err := slurmrest.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		node := b.Nodes[0]
		id := submit(t, admin, b, "alice", node, testbed.Unique("cancel"))
		urls := replayAgents(t, b, nil)
		rules, err := reclaimrules.Parse([]byte(`{"apiVersion": "strata/v1", "kind": "ReclaimRules",
		  "rules": [{"name": "idle-cancel", "idle": {"window": "1m"}, "warn": "10s", "action": "cancel"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: urls, Secret: agentSecret}})
		if err != nil {
			t.Fatal(err)
		}
		health := httptest.NewServer(withToken(ctl.Handler(time.Minute)))
		defer health.Close()
		var kinds []string
		outageDone := false
		deadline := time.Now().Add(4 * time.Minute)
		for time.Now().Before(deadline) && (len(kinds) == 0 || kinds[len(kinds)-1] != "cancel") {
			if len(kinds) == 1 && !outageDone {
				// Warned: now slurmrestd goes away for one cycle.
				edge.set(true)
				d, err := ctl.Cycle(ctx)
				if err == nil || len(d.Actions) != 0 {
					t.Fatalf("cycle with slurmrestd down: err %v, %d actions; want an error and no action", err, len(d.Actions))
				}
				r, err := http.Get(health.URL + "/healthz")
				if err != nil {
					t.Fatal(err)
				}
				r.Body.Close()
				if r.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("healthz during the outage = %d, want 503", r.StatusCode)
				}
				edge.set(false)
				outageDone = true
				time.Sleep(10 * time.Second) // past the warning, so the next good cycle cancels
			}
			d, err := ctl.Cycle(ctx)
			if err != nil {
				t.Fatalf("cycle: %v", err)
			}
			for _, a := range d.Actions {
				kinds = append(kinds, string(a.Kind))
			}
			time.Sleep(3 * time.Second)
		}
		if strings.Join(kinds, ",") != "warn,cancel" || !outageDone {
			t.Fatalf("actions = %v (outage tested: %v), want warn then cancel", kinds, outageDone)
		}
		testbed.WaitJob(t, admin, id, 30*time.Second, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
		r, err := http.Get(health.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("healthz after the outage = %d, want 200", r.StatusCode)
		}
	})
}
