//go:build integration

package slurmrest_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestRefusedByOwner: bob, with a token minted for him, cancels, signals,
// holds and requeues alice's running job. slurmrestd answers the cancel
// and the signal with HTTP 200 and no "errors"; each must still fail with
// a *RefusedError (or the *APIError slurmrestd sends for some), and the
// job run on. With -capture, the refused cancel's exchange is saved as
// the replay record cancel-refused.json.
func TestRefusedByOwner(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		if !slices.Contains(b.Users, "bob") {
			t.Skipf("the test bed has no user bob (users: %v)", b.Users)
		}
		ctx := testbed.Context(t)
		admin := b.Client(t)
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{base: http.DefaultTransport}
		cfg := b.Config()
		cfg.Tokens = signer
		cfg.HTTPClient = &http.Client{Transport: rec, Timeout: 30 * time.Second}
		users, err := slurmrest.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := users.Submit(ctx, "alice", slurmrest.JobSpec{
			Name: testbed.Unique("refused"), Script: trapScript, Account: b.Account, Partition: b.Partition,
			TimeLimit: 10 * time.Minute, WorkDir: b.JobDir, StdOut: "/dev/null", Requeue: ptr(true),
		})
		if err != nil {
			t.Fatalf("submit as alice: %v", err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		testbed.WaitJob(t, admin, res.JobID, time.Minute, "running", slurmrest.Job.Running)

		bob := users.As("bob")
		rec.record("cancel-refused")
		err = bob.Cancel(ctx, res.JobID)
		rec.record("")
		var re *slurmrest.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, slurmrest.ErrRefused) || !errors.Is(err, slurmrest.ErrPermission) {
			t.Fatalf("bob cancelling alice's job: %v, want a *RefusedError for permission", err)
		}
		if !strings.Contains(strings.ToLower(re.Reason()), "permission") {
			t.Errorf("the refusal's reason is %q, want Slurm's permission error", re.Reason())
		}
		t.Logf("%s: bob's cancel: %v", b.Version, err)
		for name, do := range map[string]func() error{
			"signal":  func() error { return bob.Signal(ctx, res.JobID, "USR1", false) },
			"hold":    func() error { return bob.Update(ctx, res.JobID, slurmrest.JobUpdate{Hold: ptr(true)}) },
			"comment": func() error { return bob.Update(ctx, res.JobID, slurmrest.JobUpdate{Comment: ptr("bob was here")}) },
		} {
			err := do()
			if err == nil || !errors.Is(err, slurmrest.ErrPermission) {
				t.Errorf("bob's %s of alice's job: %v, want a permission refusal", name, err)
			}
			t.Logf("%s: bob's %s: %v", b.Version, name, err)
		}
		if users.Info().Parser == "v0.0.45" { // v0.0.42 requeues with scontrol, whose exit status says
			err := bob.Requeue(ctx, res.JobID, slurmrest.RequeueOptions{})
			if err == nil || !errors.Is(err, slurmrest.ErrPermission) {
				t.Errorf("bob's requeue of alice's job: %v, want a permission refusal", err)
			}
			t.Logf("%s: bob's requeue: %v", b.Version, err)
		}
		j, err := admin.Job(ctx, res.JobID)
		if err != nil || !j.Running() || j.Held || j.RestartCount != 0 || j.Comment == "bob was here" {
			t.Errorf("alice's job after bob's tries: %+v, %v; want it running as it was", j, err)
		}
		if *captureDir != "" {
			rec.save(t, filepath.Join(*captureDir, "slurm-"+b.Version))
		}
	})
}
