//go:build integration

package slurmrest_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

func TestParserNegotiation(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		c := b.Client(t)
		info := c.Info()
		want := map[string]string{"26.05": "v0.0.45", "24.11": "v0.0.42"}[b.Version]
		if info.Parser != want {
			t.Errorf("parser = %s, want %s (server offers %v)", info.Parser, want, b.Parsers)
		}
		if !strings.HasPrefix(info.Release, b.Version) {
			t.Errorf("release = %q, want %s.x", info.Release, b.Version)
		}
		// Forcing the older parser on 26.05 must work too: it is what a
		// site upgrading from 24.11 runs until it switches.
		cfg := b.Config()
		cfg.Parser = "v0.0.42"
		old, err := slurmrest.New(testbed.Context(t), cfg)
		if err != nil {
			t.Fatalf("forced v0.0.42: %v", err)
		}
		if _, err := old.Ping(testbed.Context(t)); err != nil {
			t.Errorf("ping on v0.0.42: %v", err)
		}
		pings, err := c.Ping(testbed.Context(t))
		if err != nil || len(pings) == 0 || !pings[0].Responding {
			t.Fatalf("ping = %+v, %v", pings, err)
		}
	})
}

// TestJobLifecycle submits a 2-GPU job as alice, reads its GPUs, signals,
// requeues and cancels it: the path reclaimd takes.
func TestJobLifecycle(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		admin := b.Client(t)
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cfg := b.Config()
		cfg.Tokens = signer
		asUser, err := slurmrest.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		name := testbed.Unique("life")
		out := b.JobDir + "/" + name + ".out"
		res, err := asUser.Submit(ctx, "alice", slurmrest.JobSpec{
			Name: name, Script: trapScript, Account: b.Account, Partition: b.Partition,
			TRESPerNode: "gres/gpu:2", TimeLimit: 10 * time.Minute, WorkDir: b.JobDir, StdOut: out,
			Requeue: ptr(true),
		})
		if err != nil {
			t.Fatalf("submit as alice: %v", err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		j := testbed.WaitJob(t, admin, res.JobID, 60*time.Second, "running", slurmrest.Job.Running)
		if j.User != "alice" {
			t.Errorf("job user = %q, want alice", j.User)
		}
		if len(j.GPUs) != 2 || j.GPUs[0].Node != j.Nodes[0] || j.GPUs[0].Type != b.GPUType {
			t.Fatalf("GPUs = %v on nodes %v, want 2 %s GPUs on the job's node", j.GPUs, j.Nodes, b.GPUType)
		}
		if n, _ := j.TRESAlloc.Get("gres/gpu"); n != 2 {
			t.Errorf("tres_alloc gres/gpu = %d, want 2 (%s)", n, j.TRESAlloc)
		}
		// What the job itself saw must be the indices Slurm reports.
		want := fmt.Sprintf("gpus=%d,%d", j.GPUs[0].Index, j.GPUs[1].Index)
		b.WaitFile(t, out, "start restart=0 "+want, 30*time.Second)

		if err := admin.Signal(ctx, res.JobID, "USR1", true); err != nil {
			t.Fatalf("signal: %v", err)
		}
		b.WaitFile(t, out, "got USR1 restart=0", 30*time.Second)

		if err := admin.Requeue(ctx, res.JobID, slurmrest.RequeueOptions{Reason: "integration test"}); err != nil {
			t.Fatalf("requeue (parser %s): %v", admin.Info().Parser, err)
		}
		j = testbed.WaitJob(t, admin, res.JobID, 90*time.Second, "running again after requeue",
			func(j slurmrest.Job) bool { return j.Running() && j.RestartCount == 1 })
		b.WaitFile(t, out, "start restart=1", 30*time.Second)

		if err := admin.Cancel(ctx, res.JobID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		testbed.WaitJob(t, admin, res.JobID, 30*time.Second, "cancelled",
			func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
	})
}

// TestRequeueNoRequeueJob: a job submitted --no-requeue is made requeueable
// first, then requeued.
func TestRequeueNoRequeueJob(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		res, err := c.Submit(ctx, "bob", slurmrest.JobSpec{
			Name: testbed.Unique("noreq"), Script: trapScript, Account: b.Account, Partition: b.Partition,
			TRESPerNode: "gres/gpu:1", WorkDir: b.JobDir, StdOut: "/dev/null", Requeue: ptr(false),
		})
		if err != nil {
			t.Fatalf("submit as bob: %v", err)
		}
		t.Cleanup(func() { _ = c.Cancel(testbed.Context(t), res.JobID) })
		j := testbed.WaitJob(t, c, res.JobID, 60*time.Second, "running", slurmrest.Job.Running)
		if j.Requeue || j.User != "bob" {
			t.Fatalf("job requeue=%v user=%q, want false and bob", j.Requeue, j.User)
		}
		if err := c.Requeue(ctx, res.JobID, slurmrest.RequeueOptions{Hold: true}); err != nil {
			t.Fatalf("requeue a --no-requeue job: %v", err)
		}
		j = testbed.WaitJob(t, c, res.JobID, 30*time.Second, "requeued and held",
			func(j slurmrest.Job) bool { return j.RestartCount == 1 && j.State.Has("PENDING") })
		if !j.Requeue {
			t.Errorf("job is not requeueable after Requeue")
		}
	})
}

func TestConditionalJobs(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		all, err := c.Jobs(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if all.Unchanged || all.Updated.IsZero() {
			t.Fatalf("unconditional list = %+v: want a full answer with an update time", all)
		}
		// Nothing changes on the cluster one second into the future.
		again, err := c.Jobs(ctx, time.Now().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Unchanged || len(again.Jobs) != 0 {
			t.Errorf("conditional list = unchanged %v with %d jobs; want unchanged and empty", again.Unchanged, len(again.Jobs))
		}
	})
}

func TestNodesPartitionsShares(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		nodes, err := c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range nodes {
			names = append(names, n.Name)
			if n.GPUs != b.GPUsPerNode || n.GPUType != b.GPUType {
				t.Errorf("node %s: %d %s GPUs, want %d %s (gres %q)", n.Name, n.GPUs, n.GPUType, b.GPUsPerNode, b.GPUType, n.GRES)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, b.Nodes) {
			t.Errorf("nodes = %v, want %v", names, b.Nodes)
		}
		parts, err := c.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 1 || parts[0].Name != b.Partition || parts[0].TotalNodes != len(b.Nodes) || parts[0].MaxTime != 24*time.Hour {
			t.Errorf("partitions = %+v, want %s with %d nodes and MaxTime 1 day", parts, b.Partition, len(b.Nodes))
		}
		shares, err := c.Shares(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range shares {
			if s.Account == b.Account && s.User == "alice" {
				found = true
			}
		}
		if !found {
			t.Errorf("shares have no row for alice under %s: %+v", b.Account, shares)
		}
	})
}

// TestAccountingWrites creates and removes an account tree, a user
// association and a QOS, checking each through a fresh read.
func TestAccountingWrites(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		q := testbed.Unique("q")
		tenant, project := testbed.Unique("t"), testbed.Unique("p")
		prio := int64(42)
		gpus := slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 16}}
		if err := c.SetQOS(ctx, slurmrest.QOS{Name: q, Description: "strata test", Priority: &prio, GrpTRES: gpus,
			MaxTRESPerUser: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 8}}, MaxWall: 2 * time.Hour}); err != nil {
			t.Fatalf("create QOS: %v", err)
		}
		t.Cleanup(func() { _ = c.DeleteQOS(testbed.Context(t), q) })
		got := findQOS(t, c, q)
		if got == nil || deref(got.Priority) != 42 || got.GrpTRES.String() != "gres/gpu=16" ||
			got.MaxTRESPerUser.String() != "gres/gpu=8" || got.MaxWall != 2*time.Hour {
			t.Fatalf("QOS after create = %+v", got)
		}
		if err := c.CreateAccount(ctx, b.Cluster, slurmrest.AccountSpec{Name: tenant, Description: "tenant", Organization: "strata",
			Fairshare: 30, QOS: []string{"normal", q}, DefaultQOS: q}); err != nil {
			t.Fatalf("create tenant: %v", err)
		}
		t.Cleanup(func() { _ = c.DeleteAccount(testbed.Context(t), tenant) })
		if err := c.CreateAccount(ctx, b.Cluster, slurmrest.AccountSpec{Name: project, Parent: tenant, Description: "project",
			Organization: "strata", Fairshare: 10, GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 4}}}); err != nil {
			t.Fatalf("create project: %v", err)
		}
		t.Cleanup(func() { _ = c.DeleteAccount(testbed.Context(t), project) })
		if err := c.CreateAccount(ctx, b.Cluster, slurmrest.AccountSpec{Name: project, Parent: tenant}); !errors.Is(err, slurmrest.ErrExists) {
			t.Errorf("creating %s again: err = %v, want ErrExists", project, err)
		}
		if err := c.AddUser(ctx, b.Cluster, slurmrest.UserSpec{Name: "bob", Accounts: []string{project}, Fairshare: 2}); err != nil {
			t.Fatalf("add bob under %s: %v", project, err)
		}
		assocs, err := c.Associations(ctx, slurmrest.AssociationFilter{Account: project})
		if err != nil {
			t.Fatal(err)
		}
		var acct, user *slurmrest.Association
		for i := range assocs {
			switch assocs[i].User {
			case "":
				acct = &assocs[i]
			case "bob":
				user = &assocs[i]
			}
		}
		if acct == nil || acct.Parent != tenant || acct.Fairshare != 10 || acct.GrpTRES.String() != "gres/gpu=4" {
			t.Fatalf("project association = %+v", acct)
		}
		if user == nil || user.Fairshare != 2 {
			t.Fatalf("bob's association = %+v", user)
		}
		// Modify: new share and GPU limit.
		if err := c.SetAssociations(ctx, []slurmrest.Association{{Cluster: b.Cluster, Account: project, Fairshare: 25,
			GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 8}}}}); err != nil {
			t.Fatalf("modify association: %v", err)
		}
		assocs, _ = c.Associations(ctx, slurmrest.AssociationFilter{Account: project, User: ""})
		for _, a := range assocs {
			if a.User == "" && (a.Fairshare != 25 || a.GrpTRES.String() != "gres/gpu=8") {
				t.Errorf("after modify: %+v", a)
			}
		}
		if err := c.DeleteAssociation(ctx, b.Cluster, project, "bob"); err != nil {
			t.Fatalf("delete bob's association: %v", err)
		}
		assocs, _ = c.Associations(ctx, slurmrest.AssociationFilter{Account: project, User: "bob"})
		for _, a := range assocs {
			if a.User == "bob" {
				t.Errorf("bob's association survived its deletion: %+v", a)
			}
		}
		if err := c.DeleteAccount(ctx, project); err != nil {
			t.Fatalf("delete project: %v", err)
		}
		if err := c.DeleteAccount(ctx, tenant); err != nil {
			t.Fatalf("delete tenant: %v", err)
		}
		accts, _ := c.Accounts(ctx)
		for _, a := range accts {
			if a.Name == tenant || a.Name == project {
				t.Errorf("account %s survived its deletion", a.Name)
			}
		}
		if err := c.DeleteQOS(ctx, q); err != nil {
			t.Fatalf("delete QOS: %v", err)
		}
		if findQOS(t, c, q) != nil {
			t.Errorf("QOS %s survived its deletion", q)
		}
	})
}

func TestExpiredToken(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		key := mustRead(t, b.JWTKey)
		expired, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix(), "sun": "root",
		}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		cfg := b.Config()
		for name, tok := range map[string]string{"expired": expired, "garbage": "not-a-token"} {
			cfg.Tokens = slurmrest.StaticToken(tok)
			_, err := slurmrest.New(ctx, cfg)
			var ae *slurmrest.AuthError
			if !errors.As(err, &ae) {
				t.Errorf("%s token: err = %v (%T), want *AuthError", name, err, err)
				continue
			}
			if !strings.Contains(err.Error(), "scontrol token") {
				t.Errorf("%s token: error does not say how to fix the token: %v", name, err)
			}
		}
		// A client whose token goes bad later reports the same error on a
		// data call.
		tokFile := t.TempDir() + "/token"
		if err := os.WriteFile(tokFile, mustRead(t, b.TokenFile), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg = b.Config()
		cfg.Tokens = &slurmrest.FileToken{Path: tokFile}
		c, err := slurmrest.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a new mtime for the rotated file
		if err := os.WriteFile(tokFile, []byte(expired+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = c.Jobs(ctx, time.Time{})
		var ae *slurmrest.AuthError
		if !errors.As(err, &ae) {
			t.Errorf("jobs with a rotated, expired token: err = %v, want *AuthError", err)
		}
		if _, err := c.Ping(ctx); !errors.As(err, &ae) {
			t.Errorf("ping with an expired token: err = %v, want *AuthError", err)
		}
	})
}

func findQOS(t *testing.T, c *slurmrest.Client, name string) *slurmrest.QOS {
	t.Helper()
	all, err := c.QOS(testbed.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i]
		}
	}
	return nil
}
