//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

var cliMu sync.Mutex // urfave/cli shares its help flag between apps

func policyOn(t *testing.T, b *testbed.Bed, file string, args ...string) (int, string) {
	t.Helper()
	return policyOnLevel(t, b, "warn", file, args...)
}

// policyOnLevel is policyOn logging at level.
func policyOnLevel(t *testing.T, b *testbed.Bed, level, file string, args ...string) (int, string) {
	t.Helper()
	return policyOnCtx(testbed.Context(t), t, b, level, file, args...)
}

// policyOnCtx is policyOnLevel with a context of the caller's.
func policyOnCtx(ctx context.Context, t *testing.T, b *testbed.Bed, level, file string, args ...string) (int, string) {
	t.Helper()
	cliMu.Lock()
	defer cliMu.Unlock()
	var out, errb bytes.Buffer
	full := append([]string{"strata-policy", "--log-level", level}, args...)
	full = append(full, "--policy", file, "--url", b.URL, "--user", b.AdminUser, "--token-file", b.TokenFile)
	if slices.Contains([]string{"plan", "apply", "drift"}, args[0]) {
		// The test bed's sacctmgr, and associations read through it
		// (so a broken sacctmgr read fails the test rather than falling
		// back to slurmrestd), unless the test says how to read.
		full = append(full, "--sacctmgr", filepath.Join(b.Bin, "sacctmgr"))
		if !slices.Contains(args, "--read-with") {
			full = append(full, "--read-with", readSacctmgr)
		}
	}
	if args[0] == "apply" && !slices.Contains(args, "--lock-dir") {
		// Tests of other tenants apply side by side: each its own lock.
		full = append(full, "--lock-dir", t.TempDir())
	}
	err := run(ctx, full, &out, &errb)
	code := cliexit.CodeOf(err)
	return code, out.String() + errb.String() + fmt.Sprint(err)
}

const testPolicy = `apiVersion: strata/v1
kind: Policy
cluster:
  name: %[1]s
  gpu_types: [h100]
classes:
  - name: %[2]s-train
    partition: gpu
    max_time: 24h
    priority: 100
  - name: %[2]s-batch
    partition: gpu
    max_time: 12h
    priority: 10
tenants:
  - name: %[2]s
    shares: %[3]d
    limits:
      gpus: 16
      gpu_hours: 1000
    projects:
      - name: llm
        shares: 40
        limits:
          gpus: 8
        members:
          - user: alice
      - name: cv
        shares: 20
        members:
          - user: bob
%[4]s`

func writePolicy(t *testing.T, dir string, b *testbed.Bed, tenant string, shares int, extra string) string {
	t.Helper()
	p := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(testPolicy, b.Cluster, tenant, shares, extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanApplyDrift: an empty slurmdbd gets the policy in one apply; a
// second apply writes nothing; a changed share is a one-line plan; a manual
// change is drift; prune removes only Strata's objects. Once reading the
// associations through sacctmgr, once through slurmrestd.
func TestPlanApplyDrift(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		for _, mode := range []string{readSacctmgr, readREST} {
			t.Run("read-with-"+mode, func(t *testing.T) { planApplyDrift(t, b, mode) })
		}
	})
}

func planApplyDrift(t *testing.T, b *testbed.Bed, mode string) {
	pol := func(file string, args ...string) (int, string) {
		t.Helper()
		return policyOn(t, b, file, append(args, "--read-with", mode)...)
	}
	ctx := testbed.Context(t)
	c := b.Client(t)
	tenant := testbed.Unique("pol")
	dir := t.TempDir()
	file := writePolicy(t, dir, b, tenant, 30, "")
	t.Cleanup(func() {
		for _, u := range b.Users { // give the test users back their default account first
			_ = c.SetDefaultAccount(ctx, u, b.Account)
		}
		for _, a := range []string{tenant + "-llm", tenant + "-cv", tenant} {
			_ = c.DeleteAccount(ctx, a)
		}
		for _, q := range []string{tenant + "-train", tenant + "-batch"} {
			_ = c.DeleteQOS(ctx, q)
		}
	})
	code, out := pol(file, "plan")
	if code != exitChanges || !strings.Contains(out, "create qos") || !strings.Contains(out, "create account     "+tenant+"-llm") {
		t.Fatalf("plan on an empty slurmdbd: exit %d:\n%s", code, out)
	}
	if code, out = pol(file, "apply", "--apply"); code != exitOK {
		t.Fatalf("apply: exit %d:\n%s", code, out)
	}
	if code, out = pol(file, "plan"); code != exitOK || !strings.Contains(out, "Slurm matches") {
		t.Fatalf("plan after apply: exit %d, want 0 and no change:\n%s", code, out)
	}
	assocs, err := c.Associations(ctx, slurmrest.AssociationFilter{Account: tenant + "-llm"})
	if err != nil {
		t.Fatal(err)
	}
	var acct, alice bool
	for _, a := range assocs {
		if a.User == "" && a.Parent == tenant && a.Fairshare == 40 && a.GrpTRES.String() == "gres/gpu=8" {
			acct = true
		}
		if a.User == "alice" {
			alice = true
		}
	}
	if !acct || !alice {
		t.Fatalf("slurmdbd after apply: %+v", assocs)
	}

	// A changed share is a one-line plan with old -> new.
	file = writePolicy(t, dir, b, tenant, 35, "")
	code, out = pol(file, "plan")
	if code != exitChanges || !strings.Contains(out, "1 changes") || !strings.Contains(out, "fairshare: 30 -> 35") {
		t.Fatalf("plan after a share change: exit %d:\n%s", code, out)
	}
	if code, out = pol(file, "apply", "--apply"); code != exitOK {
		t.Fatalf("apply: exit %d:\n%s", code, out)
	}

	// A manual change behind Strata's back is drift.
	if err := c.SetAssociations(ctx, []slurmrest.Association{{Cluster: b.Cluster, Account: tenant + "-cv", Fairshare: 99}}); err != nil {
		t.Fatal(err)
	}
	code, out = pol(file, "drift")
	if code != exitChanges || !strings.Contains(out, "fairshare: 99 -> 20") {
		t.Fatalf("drift after a manual change: exit %d:\n%s", code, out)
	}
	if code, out = pol(file, "apply", "--apply"); code != exitOK {
		t.Fatalf("apply: exit %d:\n%s", code, out)
	}
	if code, out = pol(file, "drift"); code != exitOK {
		t.Fatalf("drift after converging: exit %d:\n%s", code, out)
	}

	// Prune: drop project cv; only Strata's objects go.
	noCV := strings.Replace(fmt.Sprintf(testPolicy, b.Cluster, tenant, 35, ""), "      - name: cv\n        shares: 20\n        members:\n          - user: bob\n", "", 1)
	if err := os.WriteFile(file, []byte(noCV), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = pol(file, "plan")
	if code != exitOK || strings.Contains(out, "delete") {
		t.Fatalf("plan without --prune removed something: exit %d:\n%s", code, out)
	}
	code, out = pol(file, "apply", "--apply", "--prune")
	if code != exitOK || !strings.Contains(out, "delete association "+tenant+"-cv/bob") || !strings.Contains(out, "delete account     "+tenant+"-cv") ||
		!strings.Contains(out, "default_account: "+tenant+"-cv -> "+b.Account) {
		t.Fatalf("apply --prune: exit %d:\n%s", code, out)
	}
	accts, _ := c.Accounts(ctx)
	var names []string
	for _, a := range accts {
		names = append(names, a.Name)
	}
	joined := "," + strings.Join(names, ",") + ","
	if strings.Contains(joined, ","+tenant+"-cv,") || !strings.Contains(joined, ","+b.Account+",") {
		t.Errorf("after prune the accounts are %v: want %s-cv gone and %s (not Strata's) kept", names, tenant, b.Account)
	}
}

// TestReadWith: --read-with auto reads through slurmrestd when sacctmgr
// is missing or fails (and says why), --read-with sacctmgr fails instead,
// and a mode that does not exist is an error that lists the ones that do.
func TestReadWith(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		file := writePolicy(t, t.TempDir(), b, testbed.Unique("rw"), 30, "")
		// sacctmgr as if slurm.conf named a slurmdbd without this cluster:
		// the test bed's, with root's associations moved to another.
		elsewhere := filepath.Join(t.TempDir(), "sacctmgr")
		script := fmt.Sprintf("#!/bin/sh\n%s \"$@\" | sed 's/^%s|root|/elsewhere|root|/'\n", filepath.Join(b.Bin, "sacctmgr"), b.Cluster)
		if err := os.WriteFile(elsewhere, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		plan := func(args ...string) (int, string) {
			t.Helper()
			cliMu.Lock()
			defer cliMu.Unlock()
			var out bytes.Buffer
			full := append([]string{"strata-policy", "--log-level", "info", "plan", "--policy", file, "--url", b.URL,
				"--user", b.AdminUser, "--token-file", b.TokenFile}, args...)
			err := run(testbed.Context(t), full, &out, &out)
			return cliexit.CodeOf(err), out.String() + fmt.Sprint(err)
		}
		for _, tc := range []struct {
			name    string
			args    []string
			code    int
			want    []string
			mustNot string
		}{
			{"auto, sacctmgr fails", []string{"--sacctmgr", "/bin/false"}, exitChanges,
				[]string{"could not read the associations through sacctmgr; reading them through slurmrestd", "create account"}, ""},
			{"auto, sacctmgr of another slurmdbd", []string{"--sacctmgr", elsewhere}, exitChanges,
				[]string{"sacctmgr lists no association of account root on cluster " + b.Cluster, "create account"}, ""},
			{"auto, no sacctmgr", []string{"--sacctmgr", filepath.Join(t.TempDir(), "sacctmgr")}, exitChanges,
				[]string{"reading associations through slurmrestd: no sacctmgr found", "create account"}, "could not read"},
			{"sacctmgr, it fails", []string{"--read-with", "sacctmgr", "--sacctmgr", "/bin/false"}, exitFailure,
				[]string{"sacctmgr -n -P show associations"}, "create account"},
			{"rest never runs sacctmgr", []string{"--read-with", "rest", "--sacctmgr", "/bin/false"}, exitChanges,
				[]string{"create account"}, "sacctmgr"},
			{"a mode that does not exist", []string{"--read-with", "ldap"}, exitUsage,
				[]string{`--read-with "ldap": give auto, sacctmgr or rest`}, "create account"},
		} {
			code, out := plan(tc.args...)
			if code != tc.code {
				t.Errorf("%s: exit %d, want %d:\n%s", tc.name, code, tc.code, tail(out))
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: want %q in:\n%s", tc.name, w, tail(out))
				}
			}
			if tc.mustNot != "" && strings.Contains(out, tc.mustNot) {
				t.Errorf("%s: want no %q in:\n%s", tc.name, tc.mustNot, tail(out))
			}
		}
	})
}
