//go:build integration

package templates

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestSubmitFinetune renders the shipped fine-tuning template for alice
// and submits it through slurmrestd as alice, with a token minted from the
// bed's JWT key as the portal mints them: slurmctld accepts it, and the
// job it holds has the template's options and alice's values, the script
// as the template wrote it.
func TestSubmitFinetune(t *testing.T) {
	set, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
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
		spec, err := set.Render("finetune", map[string]string{
			"model": "/shared/models/llama-3-8b", "dataset": "/shared/projects/acme/llm/sft.jsonl", "gpus": "2", "hours": "2",
		}, User{Name: "alice", Account: b.Account, WorkDir: b.JobDir, Environment: []string{"HOME=" + b.JobDir, "USER=alice"}})
		if err != nil {
			t.Fatal(err)
		}
		// Held: the bed has no torchrun, and what is checked is what
		// slurmctld accepted.
		spec.Hold = true
		res, err := asUser.Submit(ctx, "alice", spec)
		if err != nil {
			t.Fatalf("submit the finetune template as alice: %v", err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		j, err := admin.Job(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if j.User != "alice" || j.Account != b.Account || j.Name != "finetune" || !j.Held {
			t.Errorf("job %d: user %s, account %s, name %s, held %v; want alice's held finetune under %s", j.ID, j.User, j.Account, j.Name, j.Held, b.Account)
		}
		if j.TimeLimit != 2*time.Hour || !strings.Contains(j.TRESPerNode, "gpu:2") || j.WorkDir != b.JobDir {
			t.Errorf("job %d: time limit %s, GPUs per node %q, workdir %q; want the 2 hours and 2 GPUs asked for, in %s",
				j.ID, j.TimeLimit, j.TRESPerNode, j.WorkDir, b.JobDir)
		}
		if !strings.Contains(j.Comment, "strata:class=batch") || !strings.Contains(j.Comment, "strata:template=finetune") {
			t.Errorf("job %d: comment %q; want the template's class and name", j.ID, j.Comment)
		}
		if n, _ := j.TRESReq.Get("cpu"); n != 8 {
			t.Errorf("job %d asks for %d CPUs (%s), want the template's 8", j.ID, n, j.TRESReq)
		}
	})
}

// TestSubmitOptions submits a template that sets every option the
// client sends (nodes, GPUs and tasks per node, CPUs, memory, time, an
// array with a throttle, --exclusive, --switches from the class) and reads
// them back from slurmctld.
func TestSubmitOptions(t *testing.T) {
	set, err := Load("testdata/bed")
	if err != nil {
		t.Fatal(err)
	}
	set = set.WithPolicy(&jobpolicy.Policy{APIVersion: jobpolicy.APIVersion, Kind: jobpolicy.Kind, Source: "policy.yaml", Cluster: "bed",
		Classes: map[string]jobpolicy.Class{"train": {Partition: "gpu", WholeNodes: true, Switches: 1}}})
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
		spec, err := set.Render("bed-multi", nil, User{Name: "alice", Account: b.Account, WorkDir: b.JobDir})
		if err != nil {
			t.Fatal(err)
		}
		spec.Hold = true
		res, err := asUser.Submit(ctx, "alice", spec)
		if err != nil {
			t.Fatalf("submit as alice: %v", err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		out, err := exec.Command(b.Scontrol, "show", "job", strconv.FormatInt(res.JobID, 10)).CombinedOutput()
		if err != nil {
			t.Fatalf("scontrol show job: %v\n%s", err, out)
		}
		show := string(out)
		for _, want := range []string{"ArrayTaskId=0-2%1", "NumNodes=2", "NtasksPerN:B:S:C=2:", "CPUs/Task=2", "MinMemoryNode=1G",
			"TimeLimit=00:30:00", "OverSubscribe=NO", "Switches=1", "TresPerNode=gres/gpu:2"} {
			if !strings.Contains(show, want) {
				t.Errorf("the job has no %s:\n%s", want, show)
			}
		}
	})
}

// TestSubmitOCI submits a template with an image under Slurm's OCI
// runtime through slurmrestd as alice, held, and reads its --container
// back from slurmctld: the bundle of the image. (That the bed's slurmd
// cannot run it is in portal-api/README.md.)
func TestSubmitOCI(t *testing.T) {
	set, err := Load("testdata/container")
	if err != nil {
		t.Fatal(err)
	}
	set = set.WithContainers(Containers{Runtime: OCI})
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
		spec, err := set.Render("train-container", nil, User{Name: "alice", Account: b.Account})
		if err != nil {
			t.Fatal(err)
		}
		spec.Hold = true
		res, err := asUser.Submit(ctx, "alice", spec)
		if err != nil {
			t.Fatalf("submit as alice: %v", err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		out, err := exec.Command(b.Scontrol, "show", "job", strconv.FormatInt(res.JobID, 10)).CombinedOutput()
		if err != nil {
			t.Fatalf("scontrol show job: %v\n%s", err, out)
		}
		if want := "Container=" + DefaultBundles + "/registry.example.com/acme/train:2.1"; !strings.Contains(string(out), want) {
			t.Errorf("the job has no %s:\n%s", want, out)
		}
	})
}
