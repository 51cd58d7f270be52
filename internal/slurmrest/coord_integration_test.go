//go:build integration

package slurmrest_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestCoordinatorsREST: POST /accounts sets coordinators on both releases.
// Added and removed one by one, the list is what was asked for, in REST's
// answer and sacctmgr's alike; a child account lists only its own; a user
// slurmdbd does not know, which it drops without a word, is an error; the
// account's description and organization survive the writes.
func TestCoordinatorsREST(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		parent, child := testbed.Unique("coa"), testbed.Unique("cob")
		for _, a := range []slurmrest.AccountSpec{{Name: parent, Description: "a parent", Organization: "strata"},
			{Name: child, Parent: parent, Description: "a child", Organization: "strata"}} {
			if err := c.CreateAccount(ctx, b.Cluster, a); err != nil {
				t.Fatalf("create %s: %v", a.Name, err)
			}
		}
		t.Cleanup(func() {
			_ = c.DeleteAccount(testbed.Context(t), child)
			_ = c.DeleteAccount(testbed.Context(t), parent)
		})
		coords := func(name string) (slurmrest.Account, []string) {
			t.Helper()
			accts, err := c.AccountsWithCoordinators(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range accts {
				if a.Name == name {
					got := slices.Clone(a.Coordinators)
					slices.Sort(got)
					return a, got
				}
			}
			t.Fatalf("no account %s", name)
			return slurmrest.Account{}, nil
		}
		step := func(what string, err error, want []string) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			a, got := coords(parent)
			if !slices.Equal(got, want) || a.Description != "a parent" || a.Organization != "strata" {
				t.Fatalf("after %s: %+v (coordinators %v), want %v and the description and organization kept", what, a, got, want)
			}
		}
		step("add alice", c.AddCoordinators(ctx, parent, "alice"), []string{"alice"})
		step("add bob and alice again", c.AddCoordinators(ctx, parent, "bob", "alice"), []string{"alice", "bob"})
		if _, got := coords(child); len(got) != 0 {
			t.Errorf("child %s lists %v: want none of its own (its parent's are inherited)", child, got)
		}
		step("remove alice", c.RemoveCoordinators(ctx, parent, "alice"), []string{"bob"})
		step("remove alice again", c.RemoveCoordinators(ctx, parent, "alice"), []string{"bob"})
		nobody := testbed.Unique("nobody")
		if err := c.AddCoordinators(ctx, parent, nobody); !errors.Is(err, slurmrest.ErrNotFound) {
			t.Errorf("add %s, who is no Slurm user: %v, want ErrNotFound", nobody, err)
		}
		step("the failed add", nil, []string{"bob"})
		if err := c.AddCoordinators(ctx, testbed.Unique("noacct"), "bob"); !errors.Is(err, slurmrest.ErrNotFound) {
			t.Errorf("coordinators of an account that does not exist: %v, want ErrNotFound", err)
		}
		if accts, err := c.Accounts(ctx); err != nil || !slices.ContainsFunc(accts, func(a slurmrest.Account) bool { return a.Name == parent && a.Coordinators == nil }) {
			t.Errorf("Accounts: %v; want %s without coordinators (only AccountsWithCoordinators asks for them)", err, parent)
		}
	})
}

// TestJobsActive: slurmdbd refuses to remove an account that has a
// pending job; the error is ErrJobsActive, and the account stays.
func TestJobsActive(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		acct := testbed.Unique("busy")
		if err := c.CreateAccount(ctx, b.Cluster, slurmrest.AccountSpec{Name: acct, Description: "busy", Organization: "strata"}); err != nil {
			t.Fatal(err)
		}
		if err := c.AddUser(ctx, b.Cluster, slurmrest.UserSpec{Name: "alice", Accounts: []string{acct}}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Submit(ctx, "alice", slurmrest.JobSpec{Name: acct, Script: "#!/bin/bash\nsleep 600\n", Account: acct,
			Partition: b.Partition, TimeLimit: 5 * time.Minute, WorkDir: b.JobDir, StdOut: "/dev/null", Hold: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx := testbed.Context(t)
			_ = c.Cancel(ctx, res.JobID)
			for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
				if err := c.DeleteAccount(ctx, acct); !errors.Is(err, slurmrest.ErrJobsActive) {
					return
				}
			}
		})
		// slurmctld tells slurmdbd of the job a moment after the submit;
		// until slurmdbd has it, it lets the account go, so wait for
		// accounting to list the job first.
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, _ := exec.CommandContext(ctx, filepath.Join(b.Bin, "sacct"), "-n", "-X", "-P", "-o", "JobID",
				"-j", strconv.FormatInt(res.JobID, 10)).Output()
			if strings.TrimSpace(string(out)) != "" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("job %d is not in slurmdbd's accounting after 30 s", res.JobID)
			}
		}
		err = c.DeleteAccount(ctx, acct)
		if !errors.Is(err, slurmrest.ErrJobsActive) {
			t.Fatalf("delete %s with a pending job: %v, want ErrJobsActive", acct, err)
		}
		if accts, _ := c.Accounts(ctx); !slices.ContainsFunc(accts, func(a slurmrest.Account) bool { return a.Name == acct }) {
			t.Errorf("%s is gone after a refused removal", acct)
		}
	})
}
