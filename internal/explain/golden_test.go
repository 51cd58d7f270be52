package explain_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// exampleInput is the shipped example policy (etc/strata/policy.yaml) as
// the tenant contract holds it (testdata/example.tenants.json, rendered by
// strata-policy: its tests keep it current) on a cluster of 8 nodes with 8
// h100 each, as apply leaves slurmdbd, at a busy moment:
//
//   - alice runs two 8-GPU train jobs in acme-llm (16, her per-user limit
//     from acme's gpus_per_user) and waits with a third: AssocGrpGRES;
//   - bob runs 16 GPUs in acme-llm and 8 a100 in acme-vision, and has a
//     job waiting for Priority in acme-vision;
//   - erin runs 8 GPUs in globex-rl;
//   - the fair-share tree has acme over its share (LevelFS below 1) and
//     globex under it, 15000 of acme's 50000 GPU-hours and 12000 of
//     acme-llm's 40000 used.
func exampleInput(t *testing.T) explain.Input {
	t.Helper()
	m := loadMap(t, "testdata/example.tenants.json")
	live := explain.Snapshot{Partitions: []slurmrest.Partition{{Name: "gpu", MaxTime: 7 * 24 * time.Hour}}}
	live.Associations = append(live.Associations, slurmrest.Association{Cluster: "gpu", Account: "root"})
	defaults := map[string]string{}
	for _, tn := range m.Tenants {
		live.Associations = append(live.Associations, applied(tn.Account, "root", tn.Limits))
		for _, pr := range tn.Projects {
			live.Associations = append(live.Associations, applied(pr.Account, tn.Account, pr.Limits))
			for _, mb := range pr.Members {
				if mb.Role == tenantmap.RoleViewer {
					continue
				}
				as := slurmrest.Association{Cluster: "gpu", Account: pr.Account, User: mb.User}
				if l := pr.Limits.GPUsPerUser; l != nil {
					as.GrpTRES = tres(fmt.Sprintf("gres/gpu=%d", l.Value))
				}
				live.Associations = append(live.Associations, as)
				if _, seen := defaults[mb.User]; !seen || mb.Default {
					defaults[mb.User] = pr.Account
				}
			}
		}
	}
	for u, acct := range defaults {
		live.Users = append(live.Users, slurmrest.User{Name: u, DefaultAccount: acct})
	}
	for _, c := range m.Classes {
		lq := slurmrest.QOS{Name: c.Name}
		if c.MaxTime != nil {
			lq.MaxWall = c.MaxTime.Value.Std()
		}
		if c.MaxGPUsPerJob != nil {
			lq.MaxTRESPerJob = tres(fmt.Sprintf("gres/gpu=%d", c.MaxGPUsPerJob.Value))
		}
		live.QOS = append(live.QOS, lq)
	}
	for i := 1; i <= 8; i++ {
		n := slurmrest.Node{Name: fmt.Sprintf("gpu%d", i), Partitions: []string{"gpu"}, State: []string{"IDLE"}, GPUs: 8, CPUs: 64}
		if i <= 5 {
			n.State, n.GPUsUsed, n.AllocCPUs = []string{"ALLOCATED"}, 8, 32
		}
		live.Nodes = append(live.Nodes, n)
	}
	job := func(id int64, name, user, acct, qos, state, reason, res string, limit time.Duration, nodes string) slurmrest.Job {
		j := slurmrest.Job{ID: id, Name: name, User: user, Account: acct, QOS: qos, Partition: "gpu", State: slurmrest.JobState{state},
			StateReason: reason, TRESReq: tres(res), TimeLimit: limit, NodeList: nodes}
		if state == "RUNNING" {
			j.TRESAlloc = j.TRESReq
		}
		return j
	}
	live.Jobs = []slurmrest.Job{
		job(101, "llm-pretrain-a", "alice", "acme-llm", "train", "RUNNING", "", "cpu=32,mem=256G,node=1,gres/gpu=8,gres/gpu:h100=8", 24*time.Hour, "gpu1"),
		job(102, "llm-pretrain-b", "alice", "acme-llm", "train", "RUNNING", "", "cpu=32,mem=256G,node=1,gres/gpu=8,gres/gpu:h100=8", 24*time.Hour, "gpu2"),
		job(103, "llm-eval", "bob", "acme-llm", "batch", "RUNNING", "", "cpu=64,mem=512G,node=2,gres/gpu=16,gres/gpu:h100=16", 4*time.Hour, "gpu[3-4]"),
		job(104, "llm-pretrain-c", "alice", "acme-llm", "train", "PENDING", "AssocGrpGRES", "cpu=32,mem=256G,node=1,gres/gpu=8", 24*time.Hour, ""),
		job(105, "vit-sweep", "bob", "acme-vision", "batch", "RUNNING", "", "cpu=16,mem=64G,node=1,gres/gpu=8,gres/gpu:a100=8", 2*time.Hour, "gpu5"),
		job(106, "vit-sweep-2", "bob", "acme-vision", "batch", "PENDING", "Priority", "cpu=16,mem=64G,node=1,gres/gpu=8", 2*time.Hour, ""),
		job(107, "rl-ppo", "erin", "globex-rl", "train", "RUNNING", "", "cpu=32,mem=128G,node=1,gres/gpu=8,gres/gpu:a100=8", 48*time.Hour, "gpu6"),
	}
	h := func(hours float64) map[string]float64 { return map[string]float64{"gres/gpu": hours * 3600} }
	run := func(hours int64) map[string]int64 { return map[string]int64{"gres/gpu": hours * 3600} }
	live.Shares = []slurmrest.Share{
		{Account: "root", Shares: 0, SharesNorm: 1, RawUsage: 97200000, EffectiveUsage: 1},
		{Account: "acme", Parent: "root", Shares: 60, SharesNorm: 0.6, RawUsage: 70000000, EffectiveUsage: 0.72, LevelFS: 0.6 / 0.72,
			TRESUsage: h(15000), TRESRunSecs: run(8*24*2 + 16*4 + 8*2)},
		{Account: "acme-llm", Parent: "acme", Shares: 70, SharesNorm: 0.7, RawUsage: 56000000, EffectiveUsage: 0.8, LevelFS: 0.875,
			TRESUsage: h(12000), TRESRunSecs: run(8*24*2 + 16*4)},
		{Account: "acme-llm", User: "alice", Parent: "acme-llm", Shares: 1, SharesNorm: 0.5, RawUsage: 35000000, EffectiveUsage: 0.625,
			LevelFS: 0.8, FairShareFactor: 0.4, TRESUsage: h(7500)},
		{Account: "acme-llm", User: "bob", Parent: "acme-llm", Shares: 1, SharesNorm: 0.5, RawUsage: 21000000, EffectiveUsage: 0.375,
			LevelFS: 1.333, FairShareFactor: 0.6, TRESUsage: h(4500)},
		{Account: "acme-vision", Parent: "acme", Shares: 30, SharesNorm: 0.3, RawUsage: 14000000, EffectiveUsage: 0.2, LevelFS: 1.5,
			TRESUsage: h(3000), TRESRunSecs: run(8 * 2)},
		{Account: "acme-vision", User: "bob", Parent: "acme-vision", Shares: 1, SharesNorm: 0.5, RawUsage: 14000000, EffectiveUsage: 1,
			LevelFS: 0.5, FairShareFactor: 0.3},
		{Account: "globex", Parent: "root", Shares: 40, SharesNorm: 0.4, RawUsage: 27200000, EffectiveUsage: 0.28, LevelFS: 0.4 / 0.28,
			TRESUsage: h(6000), TRESRunSecs: run(8 * 48)},
	}
	return explain.Input{Tenants: m, Live: live}
}

// applied is an account's association as apply sets it from the policy's
// limits: Slurm's units, memory in MiB and budgets in minutes.
func applied(acct, parent string, l *tenantmap.Limits) slurmrest.Association {
	as := slurmrest.Association{Cluster: "gpu", Account: acct, Parent: parent}
	var grp, mins []string
	add := func(list *[]string, key string, v *tenantmap.Limit, scale int64) {
		if v != nil {
			*list = append(*list, fmt.Sprintf("%s=%d", key, v.Value*scale))
		}
	}
	add(&grp, "gres/gpu", l.GPUs, 1)
	for typ, v := range l.GPUsByType {
		add(&grp, "gres/gpu:"+typ, &v, 1)
	}
	add(&grp, "cpu", l.CPUs, 1)
	add(&grp, "mem", l.MemoryGB, 1024)
	add(&mins, "gres/gpu", l.GPUHours, 60)
	as.GrpTRES, as.GrpTRESMin = tres(strings.Join(grp, ",")), tres(strings.Join(mins, ","))
	if l.RunningJobs != nil {
		as.MaxJobs = i64(l.RunningJobs.Value)
	}
	return as
}

// TestGolden renders the reports of the example at its busy moment: the
// text people read and the JSON the portal reads. Review a change of the
// golden files against the story in exampleInput.
func TestGolden(t *testing.T) {
	in := exampleInput(t)
	for name, make := range map[string]func() (any, error){
		"job-104":          func() (any, error) { return explain.Job(in, 104) },
		"user-bob":         func() (any, error) { return explain.User(in, "bob") },
		"account-acme-llm": func() (any, error) { return explain.Account(in, "acme-llm") },
	} {
		t.Run(name, func(t *testing.T) {
			r, err := make()
			if err != nil {
				t.Fatal(err)
			}
			var txt bytes.Buffer
			if err := explain.Text(&txt, r); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".txt"), txt.Bytes())
			js, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".json"), append(js, '\n'))
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update and review the diff):\n%s", path, got)
	}
}
