//go:build integration

package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
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
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// TestArrayTaskReclaimed: two tasks of one array share a node; the task
// the array's own record runs (its job id is the array's, so a cancel by
// that id would end both) is idle, the other busy, with its process on its
// GPU in the agent's map. reclaimd warns and cancels the idle task alone.
func TestArrayTaskReclaimed(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		b.DumpLogsOnFailure(t)
		node := b.Nodes[0]
		arr := b.Sbatch(t, "alice", "--array=0-1", "--gres=gpu:1", "--nodelist="+node, "--wrap", "sleep 600")
		t.Cleanup(func() { _ = c.Cancel(context.Background(), arr) })
		var idle, busy slurmrest.Job
		deadline := time.Now().Add(90 * time.Second)
		for idle.ID == 0 || busy.ID == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("array %d: its 2 tasks do not run after 90s", arr)
			}
			time.Sleep(time.Second)
			list, err := c.Jobs(ctx, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			idle, busy = slurmrest.Job{}, slurmrest.Job{}
			for _, j := range list.Jobs {
				switch {
				case j.ArrayJobID != arr || !j.Running() || len(j.GPUs) != 1:
				case j.ID == arr:
					idle = j
				default:
					busy = j
				}
			}
		}
		// On the bed, NVML's order is Slurm's: the busy task's GPU runs its
		// process.
		urls := gpuAgents(t, b, node, map[int]int64{busy.GPUs[0].Index: busy.ID})

		rules, err := reclaimrules.Parse([]byte(`{"apiVersion": "strata/v1", "kind": "ReclaimRules",
		  "rules": [{"name": "array", "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
		    "warn": "10s", "action": "cancel"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: urls, Secret: agentSecret}, SignalBatchOnly: true,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(5 * time.Second) {
			d, err := ctl.Cycle(ctx)
			if err != nil && !strings.Contains(err.Error(), "metrics") {
				t.Fatalf("cycle: %v", err)
			}
			for _, a := range d.Actions {
				if a.JobID == busy.ID {
					t.Fatalf("action on the busy task %s: %+v", busy.Ref(), a)
				}
				if a.JobID == idle.ID {
					kinds = append(kinds, string(a.Kind))
				}
			}
			if len(kinds) > 0 && kinds[len(kinds)-1] == "cancel" {
				break
			}
		}
		if strings.Join(kinds, ",") != "warn,cancel" {
			t.Fatalf("actions on the idle task %s = %v, want warn, cancel", idle.Ref(), kinds)
		}
		testbed.WaitJob(t, c, idle.ID, 30*time.Second, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
		time.Sleep(2 * time.Second)
		if j, err := c.Job(ctx, busy.ID); err != nil || !j.Running() {
			t.Errorf("busy task %s after the idle one's cancel: %v, %v; want it running", busy.Ref(), j.State, err)
		}
	})
}

// gpuAgents serves the agent of node, replaying a recording in which the
// GPUs of busy (by index) run the given job's process at util 90 and the
// others are idle without one; its window is filled with the last 80 s at
// once, and sampled every 5 s.
func gpuAgents(t *testing.T, b *testbed.Bed, node string, busy map[int]int64) func(string) string {
	t.Helper()
	ctx := testbed.Context(t)
	var csv strings.Builder
	csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib,jobs\n")
	for off := 0; off <= 10; off += 10 {
		for g := 0; g < b.GPUsPerNode; g++ {
			util, jobs := 0, ""
			if id, ok := busy[g]; ok {
				util, jobs = 90, strconv.FormatInt(id, 10)
			}
			fmt.Fprintf(&csv, "%d,%d,%d,%d,2048,%s\n", off, g, util, util/2, jobs)
		}
	}
	rec, err := source.ParseRecording(node, strings.NewReader(csv.String()))
	if err != nil {
		t.Fatal(err)
	}
	var clock struct {
		sync.Mutex
		t time.Time
	}
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.t }
	a, err := agent.New(agent.Config{Node: node, Source: source.NewReplay(rec, time.Time{}, true), Interval: 10 * time.Second,
		Window: 5 * time.Minute, Now: now, Procs: agent.ProcFS{Root: t.TempDir()}, Secret: agentSecret})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	sample := func(at time.Time) {
		clock.Lock()
		clock.t = at
		clock.Unlock()
		if err := a.SampleOnce(ctx); err != nil {
			t.Errorf("agent sample: %v", err)
		}
	}
	start := time.Now()
	for back := 80 * time.Second; back > 0; back -= 10 * time.Second {
		sample(start.Add(-back))
	}
	sample(start)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(5 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				sample(time.Now())
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func(n string) string {
		if n != node {
			return "http://127.0.0.1:1" // no agent there: its jobs are stale
		}
		return srv.URL
	}
}
