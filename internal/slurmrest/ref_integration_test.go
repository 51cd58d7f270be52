//go:build integration

package slurmrest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestArrayTaskActions submits a 3-task array as alice and acts on one
// task at a time by its ref, the array's own record (whose ID is the
// array's, so its bare ID names every task) first: each action must
// reach that task alone.
func TestArrayTaskActions(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		b.DumpLogsOnFailure(t)
		arr := b.Sbatch(t, "alice", "--array=0-2", "--gres=gpu:1", "--wrap", "sleep 600")
		t.Cleanup(func() { _ = c.Cancel(context.Background(), arr) })
		tasks := waitRecords(t, c, 3, func(j slurmrest.Job) bool { return j.ArrayJobID == arr })
		var own slurmrest.Job
		var others []slurmrest.Job
		for _, j := range tasks {
			if j.ArrayTaskID < 0 {
				t.Fatalf("task %d of array %d has no task id: %+v", j.ID, arr, j)
			}
			if j.ID == arr {
				own = j
			} else {
				others = append(others, j)
			}
		}
		if own.ID == 0 || len(others) != 2 {
			t.Fatalf("array %d: want its own record among 3 running tasks, got %+v", arr, tasks)
		}
		if want := slurmrest.JobRef(strconv.FormatInt(arr, 10) + "_" + strconv.FormatInt(own.ArrayTaskID, 10)); own.Ref() != want {
			t.Fatalf("ref of the array's own record = %q, want %q", own.Ref(), want)
		}
		if j, err := c.Job(ctx, arr); err != nil || j.ID != arr || j.Ref() != own.Ref() {
			t.Fatalf("Job(%d) = %+v, %v: want the array's own record", arr, j, err)
		}

		// Mark the array's own task by its own ID: that record alone.
		if err := c.UpdateRef(ctx, slurmrest.RefOf(own.ID), slurmrest.JobUpdate{AdminComment: ptr("strata: test mark")}); err != nil {
			t.Fatalf("update %d: %v", own.ID, err)
		}
		adminComments(t, c, map[int64]string{own.ID: "strata: test mark", others[0].ID: "", others[1].ID: ""})

		// Requeue (REST on 26.05, scontrol on 24.11) the array's own task.
		if err := c.RequeueRef(ctx, own.Ref(), slurmrest.RequeueOptions{Reason: "integration test"}); err != nil {
			t.Fatalf("requeue %s: %v", own.Ref(), err)
		}
		waitGone(t, c, own.ID, "requeued")
		stillRunning(t, c, others...)

		// Signal the batch shell of the second task: it does not trap USR1.
		if err := c.SignalRef(ctx, others[0].Ref(), "USR1", true); err != nil {
			t.Fatalf("signal %s: %v", others[0].Ref(), err)
		}
		waitGone(t, c, others[0].ID, "signalled")
		stillRunning(t, c, others[1])

		// Cancel the third: the requeued task must stay in the queue.
		if err := c.CancelRef(ctx, others[1].Ref()); err != nil {
			t.Fatalf("cancel %s: %v", others[1].Ref(), err)
		}
		waitGone(t, c, others[1].ID, "cancelled")
		if j, err := c.Job(ctx, own.ID); err != nil || j.State.Has("CANCELLED") {
			t.Errorf("requeued task %s after the cancel of %s: %+v, %v; want it still queued", own.Ref(), others[1].Ref(), j.State, err)
		}
	})
}

// TestHetComponentActions submits a 2-component heterogeneous job as
// alice: a cancel of component 1 by its ref ends it alone, and a requeue
// of it is refused (Slurm requeues only whole heterogeneous jobs).
func TestHetComponentActions(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		b.DumpLogsOnFailure(t)
		het := b.Sbatch(t, "alice", "--gres=gpu:1", "--wrap", "sleep 600", ":",
			"-A", b.Account, "-p", b.Partition, "--gres=gpu:1", "-t", "10")
		t.Cleanup(func() { _ = c.Cancel(context.Background(), het) })
		comps := waitRecords(t, c, 2, func(j slurmrest.Job) bool { return j.HetJobID == het })
		var leader, second slurmrest.Job
		for _, j := range comps {
			switch j.HetJobOffset {
			case 0:
				leader = j
			case 1:
				second = j
			}
		}
		h := strconv.FormatInt(het, 10)
		if leader.ID != het || leader.Ref() != slurmrest.JobRef(h+"+0") || second.Ref() != slurmrest.JobRef(h+"+1") {
			t.Fatalf("het job %d: components %+v", het, comps)
		}
		if j, err := c.Job(ctx, het); err != nil || j.ID != het || !j.HetComponent() {
			t.Fatalf("Job(%d) = %+v, %v: want the leader's record", het, j, err)
		}
		if err := c.UpdateRef(ctx, slurmrest.RefOf(second.ID), slurmrest.JobUpdate{AdminComment: ptr("strata: test mark")}); err != nil {
			t.Fatalf("update %d: %v", second.ID, err)
		}
		adminComments(t, c, map[int64]string{leader.ID: "", second.ID: "strata: test mark"})
		err := c.RequeueRef(ctx, second.Ref(), slurmrest.RequeueOptions{Reason: "integration test"})
		if err == nil {
			t.Errorf("requeue of component %s: no error; Slurm requeues only whole het jobs", second.Ref())
		} else if !errors.Is(err, slurmrest.ErrNotFound) {
			t.Logf("requeue of component %s refused: %v", second.Ref(), err)
		}
		stillRunning(t, c, leader, second)
		if err := c.CancelRef(ctx, second.Ref()); err != nil {
			t.Fatalf("cancel %s: %v", second.Ref(), err)
		}
		waitGone(t, c, second.ID, "cancelled")
		stillRunning(t, c, leader)
	})
}

// waitRecords waits until n records that match are running.
func waitRecords(t *testing.T, c *slurmrest.Client, n int, match func(slurmrest.Job) bool) []slurmrest.Job {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		list, err := c.Jobs(testbed.Context(t), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var got []slurmrest.Job
		for _, j := range list.Jobs {
			if match(j) && j.Running() {
				got = append(got, j)
			}
		}
		if len(got) == n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records running after 90s", len(got), n)
		}
		time.Sleep(time.Second)
	}
}

// waitGone waits until job id no longer runs.
func waitGone(t *testing.T, c *slurmrest.Client, id int64, what string) {
	t.Helper()
	testbed.WaitJob(t, c, id, time.Minute, what, func(j slurmrest.Job) bool { return !j.Running() })
}

// stillRunning checks that the jobs run the same run as before: an action
// meant for another reached none of them.
func stillRunning(t *testing.T, c *slurmrest.Client, jobs ...slurmrest.Job) {
	t.Helper()
	time.Sleep(2 * time.Second) // slurmctld acts at once; give it time to show a mistake
	for _, want := range jobs {
		j, err := c.Job(testbed.Context(t), want.ID)
		if err != nil || !j.Running() || j.RestartCount != want.RestartCount {
			t.Errorf("job %d (%s) = %v (restarts %d), %v: want it still running its run", want.ID, want.Ref(), j.State, j.RestartCount, err)
		}
	}
}

// adminComments checks each job's admin comment.
func adminComments(t *testing.T, c *slurmrest.Client, want map[int64]string) {
	t.Helper()
	for id, w := range want {
		j, err := c.Job(testbed.Context(t), id)
		if err != nil || j.AdminComment != w {
			t.Errorf("job %d: admin comment %q, %v; want %q", id, j.AdminComment, err, w)
		}
	}
}
