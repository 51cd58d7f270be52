//go:build integration

package slurmrest_test

import (
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestHistory runs a two-GPU job of alice's to completion, then finds it in
// slurmdbd's record through slurmrestd (History over a window that holds
// it, and FinishedJob), with the GPU-hours sacct gives for it:
// ElapsedRaw × AllocTRES gres/gpu. slurmctld keeps a finished job for
// MinJobAge (300 s on the beds); slurmdbd has it as soon as it ends, so the
// test need not wait for it to leave. With -capture, the exchanges are
// saved as the replay records history.json, finished-job.json and
// finished-job-missing.json.
func TestHistory(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		admin := b.Client(t)
		res, err := admin.Submit(ctx, "alice", slurmrest.JobSpec{
			Name: testbed.Unique("history"), Script: "#!/bin/sh\nsleep 3\n", Account: b.Account, Partition: b.Partition,
			TRESPerNode: "gres/gpu:2", TimeLimit: 5 * time.Minute, WorkDir: b.JobDir, StdOut: "/dev/null",
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		live := testbed.WaitJob(t, admin, res.JobID, 2*time.Minute, "completed", func(j slurmrest.Job) bool { return j.State.Has("COMPLETED") })

		rec := &recorder{base: http.DefaultTransport}
		cfg := b.Config()
		cfg.HTTPClient = &http.Client{Transport: rec, Timeout: 30 * time.Second}
		c, err := slurmrest.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// A whole-second window around the job, the same for the replay.
		f := slurmrest.HistoryFilter{Users: []string{"alice"}, From: live.SubmitTime.Add(-time.Second), To: live.EndTime.Add(time.Minute).Truncate(time.Second)}
		var got slurmrest.FinishedJob
		deadline := time.Now().Add(time.Minute)
		for found := false; !found; {
			if time.Now().After(deadline) {
				t.Fatalf("job %d is not ended in slurmdbd's history after a minute", res.JobID)
			}
			rec.record("history")
			jobs, err := c.History(ctx, f)
			rec.record("")
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if j.User != "alice" {
					t.Errorf("history for alice holds job %d of %q", j.ID, j.User)
				}
				if j.ID == res.JobID && j.Ended() {
					got, found = j, true
				}
			}
			if !found {
				rec.mu.Lock()
				rec.recs = nil // keep only the answer that holds the ended job
				rec.mu.Unlock()
				time.Sleep(time.Second)
			}
		}
		rec.record("finished-job")
		one, err := c.FinishedJob(ctx, res.JobID)
		rec.record("finished-job-missing")
		_, missing := c.FinishedJob(ctx, 999999)
		rec.record("")
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(missing, slurmrest.ErrNotFound) {
			t.Errorf("FinishedJob(999999) = %v, want ErrNotFound", missing)
		}
		if one.ID != got.ID || one.GPUHours() != got.GPUHours() || !one.EndTime.Equal(got.EndTime) {
			t.Errorf("FinishedJob = %+v, History's record = %+v", one, got)
		}
		if got.Account != b.Account || got.GPUs() != 2 || got.State.Base() != "COMPLETED" || got.ExitCode != 0 || got.Elapsed < 3*time.Second {
			t.Errorf("history record %+v: want account %s, 2 GPUs, COMPLETED, exit 0, elapsed at least 3s", got, b.Account)
		}
		elapsed, gpus := sacctGPU(t, b, res.JobID)
		if want := float64(gpus) * float64(elapsed) / 3600; got.GPUHours() != want || got.Elapsed != time.Duration(elapsed)*time.Second {
			t.Errorf("GPU-hours %v (elapsed %v), sacct gives %v (ElapsedRaw %d × %d GPUs)", got.GPUHours(), got.Elapsed, want, elapsed, gpus)
		}
		t.Logf("%s: job %d: %s, %v, %d GPUs, %.6f GPU-hours", b.Version, got.ID, got.State, got.Elapsed, got.GPUs(), got.GPUHours())
		if *captureDir != "" {
			rec.save(t, filepath.Join(*captureDir, "slurm-"+b.Version))
		}
	})
}

// sacctGPU is the job's ElapsedRaw and gres/gpu count as sacct -X gives them.
func sacctGPU(t *testing.T, b *testbed.Bed, id int64) (elapsed, gpus int64) {
	t.Helper()
	cmd := exec.CommandContext(testbed.Context(t), filepath.Join(b.Bin, "sacct"), "-X", "-n", "-P", "-j", strconv.FormatInt(id, 10), "--format=ElapsedRaw,AllocTRES")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sacct: %v: %s", err, out)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	raw, tres, ok := strings.Cut(line, "|")
	if !ok {
		t.Fatalf("sacct: %q is not ElapsedRaw|AllocTRES", out)
	}
	if elapsed, err = strconv.ParseInt(raw, 10, 64); err != nil {
		t.Fatalf("sacct ElapsedRaw %q: %v", raw, err)
	}
	for _, kv := range strings.Split(tres, ",") {
		if n, ok := strings.CutPrefix(kv, "gres/gpu="); ok {
			if gpus, err = strconv.ParseInt(n, 10, 64); err != nil {
				t.Fatalf("sacct AllocTRES %q: %v", tres, err)
			}
		}
	}
	if gpus == 0 {
		t.Fatalf("sacct AllocTRES %q has no gres/gpu", tres)
	}
	return elapsed, gpus
}
