//go:build integration

package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestNodeHealthXid79: an Xid 79 injected on GPU 3 of gpu3 through the
// replay source's fault file drains gpu3 in Slurm with the reason; the
// health command passes and gpu3 is resumed. No other node changes.
func TestNodeHealthXid79(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		b.DumpLogsOnFailure(t)
		ctx := testbed.Context(t)
		c := b.Client(t)
		target := b.Nodes[min(2, len(b.Nodes)-1)] // gpu3 on the standard bed
		t.Cleanup(func() {
			// Leave the bed as it was found, whatever happened.
			if n := nodeNamed(t, c, target); slices.Contains(n.State, "DRAIN") {
				_ = c.UpdateNode(context.Background(), target, slurmrest.NodeResume, "")
			}
		})
		if n := nodeNamed(t, c, target); slices.Contains(n.State, "DRAIN") {
			t.Fatalf("%s is drained before the test (%q): resume it first", target, n.Reason)
		}

		dir := t.TempDir()
		urls := map[string]string{}
		var agents []*agent.Agent
		for _, node := range b.Nodes {
			var csv strings.Builder
			csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib\n")
			for off := 0; off <= 10; off += 10 {
				for g := 0; g < b.GPUsPerNode; g++ {
					fmt.Fprintf(&csv, "%d,%d,90,45,2048\n", off, g)
				}
			}
			rec, err := source.ParseRecording(node, strings.NewReader(csv.String()))
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Config{Node: node, Source: source.NewReplay(rec, time.Time{}, true),
				Faults:   &source.FaultFile{Path: filepath.Join(dir, node+"-faults.csv")},
				Interval: 10 * time.Second, Window: 5 * time.Minute, Procs: agent.ProcFS{Root: t.TempDir()}, Secret: agentSecret})
			if err != nil {
				t.Fatal(err)
			}
			agents = append(agents, a)
			srv := httptest.NewServer(a.Handler())
			t.Cleanup(srv.Close)
			urls[node] = srv.URL
		}
		sample := func() {
			for _, a := range agents {
				if err := a.SampleOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		check := filepath.Join(dir, "check")
		if err := os.WriteFile(check, []byte("#!/bin/sh\necho \"diag of $1: pass\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
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
			Collector: &collect.Agents{URL: func(n string) string { return urls[n] }, Secret: agentSecret},
			Health: &controller.Health{FatalXids: controller.DefaultFatalXids, MaxDrainedShare: 0.25, MaxFaultAge: time.Hour,
				Check: []string{check, "{node}"}, CheckInterval: time.Minute, CheckTimeout: 30 * time.Second},
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err != nil {
			t.Fatal(err)
		}
		cycle := func() {
			t.Helper()
			sample()
			if _, err := ctl.Cycle(ctx); err != nil {
				t.Fatalf("cycle: %v", err)
			}
			ctl.WaitHealthChecks()
		}
		before := map[string]slurmrest.Node{}
		for _, n := range b.Nodes {
			before[n] = nodeNamed(t, c, n)
		}
		cycle()

		f, err := os.OpenFile(filepath.Join(dir, target+"-faults.csv"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, "3,xid,79")
		f.Close()
		injected := time.Now()
		cycle()
		n := nodeNamed(t, c, target)
		if !slices.Contains(n.State, "DRAIN") || n.Reason != "strata: Xid 79 on GPU 3 (GPU fell off the bus)" {
			t.Fatalf("%s after the Xid: state %v, reason %q", target, n.State, n.Reason)
		}
		t.Logf("%s drained %s after the injection", target, time.Since(injected).Round(time.Millisecond))
		for _, other := range b.Nodes {
			if other != target && slices.Contains(nodeNamed(t, c, other).State, "DRAIN") != slices.Contains(before[other].State, "DRAIN") {
				t.Errorf("%s changed: %+v", other, nodeNamed(t, c, other))
			}
		}

		// The health check ran in that cycle (the node has no jobs): the
		// next one resumes it.
		cycle()
		n = nodeNamed(t, c, target)
		if slices.Contains(n.State, "DRAIN") || n.Reason != "" {
			t.Fatalf("%s after the health check passed: state %v, reason %q", target, n.State, n.Reason)
		}
		recs, err := st.NodeRecords(ctx, target)
		if err != nil || len(recs) != 2 || recs[0].Kind != controller.KindDrain || recs[1].Kind != controller.KindResume ||
			recs[0].Status != store.StatusDone || recs[1].Status != store.StatusDone {
			t.Errorf("%s's records: %+v, %v", target, recs, err)
		}
	})
}

func nodeNamed(t *testing.T, c *slurmrest.Client, name string) slurmrest.Node {
	t.Helper()
	nodes, err := c.Nodes(testbed.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return slurmrest.Node{}
}
