package slurmrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/adaptergen"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// replayInfo is what TestCapture saves of the test bed beside its records,
// in replayInfoFile: what the client negotiated there, and the cluster the
// records name.
type replayInfo struct {
	Parser  string `json:"parser"`
	Release string `json:"release"`
	Cluster string `json:"cluster"`
}

const replayInfoFile = slurmresttest.InfoFile

// replayBed is what a release's replay records are expected to show: the
// bed.json TestCapture writes beside them, and whether the job was
// requeued over REST when they were captured.
type replayBed struct {
	replayInfo
	restRequeue bool
}

// replayBeds reads the bed.json of every release under testdata/replay,
// and fails unless every parser the client speaks is replayed by one.
func replayBeds(t *testing.T) map[string]replayBed {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "replay", "slurm-*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no replay records in testdata/replay (%v): run `make capture-slurmrest`", err)
	}
	beds := map[string]replayBed{}
	replayed := map[string]bool{}
	for _, dir := range dirs {
		var b replayBed
		name := filepath.Join(dir, replayInfoFile)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v: run `make capture-slurmrest`", err)
		}
		if err := json.Unmarshal(data, &b.replayInfo); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		i := slices.IndexFunc(adaptergen.Parsers, func(p adaptergen.Parser) bool { return p.Version == b.Parser })
		if i < 0 {
			t.Fatalf("%s: parser %q is not in adaptergen.Parsers", dir, b.Parser)
		}
		_, err = os.Stat(filepath.Join(dir, "requeue.json")) // none where scontrol requeued
		b.restRequeue = err == nil
		if q := adaptergen.Parsers[i].Quirks.Requeue; q != b.restRequeue {
			t.Errorf("%s: quirk Requeue of %s is %t, but the records show a REST requeue: %t", dir, b.Parser, q, b.restRequeue)
		}
		replayed[b.Parser] = true
		beds[strings.TrimPrefix(filepath.Base(dir), "slurm-")] = b
	}
	for _, p := range slurmrest.Parsers {
		if !replayed[p] {
			t.Errorf("no replay records of parser %s: capture them from a test bed whose Slurm offers it (make capture-slurmrest)", p)
		}
	}
	return beds
}

// TestReplay runs the facade against exchanges recorded from the real
// slurmrestd of each supported release (testdata/replay, written by
// TestCapture on fresh test beds: job 1 of alice on gpu1, GPUs 0 and 1, see
// job.json). The replay server also checks that every request body is the
// one slurmrestd accepted.
func TestReplay(t *testing.T) {
	for version, want := range replayBeds(t) {
		t.Run("slurm-"+version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-"+version))
			scontrol, calls := fakeScontrol(t)
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root",
				Tokens: slurmrest.StaticToken("replay-token"), Requeuer: slurmrest.ScontrolRequeuer{Path: scontrol}})
			if err != nil {
				t.Fatal(err)
			}
			if info := c.Info(); info.Parser != want.Parser || info.Release != want.Release {
				t.Errorf("info = %+v, want parser %s release %s", info, want.Parser, want.Release)
			}
			if p, err := c.Ping(ctx); err != nil || !p[0].Responding || !p[0].Primary {
				t.Errorf("ping = %+v, %v", p, err)
			}
			res, err := c.Submit(ctx, "alice", replayJobSpec())
			if err != nil || res.JobID != 1 {
				t.Fatalf("submit = %+v, %v; want job 1", res, err)
			}
			j, err := c.Job(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			wantGPUs := []slurmrest.GPU{{Node: "gpu1", Index: 0, Type: "h100"}, {Node: "gpu1", Index: 1, Type: "h100"}}
			if diff := cmp.Diff(wantGPUs, j.GPUs); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if j.User != "alice" || j.Account != "testbed" || !j.Running() || !j.Requeue || j.TimeLimit != 10*time.Minute ||
				j.TRESAlloc.String() != "billing=1,cpu=1,gres/gpu:h100=2,gres/gpu=2,mem=1000,node=1" ||
				!slices.Equal(j.Nodes, []string{"gpu1"}) || j.StartTime.IsZero() || j.Name != "replay-gpu2" {
				t.Errorf("job = %+v", j)
			}
			if j.TRESReq.String() != "billing=1,cpu=1,gres/gpu=2,mem=1000,node=1" || j.Dependency != "" {
				t.Errorf("job asks for %s (dependency %q), want the 2 GPUs of replayJobSpec and no dependency", j.TRESReq, j.Dependency)
			}
			list, err := c.Jobs(ctx, time.Time{})
			if err != nil || list.Unchanged || len(list.Jobs) != 1 || list.Jobs[0].ID != 1 || list.Updated.IsZero() {
				t.Errorf("jobs = %+v, %v", list, err)
			}
			unchanged, err := c.Jobs(ctx, time.Unix(4102444800, 0))
			if err != nil || !unchanged.Unchanged || len(unchanged.Jobs) != 0 {
				t.Errorf("conditional jobs = %+v, %v: want unchanged", unchanged, err)
			}
			nodes, err := c.Nodes(ctx)
			if err != nil || len(nodes) != 4 {
				t.Fatalf("nodes = %+v, %v", nodes, err)
			}
			for _, n := range nodes {
				used := 0
				if n.Name == "gpu1" {
					used = 2
				}
				if n.GPUs != 8 || n.GPUType != "h100" || n.GPUsUsed != used || n.CPUs != 16 || n.Sockets != 2 || n.Cores != 8 || n.Threads != 1 {
					t.Errorf("node %s = %+v, want 8 h100 GPUs, %d used, 16 CPUs", n.Name, n, used)
				}
			}
			parts, err := c.Partitions(ctx)
			if err != nil || len(parts) != 1 || parts[0].Name != "gpu" || parts[0].Nodes != "gpu[1-4]" || parts[0].MaxTime != 24*time.Hour {
				t.Errorf("partitions = %+v, %v", parts, err)
			}
			shares, err := c.Shares(ctx)
			if err != nil || !slices.ContainsFunc(shares, func(s slurmrest.Share) bool { return s.Account == "testbed" && s.User == "alice" }) {
				t.Errorf("shares = %+v, %v: want alice under testbed", shares, err)
			}
			// Job 1 holds 2 GPUs with 10 minutes to run: 1200 GPU-seconds
			// still to use, counted for alice and up to root.
			for _, s := range shares {
				if (s.Account == "testbed" || s.Account == "root") && (s.User == "" || s.User == "alice") && s.TRESRunSecs["gres/gpu"] != 1200 {
					t.Errorf("share %s/%s: run seconds %v, want gres/gpu=1200", s.Account, s.User, s.TRESRunSecs)
				}
			}
			accts, err := c.Accounts(ctx)
			if err != nil || !slices.ContainsFunc(accts, func(a slurmrest.Account) bool { return a.Name == "testbed" && a.Organization == "testbed" }) {
				t.Errorf("accounts = %+v, %v", accts, err)
			}
			assocs, err := c.Associations(ctx, slurmrest.AssociationFilter{})
			if err != nil || !slices.ContainsFunc(assocs, func(a slurmrest.Association) bool {
				return a.Account == "testbed" && a.User == "alice" && a.Cluster == want.Cluster
			}) {
				t.Errorf("associations = %+v, %v", assocs, err)
			}
			users, err := c.Users(ctx)
			if err != nil || !slices.ContainsFunc(users, func(u slurmrest.User) bool {
				return u.Name == "restd" && u.DefaultAccount == "testbed" && u.AdminLevel == "Administrator"
			}) {
				t.Errorf("users = %+v, %v: want restd, an Administrator with default account testbed", users, err)
			}
			qos, err := c.QOS(ctx)
			if err != nil || !slices.ContainsFunc(qos, func(q slurmrest.QOS) bool { return q.Name == "normal" }) {
				t.Errorf("qos = %+v, %v", qos, err)
			}
			if _, err := c.Job(ctx, 999999); !errors.Is(err, slurmrest.ErrNotFound) {
				t.Errorf("missing job: err = %v, want ErrNotFound", err)
			}
			if err := c.Signal(ctx, 1, "USR1", true); err != nil {
				t.Errorf("signal: %v", err)
			}
			if err := c.Requeue(ctx, 1, slurmrest.RequeueOptions{}); err != nil {
				t.Errorf("requeue: %v", err)
			}
			got, _ := os.ReadFile(calls)
			wantCall := "requeue 1 token=replay-token\n"
			if want.restRequeue {
				wantCall = "" // REST did it; scontrol must not run
			}
			if string(got) != wantCall {
				t.Errorf("scontrol calls = %q, want %q", got, wantCall)
			}
			if err := c.Cancel(ctx, 1); err != nil {
				t.Errorf("cancel: %v", err)
			}
			if err := c.SetQOS(ctx, replayQOSSpec()); err != nil {
				t.Errorf("set QOS: %v", err)
			}
			acct := replayAccountSpec()
			if err := c.CreateAccount(ctx, want.Cluster, acct); err != nil {
				t.Errorf("create account: %v", err)
			}
			if err := c.CreateAccount(ctx, want.Cluster, acct); !errors.Is(err, slurmrest.ErrExists) {
				t.Errorf("create account again: err = %v, want ErrExists", err)
			}
			if err := c.AddUser(ctx, want.Cluster, slurmrest.UserSpec{Name: "bob", Accounts: []string{"replay-tenant"}, Fairshare: 2}); err != nil {
				t.Errorf("add user: %v", err)
			}
			if err := c.SetAssociations(ctx, []slurmrest.Association{{Cluster: want.Cluster, Account: "replay-tenant", Fairshare: 25,
				GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 12}}}}); err != nil {
				t.Errorf("set association: %v", err)
			}
			if err := c.DeleteAssociation(ctx, want.Cluster, "replay-tenant", "bob"); err != nil {
				t.Errorf("delete association: %v", err)
			}
			if err := c.DeleteAccount(ctx, "replay-tenant"); err != nil {
				t.Errorf("delete account: %v", err)
			}
			if err := c.DeleteQOS(ctx, "replay-q"); err != nil {
				t.Errorf("delete QOS: %v", err)
			}
			_, err = slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "nobody", Tokens: slurmrest.StaticToken("not-a-token")})
			var ae *slurmrest.AuthError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), "scontrol token username=nobody") {
				t.Errorf("bad token: err = %v, want an *AuthError that says how to mint a token", err)
			}
		})
	}
}

// fakeScontrol writes a script that records its arguments and token: the
// exec edge of the requeue fallback.
func fakeScontrol(t *testing.T) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	path, calls = filepath.Join(dir, "scontrol"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$* token=$SLURM_JWT\" >>" + calls + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

// The fixed inputs of the capture (capture_test.go), repeated here because
// that file only builds with the integration tag.
func replayJobSpec() slurmrest.JobSpec {
	return slurmrest.JobSpec{
		Name: "replay-gpu2", Script: trapScript, Account: "testbed", Partition: "gpu",
		TRESPerNode: "gres/gpu:2", TimeLimit: 10 * time.Minute, WorkDir: "/var/lib/strata-jobs",
		StdOut: "/var/lib/strata-jobs/replay-%j.out", Requeue: ptr(true),
	}
}

func replayQOSSpec() slurmrest.QOS {
	return slurmrest.QOS{Name: "replay-q", Description: "replay", Priority: ptr(int64(20)),
		GrpTRES:        slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 16}},
		MaxTRESPerUser: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 8}}, MaxWall: time.Hour}
}

func replayAccountSpec() slurmrest.AccountSpec {
	return slurmrest.AccountSpec{Name: "replay-tenant", Description: "replay tenant", Organization: "strata",
		Fairshare: 30, QOS: []string{"normal", "replay-q"}, DefaultQOS: "replay-q",
		GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 8}}}
}
