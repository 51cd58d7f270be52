//go:build integration

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/spec"
	"github.com/strata-hpc/strata/test/policygen"
)

// TestApplyBatched applies a generated policy of 5 tenants × 4 projects ×
// 5 members to a slurmdbd that has none of it, and counts the requests:
// the reads (2 parser probes, QOS, accounts, and the associations: three
// sacctmgr listings, or through slurmrestd one request per 256 accounts)
// and 12 writes:
//   - QOS: 2, as interactive and train preempt batch, which the first
//     request creates (slurmrestd resolves a preempted QOS before it writes);
//   - 25 accounts: 8 (their records; one association request per parent:
//     root and the 5 tenants; the settings of all 25);
//   - users and their associations, with their GPU limits: 2 (the records,
//     then every association).
//
// A second apply of the same file only reads.
func TestApplyBatched(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		for _, mode := range []string{readSacctmgr, readREST} {
			t.Run("read-with-"+mode, func(t *testing.T) { applyBatched(t, b, mode) })
		}
	})
}

func applyBatched(t *testing.T, b *testbed.Bed, mode string) {
	file, st := generated(t, b, policygen.Spec{Tenants: 5, Projects: 4, Members: 5, Seed: 3})
	changes := 3 + 25 + st.Users + 5*4*5 // QOS, accounts, users, a GPU limit per user association
	accts, err := b.Client(t).Accounts(testbed.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	// REST reads and sacctmgr runs of one read of Slurm, with n accounts.
	reads, runs := func(n int) int { return 4 + (n+255)/256 }, 0
	if mode == readSacctmgr {
		reads, runs = func(int) int { return 4 }, 3
	}
	code, out := policyOn(t, b, file, "apply", "--apply", "--read-with", mode)
	if code != exitOK {
		t.Fatalf("apply: exit %d:\n%s", code, tail(out))
	}
	// The reads before the writes, then the read-back after them
	// (QOS, accounts, associations of the 25 new accounts too; the
	// two parser probes are not repeated).
	applyReads := reads(len(accts)) + reads(len(accts)+25) - 2
	for _, want := range []string{fmt.Sprintf("Applied %d of %d changes in 4 writes.", changes, changes),
		fmt.Sprintf("%d requests to slurmrestd (%d reads, 12 writes) and %d sacctmgr runs", applyReads+12, applyReads, 2*runs), "Checked: Slurm now matches"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply: want %q in:\n%s", want, tail(out))
		}
	}
	code, out = policyOn(t, b, file, "apply", "--apply", "--read-with", mode)
	noop := fmt.Sprintf("%d requests to slurmrestd (%[1]d reads, 0 writes) and %d sacctmgr runs", reads(len(accts)+25), runs)
	if code != exitOK || !strings.Contains(out, "Slurm matches") || !strings.Contains(out, noop) {
		t.Errorf("second apply: exit %d, want 0 and %q:\n%s", code, noop, tail(out))
	}
}

// TestApplyOneAtATime: --batch-size 1 writes every change on its own and
// makes the same Slurm state, which a batched apply then finds in sync.
func TestApplyOneAtATime(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		file, st := generated(t, b, policygen.Spec{Tenants: 2, Projects: 2, Members: 2, Seed: 5})
		changes := 3 + 6 + st.Users + 2*2*2
		code, out := policyOn(t, b, file, "apply", "--apply", "--batch-size", "1")
		if code != exitOK || !strings.Contains(out, fmt.Sprintf("Applied %d of %d changes in %d writes.", changes, changes, changes)) {
			t.Fatalf("apply --batch-size 1: exit %d, want %d changes in as many writes:\n%s", code, changes, tail(out))
		}
		code, out = policyOn(t, b, file, "apply", "--apply")
		if code != exitOK || !strings.Contains(out, "Slurm matches") || !strings.Contains(out, " reads, 0 writes)") {
			t.Errorf("batched apply after one at a time: exit %d, want no write:\n%s", code, tail(out))
		}
		if code, out = policyOn(t, b, file, "apply", "--apply", "--batch-size", "0"); code != exitUsage || !strings.Contains(out, "--batch-size 0") {
			t.Errorf("--batch-size 0: exit %d, want %d and the flag named:\n%s", code, exitUsage, tail(out))
		}
	})
}

// generated writes a policy of s for bed b with names no other test uses,
// and removes what an apply of it made when the test ends.
func generated(t *testing.T, b *testbed.Bed, s policygen.Spec) (string, policygen.Stats) {
	t.Helper()
	s.Cluster, s.Partition, s.Prefix = b.Cluster, b.Partition, testbed.Unique("pb")
	var buf bytes.Buffer
	st, err := policygen.Write(&buf, s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse(file, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want, err := compile.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, c := testbed.Context(t), b.Client(t)
		if len(want.Users) > 100 {
			// One sacctmgr run for all: one DELETE a user takes minutes
			// for thousands.
			names := make([]string, len(want.Users))
			for i, u := range want.Users {
				names[i] = u.Name
			}
			if out, err := exec.CommandContext(ctx, filepath.Join(b.Bin, "sacctmgr"), "-i", "delete", "user", "name="+strings.Join(names, ",")).CombinedOutput(); err != nil {
				t.Logf("removing the generated users: %v\n%s", err, out)
			}
		}
		for _, u := range want.Users {
			if len(want.Users) <= 100 {
				_ = c.DeleteUser(ctx, u.Name)
			}
		}
		for i := len(want.Accounts) - 1; i >= 0; i-- { // children first
			_ = c.DeleteAccount(ctx, want.Accounts[i].Name)
		}
		for _, q := range want.QOS {
			_ = c.DeleteQOS(ctx, q.Name)
		}
	})
	return file, st
}

// tail is the end of a long apply output: its summary lines.
func tail(out string) string {
	lines := strings.Split(out, "\n")
	if len(lines) > 12 {
		lines = append([]string{fmt.Sprintf("[%d lines]", len(lines)-12)}, lines[len(lines)-12:]...)
	}
	return strings.Join(lines, "\n")
}

// TestApplyLoads applies a policy of 3 tenants × 10 projects × 10
// members, more than DefaultLoadMin changes that only create: every
// account and user goes to slurmdbd in one sacctmgr load after the QOS,
// the read-back finds all of it with its limits, and a second apply only
// reads. Through slurmrestd alone (--read-with rest) the same policy is
// written in batches, with no sacctmgr run.
func TestApplyLoads(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		for mode, want := range map[string]string{readSacctmgr: "writes (1 of them sacctmgr loads).", readREST: " writes.\n"} {
			t.Run("read-with-"+mode, func(t *testing.T) {
				file, st := generated(t, b, policygen.Spec{Tenants: 3, Projects: 10, Members: 10, Seed: 7, TenantPriority: 10})
				changes := 3 + 33 + st.Users + 3*10*10
				code, out := policyOn(t, b, file, "apply", "--apply", "--read-with", mode)
				if code != exitOK || !strings.Contains(out, fmt.Sprintf("Applied %d of %d changes in ", changes, changes)) ||
					!strings.Contains(out, want) || !strings.Contains(out, "Checked: Slurm now matches") {
					t.Fatalf("apply: exit %d, want %d changes, %q and the check:\n%s", code, changes, want, tail(out))
				}
				if mode == readREST && !strings.Contains(out, " and 0 sacctmgr runs") {
					t.Errorf("apply --read-with rest ran sacctmgr:\n%s", tail(out))
				}
				// The tenants' priorities went in with the load (Priority= in
				// the flat file) and slurmdbd holds them: tenant t has 10+t.
				text, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				p, err := spec.Parse(file, text)
				if err != nil {
					t.Fatal(err)
				}
				ctx, c := testbed.Context(t), b.Client(t)
				for i, tn := range p.Tenants {
					as, err := c.Associations(ctx, slurmrest.AssociationFilter{Account: tn.Name})
					if err != nil {
						t.Fatal(err)
					}
					got := int64(-1)
					for _, a := range as {
						if a.User == "" && a.Account == tn.Name && a.Priority != nil {
							got = *a.Priority
						}
					}
					if want := int64(11 + i); got != want {
						t.Errorf("tenant %s: priority %d in slurmdbd, want %d", tn.Name, got, want)
					}
				}
				code, out = policyOn(t, b, file, "apply", "--apply", "--read-with", mode)
				if code != exitOK || !strings.Contains(out, "Slurm matches") || !strings.Contains(out, " reads, 0 writes)") {
					t.Errorf("second apply: exit %d, want no write:\n%s", code, tail(out))
				}
			})
		}
	})
}

// TestApplyLoadsInParts applies 4 tenants × 10 projects × 50 members:
// 2,000 user associations, so after the QOS the accounts go in one
// sacctmgr load and the users in two loads side by side, committed in
// order; the read-back finds all of it, and a second apply only reads.
func TestApplyLoadsInParts(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		file, st := generated(t, b, policygen.Spec{Tenants: 4, Projects: 10, Members: 50, Seed: 7})
		if st.Associations != 2000 {
			t.Fatalf("policygen made %d user associations, want 2000", st.Associations)
		}
		changes := 3 + 44 + st.Users + st.Associations
		code, out := policyOnLevel(t, b, "info", file, "apply", "--apply")
		if code != exitOK || !strings.Contains(out, fmt.Sprintf("Applied %d of %d changes in ", changes, changes)) ||
			!strings.Contains(out, "writes (3 of them sacctmgr loads).") || !strings.Contains(out, "Checked: Slurm now matches") {
			t.Fatalf("apply: exit %d, want %d changes in 3 loads, and the check:\n%s", code, changes, tail(out))
		}
		for _, want := range []string{`msg="sacctmgr load" part=1 of=2 round=1`, `msg="sacctmgr load" part=2 of=2 round=1`,
			`msg="policy changes loaded in parts side by side" changes=` + strconv.Itoa(st.Users+st.Associations) + " parts=2"} {
			if !strings.Contains(out, want) {
				t.Errorf("apply's log lacks %s", want)
			}
		}
		code, out = policyOn(t, b, file, "apply", "--apply")
		if code != exitOK || !strings.Contains(out, "Slurm matches") || !strings.Contains(out, " reads, 0 writes)") {
			t.Errorf("second apply: exit %d, want no write:\n%s", code, tail(out))
		}
	})
}
