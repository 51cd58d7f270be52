//go:build integration

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// limitsPolicy has every field plan and apply carry besides shares and
// TRES limits: class QOS with preemption and a per-job GPU cap, a
// tenant's priority and running-job limit, a project's running-job limit,
// and tenant admins (alice in admins:, bob by role).
const limitsPolicy = `apiVersion: strata/v1
kind: Policy
cluster:
  name: %[1]s
  gpu_types: [h100]
classes:
  - name: %[2]s-train
    partition: gpu
    max_time: 24h
    priority: 100
    preempt: [%[2]s-batch]
    preempt_mode: cancel
    requeue: true
    max_gpus_per_job: 16
  - name: %[2]s-batch
    partition: gpu
    max_time: 12h
    priority: 10
tenants:
  - name: %[2]s
    shares: 30
    priority: 5
    admins: [alice]
    limits:
      gpus: 16
      running_jobs: 20
    projects:
      - name: llm
        shares: 40
        limits:
          gpus: 8
          running_jobs: 4
        members:
          - user: alice
          - user: bob
            role: tenant-admin
      - name: cv
        shares: 20
        members:
          - user: bob
`

// policyFile writes the policy and returns its path and text.
type policyFile struct {
	t    *testing.T
	path string
	text string
}

func newPolicyFile(t *testing.T, b *testbed.Bed, tenant string) *policyFile {
	t.Helper()
	p := &policyFile{t: t, path: filepath.Join(t.TempDir(), "policy.yaml"), text: fmt.Sprintf(limitsPolicy, b.Cluster, tenant)}
	p.write()
	return p
}

// edit replaces old, which must occur exactly once, and rewrites the file.
func (p *policyFile) edit(old, replacement string) {
	p.t.Helper()
	if n := strings.Count(p.text, old); n != 1 {
		p.t.Fatalf("policy edit: %q occurs %d times, want once", old, n)
	}
	p.text = strings.Replace(p.text, old, replacement, 1)
	p.write()
}

func (p *policyFile) write() {
	p.t.Helper()
	if err := os.WriteFile(p.path, []byte(p.text), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// sacctmgr runs the test bed's sacctmgr (not Strata's code) and returns
// its parsable output, trimmed.
func sacctmgrOn(t *testing.T, b *testbed.Bed, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(b.Bin, "sacctmgr"), append([]string{"-n", "-P"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sacctmgr %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// cleanupTenant removes what a test of tenant made: jobs, the users'
// defaults moved back to the bed's account, the accounts, the QOS.
func cleanupTenant(t *testing.T, b *testbed.Bed, c *slurmrest.Client, tenant string, jobs *[]int64) {
	t.Cleanup(func() {
		ctx := testbed.Context(t)
		for _, id := range *jobs {
			_ = c.Cancel(ctx, id)
		}
		for _, u := range b.Users {
			_ = c.SetDefaultAccount(ctx, u, b.Account)
		}
		// slurmdbd refuses removals while the cancelled jobs still count.
		deadline := time.Now().Add(time.Minute)
		for _, a := range []string{tenant + "-llm", tenant + "-cv", tenant} {
			for {
				err := c.DeleteAccount(ctx, a)
				if err == nil || !strings.Contains(err.Error(), "Job(s) active") || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Second)
			}
		}
		for _, q := range []string{tenant + "-train", tenant + "-batch"} {
			_ = c.DeleteQOS(ctx, q)
		}
	})
}

// TestLimitsCarried: GrpJobs, the tenant's priority, QOS preemption and
// per-job caps reach Slurm (as sacctmgr shows them), a second plan is
// empty, a changed share and GPU limit are exactly two one-field changes,
// and emptying a QOS's preempt list (sacctmgr's job: slurmrestd keeps an
// empty list) converges too.
func TestLimitsCarried(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		c := b.Client(t)
		tenant := testbed.Unique("itl")
		var jobs []int64
		cleanupTenant(t, b, c, tenant, &jobs)
		pf := newPolicyFile(t, b, tenant)
		mgr := filepath.Join(b.Bin, "sacctmgr")

		code, out := policyOn(t, b, pf.path, "plan")
		for _, want := range []string{"grp_jobs: (none) -> 20", "priority: (none) -> 5", "grp_jobs: (none) -> 4",
			"preempt: (none) -> " + tenant + "-batch", "preempt_mode: (none) -> cancel", "max_tres_per_job: (none) -> gres/gpu=16",
			"add    coordinator " + tenant + "/alice", "add    coordinator " + tenant + "/bob"} {
			if code != exitChanges || !strings.Contains(out, want) {
				t.Fatalf("plan on an empty slurmdbd: exit %d, no %q:\n%s", code, want, out)
			}
		}
		if code, out = policyOn(t, b, pf.path, "apply", "--apply", "--sacctmgr", mgr); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		if code, out = policyOn(t, b, pf.path, "plan"); code != exitOK || !strings.Contains(out, "Slurm matches") {
			t.Fatalf("plan after apply: exit %d, want 0 and no change:\n%s", code, out)
		}
		// What Slurm holds, in sacctmgr's words: the limits of the policy
		// file above, the tenant's priority on its association (which its
		// project shows too: an association without a priority of its own
		// inherits its parent's).
		if got, want := sacctmgrOn(t, b, "show", "assoc", "where", "account="+tenant+","+tenant+"-llm", "user=",
			"format=account,grpjobs,priority,grptres"), tenant+"|20|5|gres/gpu=16\n"+tenant+"-llm|4|5|gres/gpu=8"; got != want {
			t.Errorf("associations:\n%s\nwant:\n%s", got, want)
		}
		if got, want := sacctmgrOn(t, b, "show", "qos", tenant+"-train", "format=name,preempt,preemptmode,maxtresperjob"),
			tenant+"-train|"+tenant+"-batch|cancel|gres/gpu=16"; got != want {
			t.Errorf("QOS: %s, want %s", got, want)
		}

		// (b) One share and one GPU limit: exactly two changes of one field each.
		pf.edit("    shares: 30\n", "    shares: 35\n")
		pf.edit("          gpus: 8\n", "          gpus: 12\n")
		code, out = policyOn(t, b, pf.path, "plan")
		wantPlan := fmt.Sprintf("2 changes:\n  modify account     %[1]s\n         fairshare: 30 -> 35\n"+
			"  modify account     %[1]s-llm\n         grp_tres: gres/gpu=8 -> gres/gpu=12\n", tenant)
		if code != exitChanges || !strings.HasPrefix(out, wantPlan) || strings.Count(out, "\n") != strings.Count(wantPlan, "\n") {
			t.Fatalf("plan after a share and a limit change: exit %d:\n%s\nwant:\n%s", code, out, wantPlan)
		}
		if code, out = policyOn(t, b, pf.path, "apply", "--apply"); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		if code, out = policyOn(t, b, pf.path, "plan"); code != exitOK {
			t.Fatalf("plan after apply: exit %d:\n%s", code, out)
		}

		// QOS preemption and caps, the tenant's running jobs and priority.
		// Two QOS change, so apply writes them in one batch, and then
		// empties train's preempt list with sacctmgr.
		pf.edit("    priority: 10\n", "    priority: 20\n")
		pf.edit("    preempt: ["+tenant+"-batch]\n", "")
		pf.edit("    preempt_mode: cancel\n", "    preempt_mode: requeue\n")
		pf.edit("    max_gpus_per_job: 16\n", "    max_gpus_per_job: 8\n")
		pf.edit("      running_jobs: 20\n", "      running_jobs: 25\n")
		pf.edit("    priority: 5\n", "")
		code, out = policyOn(t, b, pf.path, "plan")
		wantPlan = fmt.Sprintf("3 changes:\n  modify qos         %[1]s-batch\n         priority: 10 -> 20\n  modify qos         %[1]s-train\n"+
			"         max_tres_per_job: gres/gpu=16 -> gres/gpu=8\n         preempt: %[1]s-batch -> (none)\n         preempt_mode: cancel -> requeue\n"+
			"  modify account     %[1]s\n         grp_jobs: 20 -> 25\n         priority: 5 -> (none)\n", tenant)
		if code != exitChanges || !strings.HasPrefix(out, wantPlan) || strings.Count(out, "\n") != strings.Count(wantPlan, "\n") {
			t.Fatalf("plan after QOS and account changes: exit %d:\n%s\nwant:\n%s", code, out, wantPlan)
		}
		if code, out = policyOn(t, b, pf.path, "apply", "--apply", "--sacctmgr", mgr); code != exitOK || !strings.Contains(out, "Applied 3 of 3 changes in 2 writes") {
			t.Fatalf("apply: exit %d, want the QOS in one batch:\n%s", code, out)
		}
		if code, out = policyOn(t, b, pf.path, "plan"); code != exitOK {
			t.Fatalf("plan after apply: exit %d:\n%s", code, out)
		}
		if got, want := sacctmgrOn(t, b, "show", "qos", tenant+"-train", "format=name,preempt,preemptmode,maxtresperjob"),
			tenant+"-train||requeue|gres/gpu=8"; got != want {
			t.Errorf("QOS after emptying its preempt list: %s, want %s", got, want)
		}
		if got, want := sacctmgrOn(t, b, "show", "assoc", "where", "account="+tenant, "user=", "format=account,grpjobs,priority"),
			tenant+"|25|"; got != want {
			t.Errorf("tenant association: %s, want %s", got, want)
		}
	})
}

// slurmReasons are the job reasons this Slurm knows: the strings of
// libslurmfull (NUL-terminated), where squeue's reasons come from.
func slurmReason(t *testing.T, b *testbed.Bed, reason string) bool {
	t.Helper()
	libs, _ := filepath.Glob(filepath.Join(b.Root, "usr/lib/*/slurm-wlm/libslurmfull.so"))
	if len(libs) == 0 {
		t.Fatalf("no libslurmfull.so under %s", b.Root)
	}
	data, err := os.ReadFile(libs[0])
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(data, append(append([]byte{0}, reason...), 0))
}

// TestGPULimitPends (a): the project's 8 GPUs sit on its association, so
// alice's 8-GPU job runs and her next 1-GPU job in the same account pends
// with reason AssocGrpGRES (a limit on an association; a tenant QOS would
// say QOSGrpGRES, and there is none).
func TestGPULimitPends(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		const reason = "AssocGrpGRES"
		if !slurmReason(t, b, reason) {
			t.Fatalf("Slurm %s does not know the reason %s", b.Release, reason)
		}
		ctx := testbed.Context(t)
		c := b.Client(t)
		tenant := testbed.Unique("itg")
		var jobs []int64
		cleanupTenant(t, b, c, tenant, &jobs)
		pf := newPolicyFile(t, b, tenant)
		if code, out := policyOn(t, b, pf.path, "apply", "--apply", "--sacctmgr", filepath.Join(b.Bin, "sacctmgr")); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		submit := func(gpus int) int64 {
			t.Helper()
			res, err := c.Submit(ctx, "alice", slurmrest.JobSpec{Name: testbed.Unique("itg"), Script: "#!/bin/bash\nsleep 600\n",
				Account: tenant + "-llm", Partition: b.Partition, TRESPerNode: fmt.Sprintf("gres/gpu:%d", gpus),
				TimeLimit: 10 * time.Minute, WorkDir: b.JobDir, StdOut: "/dev/null"})
			if err != nil {
				t.Fatalf("submit %d GPUs as alice: %v", gpus, err)
			}
			jobs = append(jobs, res.JobID)
			return res.JobID
		}
		big := submit(8)
		testbed.WaitJob(t, c, big, time.Minute, "running", slurmrest.Job.Running)
		small := submit(1)
		j := testbed.WaitJob(t, c, small, time.Minute, "pending for "+reason, func(j slurmrest.Job) bool {
			return j.State.Has("PENDING") && j.StateReason != "" && j.StateReason != "None"
		})
		if j.StateReason != reason || j.Account != tenant+"-llm" {
			t.Errorf("1-GPU job %d: %v with reason %q in account %s, want PENDING with %s in %s-llm", small, j.State, j.StateReason, j.Account, reason, tenant)
		}
		// Still pending a few scheduler passes later: the limit holds.
		time.Sleep(5 * time.Second)
		if j, err := c.Job(ctx, small); err != nil || !j.State.Has("PENDING") || j.StateReason != reason {
			t.Errorf("1-GPU job %d after 5 s: %v %q (%v), want PENDING %s", small, j.State, j.StateReason, err, reason)
		}
		for _, id := range jobs {
			if err := c.Cancel(ctx, id); err != nil {
				t.Errorf("cancel job %d: %v", id, err)
			}
		}
	})
}

// TestCoordinators (c): the tenant's admins become coordinators of its
// account (sacctmgr and REST agree), a removed admin stays until --prune
// and goes with it, and an admin Slurm has no user for is an error that
// says so.
func TestCoordinators(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		tenant := testbed.Unique("itc")
		var jobs []int64
		cleanupTenant(t, b, c, tenant, &jobs)
		pf := newPolicyFile(t, b, tenant)
		coords := func() (string, []string) {
			t.Helper()
			row := sacctmgrOn(t, b, "show", "account", tenant, "withcoord", "format=account,coordinators")
			name, list, _ := strings.Cut(row, "|")
			users := strings.Split(list, ",")
			slices.Sort(users)
			viaMgr := name + "|" + strings.Join(users, ",")
			accts, err := c.AccountsWithCoordinators(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range accts {
				if a.Name == tenant {
					rest := slices.Clone(a.Coordinators)
					slices.Sort(rest)
					return viaMgr, rest
				}
			}
			t.Fatalf("no account %s", tenant)
			return "", nil
		}
		if code, out := policyOn(t, b, pf.path, "apply", "--apply"); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		if mgr, rest := coords(); mgr != tenant+"|alice,bob" || !slices.Equal(rest, []string{"alice", "bob"}) {
			t.Fatalf("coordinators after apply: sacctmgr %q, REST %v; want alice and bob", mgr, rest)
		}
		// Project accounts are coordinated through their tenant: no changes for them.
		if code, out := policyOn(t, b, pf.path, "plan", "--prune"); code != exitOK {
			t.Fatalf("plan --prune after apply: exit %d:\n%s", code, out)
		}

		pf.edit("    admins: [alice]\n", "")
		if code, out := policyOn(t, b, pf.path, "plan"); code != exitOK || strings.Contains(out, "remove") {
			t.Fatalf("plan without --prune removed a coordinator: exit %d:\n%s", code, out)
		}
		code, out := policyOn(t, b, pf.path, "apply", "--apply", "--prune")
		if code != exitOK || !strings.Contains(out, "1 changes:\n  remove coordinator "+tenant+"/alice\n") {
			t.Fatalf("apply --prune: exit %d:\n%s", code, out)
		}
		if mgr, rest := coords(); mgr != tenant+"|bob" || !slices.Equal(rest, []string{"bob"}) {
			t.Fatalf("coordinators after alice left: sacctmgr %q, REST %v; want bob", mgr, rest)
		}
		if code, out := policyOn(t, b, pf.path, "plan", "--prune"); code != exitOK {
			t.Fatalf("plan --prune after apply: exit %d:\n%s", code, out)
		}

		// slurmdbd drops a coordinator it has no user for without an
		// error; apply reads the list back and says what to do.
		nobody := testbed.Unique("itnobody")
		pf.edit("    limits:\n      gpus: 16\n", "    admins: ["+nobody+"]\n    limits:\n      gpus: 16\n")
		code, out = policyOn(t, b, pf.path, "apply", "--apply")
		if code != exitFailure || !strings.Contains(out, "did not keep "+nobody) || !strings.Contains(out, "must be a Slurm user") {
			t.Fatalf("apply with an admin who is no Slurm user: exit %d, want %d and the reason:\n%s", code, exitFailure, out)
		}
		if mgr, _ := coords(); mgr != tenant+"|bob" {
			t.Errorf("coordinators after the failed add: %q, want bob only", mgr)
		}
	})
}

// TestPruneBusy: prune never removes an account with running or pending
// jobs unless told to: the removal is skipped and reported, the account
// stays; with --force-busy the jobs are cancelled and the account goes.
func TestPruneBusy(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		tenant := testbed.Unique("itb")
		var jobs []int64
		cleanupTenant(t, b, c, tenant, &jobs)
		pf := newPolicyFile(t, b, tenant)
		if code, out := policyOn(t, b, pf.path, "apply", "--apply"); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		res, err := c.Submit(ctx, "bob", slurmrest.JobSpec{Name: testbed.Unique("itb"), Script: "#!/bin/bash\nsleep 600\n",
			Account: tenant + "-cv", Partition: b.Partition, TRESPerNode: "gres/gpu:1", TimeLimit: 10 * time.Minute,
			WorkDir: b.JobDir, StdOut: "/dev/null", Hold: true}) // held: pending for as long as the test needs
		if err != nil {
			t.Fatalf("submit as bob: %v", err)
		}
		jobs = append(jobs, res.JobID)
		id := fmt.Sprint(res.JobID)

		pf.edit("      - name: cv\n        shares: 20\n        members:\n          - user: bob\n", "")
		code, out := policyOn(t, b, pf.path, "apply", "--apply", "--prune")
		if code != exitOK || !strings.Contains(out, "skip   account     "+tenant+"-cv\n         busy: jobs "+id+" are running or pending") ||
			!strings.Contains(out, "skip   association "+tenant+"-cv/bob") || !strings.Contains(out, "Skipped 2 removals") ||
			strings.Contains(out, "delete account") {
			t.Fatalf("apply --prune with a pending job in %s-cv: exit %d:\n%s", tenant, code, out)
		}
		if got := sacctmgrOn(t, b, "show", "assoc", "where", "account="+tenant+"-cv", "format=account,user"); got != tenant+"-cv|\n"+tenant+"-cv|bob" {
			t.Fatalf("%s-cv after the skipped prune: %q, want the account and bob's association", tenant, got)
		}
		if j, err := c.Job(ctx, res.JobID); err != nil || !j.State.Has("PENDING") {
			t.Fatalf("job %d after the skipped prune: %v, %v; want it pending still", res.JobID, j.State, err)
		}

		code, out = policyOn(t, b, pf.path, "apply", "--apply", "--prune", "--force-busy")
		if code != exitOK || !strings.Contains(out, "cancel jobs        "+tenant+"-cv/bob\n         jobs: "+id) ||
			!strings.Contains(out, "delete account     "+tenant+"-cv") {
			t.Fatalf("apply --prune --force-busy: exit %d:\n%s", code, out)
		}
		if got := sacctmgrOn(t, b, "show", "assoc", "where", "account="+tenant+"-cv", "format=account,user"); got != "" {
			t.Errorf("%s-cv after --force-busy: %q, want it gone", tenant, got)
		}
		if j, err := c.Job(ctx, res.JobID); err == nil && (j.State.Has("PENDING") || j.State.Has("RUNNING")) {
			t.Errorf("job %d after --force-busy: %v, want it cancelled", res.JobID, j.State)
		}
		if code, out = policyOn(t, b, pf.path, "plan", "--prune"); code != exitOK {
			t.Fatalf("plan --prune at the end: exit %d:\n%s", code, out)
		}
	})
}
