//go:build integration

package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// sacctRun is what sacct says of one job: its start, end and GPUs.
type sacctRun struct {
	start, end time.Time
	gpus       int
}

// sacct asks the bed's slurmdbd, through its sacct, for the job's run (in
// UTC, to the second).
func sacct(t *testing.T, b *testbed.Bed, id int64) sacctRun {
	t.Helper()
	cmd := exec.CommandContext(testbed.Context(t), filepath.Join(b.Bin, "sacct"), "-n", "-X", "-P", "-o", "Start,End,AllocTRES",
		"-j", strconv.FormatInt(id, 10))
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sacct -j %d: %v", id, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "|")
	if len(f) != 3 {
		t.Fatalf("sacct -j %d: %q", id, out)
	}
	var r sacctRun
	if r.start, err = time.ParseInLocation("2006-01-02T15:04:05", f[0], time.UTC); err != nil {
		t.Fatalf("sacct -j %d: start %q: %v", id, f[0], err)
	}
	if r.end, err = time.ParseInLocation("2006-01-02T15:04:05", f[1], time.UTC); err != nil {
		t.Fatalf("sacct -j %d: end %q: %v", id, f[1], err)
	}
	for _, tres := range strings.Split(f[2], ",") {
		if v, ok := strings.CutPrefix(tres, "gres/gpu="); ok {
			r.gpus, _ = strconv.Atoi(v)
		}
	}
	return r
}

// TestWorthOnBed: an idle job holding every GPU of a node is cancelled;
// two jobs of two tenants waiting for that node start on its GPUs, run
// 40 s and end. What reclaimd records of them (start, end, GPU time, start
// gain, tenant) is what sacct says they ran; the bound is beside it.
func TestWorthOnBed(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		if b.GPUsPerNode < 2 {
			t.Skipf("bed %s has %d GPUs a node: two waiting jobs need two", b.Name, b.GPUsPerNode)
		}
		node := b.Nodes[len(b.Nodes)-1]
		// A second account, the second tenant's.
		other := testbed.Unique("worth")
		if err := c.CreateAccount(ctx, b.Cluster, slurmrest.AccountSpec{Name: other, Description: "worth", Organization: "strata"}); err != nil {
			t.Fatal(err)
		}
		if err := c.AddUser(ctx, b.Cluster, slurmrest.UserSpec{Name: "alice", Accounts: []string{other}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx := context.Background()
			for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(2 * time.Second) {
				if err := c.DeleteAccount(ctx, other); err == nil {
					return
				}
			}
		})
		tm, err := tenantmap.Parse(fmt.Appendf(nil, `{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": %q, "admins": [],
			"tenants": [{"name": "lab-a", "account": %q, "admins": [], "projects": []},
			            {"name": "lab-b", "account": %q, "admins": [], "projects": []}]}`, b.Cluster, b.Account, other))
		if err != nil {
			t.Fatal(err)
		}

		submitN := func(name, account string, gpus int, script string, limit time.Duration) int64 {
			t.Helper()
			res, err := c.Submit(ctx, "alice", slurmrest.JobSpec{Name: name, Script: script, Account: account, Partition: b.Partition,
				TRESPerNode: fmt.Sprintf("gres/gpu:%d", gpus), NodeList: node, TimeLimit: limit, WorkDir: b.JobDir, StdOut: "/dev/null"})
			if err != nil {
				t.Fatalf("submit %s: %v", name, err)
			}
			t.Cleanup(func() { _ = c.Cancel(context.Background(), res.JobID) })
			return res.JobID
		}
		idle := submitN(testbed.Unique("idle"), b.Account, b.GPUsPerNode, "#!/bin/bash\nsleep 900\n", 30*time.Minute)
		testbed.WaitJob(t, c, idle, time.Minute, "running", slurmrest.Job.Running)
		half := b.GPUsPerNode / 2
		waitA := submitN(testbed.Unique("wait-a"), b.Account, half, "#!/bin/bash\nsleep 40\n", 10*time.Minute)
		waitB := submitN(testbed.Unique("wait-b"), other, half, "#!/bin/bash\nsleep 40\n", 10*time.Minute)
		for _, id := range []int64{waitA, waitB} {
			testbed.WaitJob(t, c, id, 30*time.Second, "pending", func(j slurmrest.Job) bool { return j.State.Has("PENDING") })
		}
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
		metrics := controller.NewMetrics()
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: urls, Secret: agentSecret}, Tenants: func() *tenantmap.Map { return tm }, Metrics: metrics,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err != nil {
			t.Fatal(err)
		}
		// Cycles every 5 s: the idle job is warned and cancelled, the
		// waiting jobs start and end, and one more cycle sees them ended.
		cancelled := false
		ended := 0
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) && ended < 2 {
			d, err := ctl.Cycle(ctx)
			if err != nil {
				t.Fatalf("cycle: %v", err)
			}
			for _, a := range d.Actions {
				if a.JobID != idle {
					t.Fatalf("action on job %d (the idle job is %d): %+v", a.JobID, idle, a)
				}
				cancelled = cancelled || a.Kind == "cancel"
			}
			ended = 0
			for _, id := range []int64{waitA, waitB} {
				if j, err := c.Job(ctx, id); err == nil && j.State.Has("COMPLETED") {
					ended++
				}
			}
			time.Sleep(5 * time.Second)
		}
		if _, err := ctl.Cycle(ctx); err != nil {
			t.Fatalf("cycle: %v", err)
		}
		if !cancelled || ended != 2 {
			t.Fatalf("idle job cancelled: %v, waiting jobs ended: %d of 2", cancelled, ended)
		}

		w, err := st.Worth(ctx, time.Time{}, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Reclaims) != 1 {
			t.Fatalf("reclaims %+v: want the one cancel", w.Reclaims)
		}
		r := w.Reclaims[0]
		idleRun := sacct(t, b, idle)
		limitEnd := idleRun.start.Add(30 * time.Minute)
		if r.LimitEnd == nil || !r.LimitEnd.Equal(limitEnd) {
			t.Errorf("limit end %v, want %v (sacct's start + 30 min)", r.LimitEnd, limitEnd)
		}
		bound := float64(b.GPUsPerNode) * limitEnd.Sub(r.At).Seconds()
		if r.BoundGPUSeconds != bound {
			t.Errorf("bound %v GPU-seconds, want %v", r.BoundGPUSeconds, bound)
		}
		observed := 0.0
		for id, tenant := range map[int64]string{waitA: "lab-a", waitB: "lab-b"} {
			run := sacct(t, b, id)
			gpus, secs := 0, 0.0
			for _, h := range r.HandedTo {
				if h.JobID != id {
					continue
				}
				gpus++
				secs += h.GPUSeconds
				if !h.Start.Equal(run.start) || h.End == nil || !h.End.Equal(run.end) || h.Tenant != tenant || h.GPU.Node != node {
					t.Errorf("job %d handed %+v: want start %v, end %v (sacct), tenant %s, node %s", id, h, run.start, run.end, tenant, node)
				}
				if want := limitEnd.Sub(run.start).Seconds(); h.StartGainSeconds != want {
					t.Errorf("job %d: start gain %v s, want %v (the idle job's limit end − sacct's start)", id, h.StartGainSeconds, want)
				}
			}
			if want := float64(run.gpus) * run.end.Sub(run.start).Seconds(); gpus != run.gpus || secs != want {
				t.Errorf("job %d: %d GPUs, %v GPU-seconds observed; sacct: %d GPUs, %v GPU-seconds", id, gpus, secs, run.gpus, want)
			}
			observed += secs
		}
		if r.ObservedGPUSeconds != observed || observed <= 0 || observed > bound {
			t.Errorf("observed %v GPU-seconds, want %v, above 0 and at most the bound %v", r.ObservedGPUSeconds, observed, bound)
		}
		// The counter adds each cycle's new time: equal but for float rounding.
		if v := counter(t, metrics.ObservedGPUSeconds.WithLabelValues("lab-a", "idle-cancel")); math.Abs(v-observed) > 1e-6 {
			t.Errorf("strata_reclaim_observed_gpu_seconds_total{lab-a,idle-cancel} = %v, want %v", v, observed)
		}
		t.Logf("bed %s: bound %.0f GPU-seconds, observed %.0f", b.Name, bound, observed)
	})
}
