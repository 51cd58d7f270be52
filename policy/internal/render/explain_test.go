package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// explainFixtures are the tenant maps internal/explain's tests explain
// from: each policy rendered under the name its sources give (the tests
// cannot read a policy themselves). -update rewrites them.
var explainFixtures = []struct{ policy, as, out string }{
	{"../../../etc/strata/policy.yaml", "/etc/strata/policy.yaml", "../../../internal/explain/testdata/example.tenants.json"},
	{"../../../internal/explain/testdata/small.policy.yaml", "policy.yaml", "../../../internal/explain/testdata/small.tenants.json"},
}

func parseAs(t testing.TB, path, as string) *spec.Policy {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse(as, data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExplainFixtures: internal/explain's tenant maps are what render
// writes for their policies now.
func TestExplainFixtures(t *testing.T) {
	for _, f := range explainFixtures {
		t.Run(filepath.Base(f.out), func(t *testing.T) {
			got, err := TenantsJSON(parseAs(t, f.policy, f.as))
			if err != nil {
				t.Fatal(err)
			}
			if updating() {
				if err := os.WriteFile(f.out, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(f.out)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what render writes for %s (run go test -update and review the diff)", f.out, f.policy)
			}
		})
	}
}

// TestExplainFromFile: the portal's way, tenants.json written by render
// and read back with tenantmap.Load, explains every job, user and account
// exactly as strata-policy explain does from the policy in memory: the
// same reports, the same JSON, the same text.
func TestExplainFromFile(t *testing.T) {
	p := parseAs(t, "../../../etc/strata/policy.yaml", "/etc/strata/policy.yaml")
	data, err := TenantsJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := tenantmap.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	live := appliedSnapshot(t, p)
	mem, file := explain.Input{Tenants: Tenants(p), Live: live}, explain.Input{Tenants: read, Live: live}
	reports := map[string]func(explain.Input) (any, error){}
	for _, j := range live.Jobs {
		reports[fmt.Sprint("job ", j.ID)] = func(in explain.Input) (any, error) { return explain.Job(in, j.ID) }
	}
	for _, tn := range read.Tenants {
		reports["account "+tn.Account] = func(in explain.Input) (any, error) { return explain.Account(in, tn.Account) }
		for _, pr := range tn.Projects {
			reports["account "+pr.Account] = func(in explain.Input) (any, error) { return explain.Account(in, pr.Account) }
			for _, mb := range pr.Members {
				reports["user "+mb.User] = func(in explain.Input) (any, error) { return explain.User(in, mb.User) }
			}
		}
	}
	sources := 0
	for name, report := range reports {
		t.Run(name, func(t *testing.T) {
			want, err := report(mem)
			if err != nil {
				t.Fatal(err)
			}
			got, err := report(file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("from tenants.json (-in memory +file):\n%s", diff)
			}
			var wt, gt bytes.Buffer
			if err := explain.Text(&wt, want); err != nil {
				t.Fatal(err)
			}
			if err := explain.Text(&gt, got); err != nil {
				t.Fatal(err)
			}
			if wt.String() != gt.String() {
				t.Errorf("text from tenants.json:\n%s\nin memory:\n%s", gt.String(), wt.String())
			}
			js, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			sources += bytes.Count(js, []byte(`"file":"/etc/strata/policy.yaml","line":`))
		})
	}
	if sources < 100 {
		t.Errorf("%d policy lines in all the reports: the comparison saw too few sources to mean much", sources)
	}
	// Every pending job is explained with the limit and the policy line
	// that hold it, where one does.
	for id, want := range map[int64]string{
		201: "tenants[0].limits.gpus_per_user", 202: "classes[2].max_gpus_per_job", 203: "classes[1].max_time",
		204: "tenants[1].limits.gpu_hours",
	} {
		r, err := explain.Job(file, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Why == nil || r.Why.Limit == nil || r.Why.Limit.Limit.Source == nil || r.Why.Limit.Limit.Source.Path != want {
			t.Errorf("job %d: why %+v, want the limit at %s", id, r.Why, want)
		}
	}
}

// appliedSnapshot is Slurm as apply leaves it for p, with running jobs and
// pending ones held by a per-user limit, a class's GPUs per job, a class's
// time limit and a GPU-hour budget.
func appliedSnapshot(t testing.TB, p *spec.Policy) explain.Snapshot {
	t.Helper()
	st, err := compile.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	tres := func(s string) slurmrest.TRESList {
		l, err := slurmrest.ParseTRES(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	live := explain.Snapshot{Associations: []slurmrest.Association{{Cluster: st.Cluster, Account: "root"}}}
	for _, a := range st.Accounts {
		as := slurmrest.Association{Cluster: st.Cluster, Account: a.Name, Parent: a.Parent}
		for k, v := range a.GrpTRES {
			as.GrpTRES = append(as.GrpTRES, tres(fmt.Sprintf("%s=%d", k, v))...)
		}
		for k, v := range a.GrpTRESMins {
			as.GrpTRESMin = append(as.GrpTRESMin, tres(fmt.Sprintf("%s=%d", k, v))...)
		}
		if a.GrpJobs > 0 {
			as.MaxJobs = &a.GrpJobs
		}
		live.Associations = append(live.Associations, as)
	}
	for _, u := range st.Users {
		live.Users = append(live.Users, slurmrest.User{Name: u.Name, DefaultAccount: u.DefaultAccount})
		for acct, gpus := range u.Accounts {
			as := slurmrest.Association{Cluster: st.Cluster, Account: acct, User: u.Name}
			if gpus > 0 {
				as.GrpTRES = tres(fmt.Sprintf("gres/gpu=%d", gpus))
			}
			live.Associations = append(live.Associations, as)
		}
	}
	for _, q := range st.QOS {
		lq := slurmrest.QOS{Name: q.Name, MaxWall: q.MaxWall}
		for k, v := range q.MaxTRESPerJob {
			lq.MaxTRESPerJob = append(lq.MaxTRESPerJob, tres(fmt.Sprintf("%s=%d", k, v))...)
		}
		live.QOS = append(live.QOS, lq)
	}
	job := func(id int64, user, acct, qos, state, reason, res string, limit time.Duration) slurmrest.Job {
		j := slurmrest.Job{ID: id, Name: fmt.Sprint("job-", id), User: user, Account: acct, QOS: qos, Partition: "gpu",
			State: slurmrest.JobState{state}, StateReason: reason, TRESReq: tres(res), TimeLimit: limit}
		if state == "RUNNING" {
			j.TRESAlloc = j.TRESReq
		}
		return j
	}
	live.Jobs = []slurmrest.Job{
		job(101, "alice", "acme-llm", "train", "RUNNING", "", "cpu=32,mem=256G,node=1,gres/gpu=8,gres/gpu:h100=8", 24*time.Hour),
		job(102, "alice", "acme-llm", "train", "RUNNING", "", "cpu=32,mem=256G,node=1,gres/gpu=8,gres/gpu:h100=8", 24*time.Hour),
		job(103, "bob", "acme-vision", "batch", "RUNNING", "", "cpu=16,mem=64G,node=1,gres/gpu=8,gres/gpu:a100=8", 2*time.Hour),
		job(201, "alice", "acme-llm", "train", "PENDING", "AssocGrpGRES", "cpu=32,mem=256G,node=1,gres/gpu=8", 24*time.Hour),
		job(202, "bob", "acme-llm", "interactive", "PENDING", "QOSMaxGRESPerJob", "cpu=8,node=1,gres/gpu=4", time.Hour),
		job(203, "bob", "acme-vision", "batch", "PENDING", "QOSMaxWallDurationPerJobLimit", "cpu=8,node=1,gres/gpu=1", 72*time.Hour),
		job(204, "erin", "globex-rl", "train", "PENDING", "AssocGrpGRESMinutes", "cpu=8,node=1,gres/gpu=8", 24*time.Hour),
	}
	live.Shares = []slurmrest.Share{
		{Account: "root", SharesNorm: 1, EffectiveUsage: 1},
		{Account: "globex", Parent: "root", Shares: 40, TRESUsage: map[string]float64{"gres/gpu": 1e12}},
	}
	return live
}
