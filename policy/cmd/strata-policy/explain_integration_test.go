//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

const explainPolicy = `apiVersion: strata/v1
kind: Policy
cluster:
  name: %[1]s
  gpu_types: [h100]
classes:
  - name: %[2]s-batch
    partition: gpu
    max_time: 1h
tenants:
  - name: %[2]s
    limits:
      gpus: 16
    projects:
      - name: llm
        limits:
          gpus: 8
        members:
          - user: alice
          - user: bob
`

// lineOf is the 1-based line of text that is exactly want.
func lineOf(t *testing.T, text, want string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if l == want {
			return i + 1
		}
	}
	t.Fatalf("no line %q in the policy", want)
	return 0
}

// TestExplain: alice fills her project's 8 GPUs with one job and a second
// job pends on the project's limit. explain job says so with the numbers
// (8 of 8 used, 4 asked) and the policy line of the limit; explain user
// and explain account show the limits with their lines; an unknown user
// is exit 1.
func TestExplain(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		tenant := testbed.Unique("ex")
		project := tenant + "-llm"
		text := fmt.Sprintf(explainPolicy, b.Cluster, tenant)
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		projectLine, tenantLine := lineOf(t, text, "          gpus: 8"), lineOf(t, text, "      gpus: 16")
		t.Cleanup(func() {
			ctx := testbed.Context(t)
			for _, u := range b.Users { // give the test users back their default account first
				_ = c.SetDefaultAccount(ctx, u, b.Account)
			}
			for _, a := range []string{project, tenant} {
				if err := c.DeleteAccount(ctx, a); err != nil {
					t.Errorf("remove account %s: %v", a, err)
				}
			}
			_ = c.DeleteQOS(ctx, tenant+"-batch")
		})
		if code, out := policyOn(t, b, file, "apply", "--apply"); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		// Right after the apply slurmctld may not have computed alice's
		// fair-share factor in the new project yet (PriorityCalcPeriod):
		// explain says so, and never reports 0 for a user with shares and
		// no usage.
		code, out := policyOn(t, b, file, "explain", "user", "alice", "--json")
		var ur explain.UserReport
		if err := json.Unmarshal([]byte(strings.TrimSuffix(out, "<nil>")), &ur); code != exitOK || err != nil {
			t.Fatalf("explain user --json after the apply: exit %d, %v:\n%s", code, err, out)
		}
		for _, m := range ur.Accounts {
			for _, s := range m.FairShare {
				if s.User != "alice" || s.Account != project {
					continue
				}
				switch {
				case s.FactorNotComputed:
					t.Logf("alice's factor in %s right after the apply: not computed yet", project)
				case s.FairShareFactor == nil || *s.FairShareFactor <= 0:
					t.Errorf("alice's factor in %s right after the apply: %v, want a computed factor above 0 or 'not computed yet'", project, s.FairShareFactor)
				default:
					t.Logf("alice's factor in %s right after the apply: %.3f", project, *s.FairShareFactor)
				}
			}
		}

		var jobs []int64
		t.Cleanup(func() { cancelAndWait(t, c, jobs) })
		submit := func(name string, gpus int) int64 {
			spec := slurmrest.JobSpec{Name: name, Script: "#!/bin/sh\nsleep 300\n", Account: project, QOS: tenant + "-batch",
				Partition: b.Partition, TRESPerNode: fmt.Sprintf("gres/gpu:%d", gpus), TimeLimit: 10 * time.Minute,
				WorkDir: b.JobDir, StdOut: "/dev/null"}
			var err error
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
				// slurmctld learns of new associations from slurmdbd a moment after apply.
				var res slurmrest.SubmitResult
				if res, err = c.Submit(ctx, "alice", spec); err == nil {
					jobs = append(jobs, res.JobID)
					return res.JobID
				}
			}
			t.Fatalf("submit %s as alice to %s: %v", name, project, err)
			return 0
		}
		fill := submit("fill", 8)
		testbed.WaitJob(t, c, fill, time.Minute, "running", slurmrest.Job.Running)
		wait := submit("wait", 4)
		testbed.WaitJob(t, c, wait, time.Minute, "pending on AssocGrpGRES", func(j slurmrest.Job) bool {
			return j.State.Has("PENDING") && j.StateReason == "AssocGrpGRES"
		})

		code, out = policyOn(t, b, file, "explain", "job", fmt.Sprint(wait))
		t.Logf("explain job %d:\n%s", wait, out)
		want := fmt.Sprintf("project %s uses 8 of its 8 GPUs; this job asks for 4", project)
		if code != exitOK || !strings.Contains(out, "Why it waits: AssocGrpGRES") || !strings.Contains(out, want) ||
			!strings.Contains(out, fmt.Sprintf("policy 8 at %s:%d", file, projectLine)) {
			t.Errorf("explain job %d: exit %d, want the reason, %q and the policy line %d:\n%s", wait, code, want, projectLine, out)
		}
		code, out = policyOn(t, b, file, "explain", "job", fmt.Sprint(wait), "--json")
		var jr explain.JobReport
		if err := json.Unmarshal([]byte(strings.TrimSuffix(out, "<nil>")), &jr); code != exitOK || err != nil {
			t.Fatalf("explain job --json: exit %d, %v:\n%s", code, err, out)
		}
		if w := jr.Why; w == nil || w.Limit == nil || w.Limit.Level != "project "+project || *w.Limit.Limit.Used != 8 ||
			*w.Limit.Limit.Live != 8 || w.Limit.Ask != 4 || w.Limit.Limit.Source == nil || w.Limit.Limit.Source.Line != projectLine {
			t.Errorf("explain job --json: why = %+v", jr.Why)
		}

		// The limits with Slurm's value, the running job's use and the line.
		row := func(name string, policy, live, used, line int) *regexp.Regexp {
			return regexp.MustCompile(fmt.Sprintf(`%s\s+%d\s+%d\s+%d\s+GPUs\s+%s:%d`, name, policy, live, used, regexp.QuoteMeta(file), line))
		}
		code, out = policyOn(t, b, file, "explain", "user", "alice")
		t.Logf("explain user alice:\n%s", out)
		if code != exitOK || !strings.Contains(out, "Account "+project+" (project llm of tenant "+tenant+"), member, default") ||
			!row("project "+project+`\s+gpus`, 8, 8, 8, projectLine).MatchString(out) ||
			!row("tenant "+tenant+`\s+gpus`, 16, 16, 8, tenantLine).MatchString(out) ||
			!regexp.MustCompile(fmt.Sprintf(`\b%d\s+wait\b`, wait)).MatchString(out) {
			t.Errorf("explain user alice: exit %d, want %s and %s with their limits and lines, and job %d:\n%s", code, project, tenant, wait, out)
		}
		code, out = policyOn(t, b, file, "explain", "account", project)
		if code != exitOK || !row(`\n  gpus`, 8, 8, 8, projectLine).MatchString(out) ||
			!strings.Contains(out, "8 GPUs (h100: 8)") || !strings.Contains(out, "1 running job, 1 pending") {
			t.Errorf("explain account %s: exit %d:\n%s", project, code, out)
		}

		nobody := testbed.Unique("nobody")
		code, out = policyOn(t, b, file, "explain", "user", nobody)
		if code != exitFailure || !strings.Contains(out, "no user "+nobody+" in the policy or in Slurm") {
			t.Errorf("explain of an unknown user: exit %d, want %d and a clear error:\n%s", code, exitFailure, out)
		}
	})
}

// cancelAndWait cancels jobs and waits until slurmctld is done with them:
// slurmdbd refuses to remove an account with active jobs.
func cancelAndWait(t *testing.T, c *slurmrest.Client, ids []int64) {
	ctx := testbed.Context(t)
	for _, id := range ids {
		_ = c.Cancel(ctx, id)
	}
	for _, id := range ids {
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			j, err := c.Job(ctx, id)
			if err != nil || !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING") {
				break
			}
		}
	}
}
