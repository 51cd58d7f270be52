//go:build integration

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// illegalAccessScript runs until the test says its kernel went wrong (a
// file named for the node), then fails as a CUDA program does after an
// illegal memory access in its own kernel: the driver logs Xid 13 or
// 31, the program's next CUDA call errors and it exits non-zero.
const illegalAccessScript = `#!/bin/sh
while [ ! -e "%s/$SLURMD_NODENAME" ]; do sleep 1; done
echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2
exit 1
`

// A job's own kernel faults: Xid 13 (graphics engine exception) on its
// GPU, then it exits 1. Its node is not drained, and the run is a
// user_error, not retried, with the Xid as application_xid in its
// evidence.
func TestApplicationXidOnBed(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		b.DumpLogsOnFailure(t)
		ctx := testbed.Context(t)
		c := b.Client(t)
		t.Cleanup(func() {
			for _, n := range b.Nodes {
				if st := nodeNamed(t, c, n); slices.Contains(st.State, "DRAIN") && strings.HasPrefix(st.Reason, "strata: ") {
					_ = c.UpdateNode(context.Background(), n, slurmrest.NodeResume, "")
				}
			}
		})
		urls, faultFile := faultAgents(t, b)
		rules, err := reclaimrules.Parse([]byte(recoveryBedRules))
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "reclaimd.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctl, err := controller.New(controller.Config{Slurm: c, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: urls, Secret: agentSecret},
			Health:    &controller.Health{FatalXids: controller.DefaultFatalXids, MaxDrainedShare: 0.25, MaxFaultAge: time.Hour},
			Recovery:  controller.Recovery{LogRoot: b.Root},
			Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err != nil {
			t.Fatal(err)
		}
		name := testbed.Unique("appxid")
		flag := b.JobDir + "/" + name + "-fault"
		if err := os.MkdirAll(filepath.Join(b.Root, flag), 0o755); err != nil {
			t.Fatal(err)
		}
		id := submitScript(t, c, b, name, fmt.Sprintf(illegalAccessScript, flag), "", 1)
		j := testbed.WaitJob(t, c, id, time.Minute, "running", slurmrest.Job.Running)
		if len(j.GPUs) != 1 {
			t.Fatalf("job %d runs on %v with GPUs %+v: want one GPU", id, j.Nodes, j.GPUs)
		}
		node, gpu := j.GPUs[0].Node, j.GPUs[0].Index
		if _, err := ctl.Cycle(ctx); err != nil {
			t.Logf("cycle: %v", err)
		}
		f, err := os.OpenFile(faultFile(node), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "%d,xid,13\n", gpu)
		f.Close()
		if err := os.WriteFile(filepath.Join(b.Root, flag, node), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var fs []store.Failure
		end := time.Now().Add(2 * time.Minute)
		for {
			if _, err := ctl.Cycle(ctx); err != nil {
				t.Logf("cycle: %v", err)
			}
			if slices.Contains(nodeNamed(t, c, node).State, "DRAIN") {
				t.Fatalf("%s drained after an Xid 13: %q", node, nodeNamed(t, c, node).Reason)
			}
			if fs, err = st.JobFailures(ctx, id); err != nil {
				t.Fatal(err)
			}
			if len(fs) > 0 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("job %d not classified within 2m", id)
			}
			time.Sleep(2 * time.Second)
		}
		if fs[0].Class != string(failure.UserError) || fs[0].Action == "retry" {
			t.Errorf("failure %s %s %q (evidence %s), want user_error not retried", fs[0].Class, fs[0].Action, fs[0].Reason, fs[0].Evidence)
		}
		var ev failure.Evidence
		if err := json.Unmarshal(fs[0].Evidence, &ev); err != nil || ev.Xid != 0 || ev.ApplicationXid == nil ||
			ev.ApplicationXid.Code != 13 || ev.ApplicationXid.Node != node || ev.ApplicationXid.GPU != gpu {
			t.Errorf("evidence %s (%v), want application_xid 13 on %s GPU %d and no Xid at fault", fs[0].Evidence, err, node, gpu)
		}
		if n := nodeNamed(t, c, node); slices.Contains(n.State, "DRAIN") {
			t.Errorf("%s drained: %q", node, n.Reason)
		}
	})
}
