package compile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestExampleGolden compiles the shipped example policy. The golden file
// is reviewed: every account, limit and default in it can be traced to a
// line of etc/strata/policy.yaml (the Line fields say which).
func TestExampleGolden(t *testing.T) {
	p, err := spec.Load("../../../etc/strata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := compile.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const golden = "testdata/example.state.json"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("compiled state differs from %s (run with -update and review):\n%s", golden, got)
	}
	// Facts that hold whatever the example says: projects hang under their
	// tenant, every member has a default account among their projects.
	parent := map[string]string{}
	for _, a := range st.Accounts {
		parent[a.Name] = a.Parent
	}
	for _, t2 := range p.Tenants {
		if parent[t2.Name] != "root" {
			t.Errorf("tenant %s under %q, want root", t2.Name, parent[t2.Name])
		}
		for _, pr := range t2.Projects {
			if got := parent[p.Account(t2.Name, pr.Name)]; got != t2.Name {
				t.Errorf("project %s under %q, want %s", pr.Name, got, t2.Name)
			}
		}
	}
	for _, u := range st.Users {
		if _, ok := u.Accounts[u.DefaultAccount]; !ok {
			t.Errorf("user %s: default account %q is not one of theirs %v", u.Name, u.DefaultAccount, u.Accounts)
		}
	}
}

func TestCompileRules(t *testing.T) {
	p, err := spec.Parse("inline.yaml", []byte(`apiVersion: strata/v1
kind: Policy
cluster:
  name: c1
  gpu_types: [h100]
classes:
  - name: train
    partition: gpu
    max_time: 48h
    priority: 100
    max_gpus_per_job: 64
  - name: batch
    partition: gpu
    max_time: 24h
tenants:
  - name: acme
    shares: 60
    priority: 5
    admins: [dave, alice]
    limits: {gpus: 64, gpus_by_type: {h100: 32}, cpus: 512, memory_gb: 4096, gpu_hours: 10000, gpus_per_user: 16, running_jobs: 40}
    projects:
      - name: llm
        classes: [train]
        limits: {gpus: 48, running_jobs: 10}
        members:
          - user: alice
            role: tenant-admin
          - user: bob
            default: true
          - user: carol
            role: viewer
      - name: vision
        members:
          - user: bob
            role: tenant-admin
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := compile.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]compile.Account{}
	for _, a := range st.Accounts {
		byName[a.Name] = a
	}
	acme, llm := byName["acme"], byName["acme-llm"]
	if acme.GrpTRES.String() != "cpu=512,gres/gpu:h100=32,gres/gpu=64,mem=4194304" || acme.GrpTRESMins.String() != "gres/gpu=600000" || acme.Fairshare != 60 {
		t.Errorf("acme = %+v", acme)
	}
	if llm.Parent != "acme" || llm.GrpTRES.String() != "gres/gpu=48" || llm.DefaultQOS != "train" || len(llm.QOS) != 1 {
		t.Errorf("acme-llm = %+v: want parent acme, 48 GPUs, only the train QOS", llm)
	}
	// The tenant's priority and running-job limit sit on its association;
	// its coordinators are its admins and its projects' tenant-admins, once
	// each and sorted; a project has its own running-job limit and no
	// priority or coordinators of its own.
	if acme.Priority != 5 || acme.GrpJobs != 40 || strings.Join(acme.Coordinators, ",") != "alice,bob,dave" {
		t.Errorf("acme: priority %d, grp_jobs %d, coordinators %v: want 5, 40, alice,bob,dave", acme.Priority, acme.GrpJobs, acme.Coordinators)
	}
	if llm.Priority != 0 || llm.GrpJobs != 10 || llm.Coordinators != nil {
		t.Errorf("acme-llm: priority %d, grp_jobs %d, coordinators %v: want 0, 10, none", llm.Priority, llm.GrpJobs, llm.Coordinators)
	}
	users := map[string]compile.User{}
	for _, u := range st.Users {
		users[u.Name] = u
	}
	if _, ok := users["carol"]; ok {
		t.Errorf("a viewer got a Slurm association")
	}
	if users["bob"].DefaultAccount != "acme-llm" || users["alice"].DefaultAccount != "acme-llm" || users["bob"].Accounts["acme-vision"] != 16 {
		t.Errorf("users = %+v: want bob's explicit default, alice's only project, per-user limit 16 from the tenant", users)
	}
	if q := st.QOS[1]; q.Name != "train" || q.Priority != 100 || q.MaxWall.Hours() != 48 || q.MaxTRESPerJob.String() != "gres/gpu=64" {
		t.Errorf("train QOS = %+v", q)
	}
}
