package explain_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
)

// smallInput is the hand-built snapshots' policy, testdata/small.policy.yaml,
// as the tenant contract holds it (testdata/small.tenants.json, rendered by
// strata-policy: its tests keep it current). Line numbers matter: expected
// sources name them (line 1 is "apiVersion").
func smallInput(t *testing.T) explain.Input {
	t.Helper()
	return explain.Input{Tenants: loadMap(t, "testdata/small.tenants.json"), Live: smallLive()}
}

func loadMap(t testing.TB, path string) *tenantmap.Map {
	t.Helper()
	m, err := tenantmap.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tres(s string) slurmrest.TRESList {
	l, err := slurmrest.ParseTRES(s)
	if err != nil {
		panic(err)
	}
	return l
}

func i64(n int64) *int64 { return &n }

// smallLive is Slurm as apply leaves it for the small policy (limits in Slurm's
// units: memory in MiB, budgets in minutes), plus alice's association
// under testbed, an account the policy does not have.
func smallLive() explain.Snapshot {
	a := func(acct, user, parent, grp, mins string, jobs *int64) slurmrest.Association {
		return slurmrest.Association{Cluster: "gpu", Account: acct, User: user, Parent: parent, GrpTRES: tres(grp), GrpTRESMin: tres(mins), MaxJobs: jobs}
	}
	return explain.Snapshot{
		Associations: []slurmrest.Association{
			a("root", "", "", "", "", nil),
			a("acme", "", "root", "cpu=256,mem=1048576,gres/gpu=64", "gres/gpu=60000", nil),
			a("acme-llm", "", "acme", "gres/gpu=48", "", i64(10)),
			a("acme-cv", "", "acme", "", "", nil),
			a("acme-llm", "alice", "", "gres/gpu=16", "", nil),
			a("acme-llm", "bob", "", "gres/gpu=16", "", nil),
			a("acme-cv", "bob", "", "", "", nil),
			a("acme-cv", "carol", "", "", "", nil),
			a("testbed", "", "root", "", "", nil),
			a("testbed", "alice", "", "", "", nil),
		},
		Users: []slurmrest.User{{Name: "alice", DefaultAccount: "acme-llm"}, {Name: "bob", DefaultAccount: "acme-llm"},
			{Name: "carol", DefaultAccount: "acme-cv"}},
		QOS:        []slurmrest.QOS{{Name: "train", MaxTRESPerJob: tres("gres/gpu=16"), MaxWall: 48 * time.Hour}},
		Partitions: []slurmrest.Partition{{Name: "gpu", MaxTime: 24 * time.Hour}},
	}
}

func running(id int64, user, acct, alloc string) slurmrest.Job {
	return slurmrest.Job{ID: id, User: user, Account: acct, QOS: "train", Partition: "gpu", State: slurmrest.JobState{"RUNNING"},
		TRESAlloc: tres(alloc), TRESReq: tres(alloc), TimeLimit: 8 * time.Hour}
}

func pending(id int64, user, acct, ask, reason string) slurmrest.Job {
	return slurmrest.Job{ID: id, User: user, Account: acct, QOS: "train", Partition: "gpu", State: slurmrest.JobState{"PENDING"},
		StateReason: reason, TRESReq: tres(ask), TimeLimit: 8 * time.Hour}
}

// TestWhy: each reason, on a snapshot made for it, gives the sentence a
// user needs, with the numbers of the snapshot.
func TestWhy(t *testing.T) {
	tenJobs := func() []slurmrest.Job {
		var out []slurmrest.Job
		for i := range int64(10) {
			out = append(out, running(i+1, "bob", "acme-llm", "cpu=1,gres/gpu=1"))
		}
		return out
	}
	for name, tc := range map[string]struct {
		running    []slurmrest.Job
		job        slurmrest.Job
		edit       func(*explain.Snapshot)
		wantDetail string
		wantLevel  string // the blocker's level, "" for none
		wantLine   int    // the policy line of the blocking limit, 0 for none
		wantHint   string // a part of the hint, "" to skip
	}{
		"project GPUs": { // alice 8 + bob 36 = 44 in acme-llm; 44 + 8 > 48 (line 22); alice's 8 + 8 fit her 16
			running:    []slurmrest.Job{running(1, "alice", "acme-llm", "gres/gpu=8"), running(2, "bob", "acme-llm", "gres/gpu=36")},
			job:        pending(9, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRES"),
			wantDetail: "project acme-llm uses 44 of its 48 GPUs; this job asks for 8",
			wantLevel:  "project acme-llm", wantLine: 22, wantHint: "when 4 more GPUs of project acme-llm are free",
		},
		"per-user GPUs": { // alice holds 8 + 8 = 16, her limit (line 23)
			running:    []slurmrest.Job{running(1, "alice", "acme-llm", "gres/gpu=8"), running(2, "alice", "acme-llm", "gres/gpu=8")},
			job:        pending(9, "alice", "acme-llm", "gres/gpu=4", "AssocGrpGRES"),
			wantDetail: "user alice holds 16 of the 16 GPUs one user may hold in acme-llm; this job asks for 4",
			wantLevel:  "user alice in acme-llm", wantLine: 23,
		},
		"tenant GPUs": { // carol 50 in acme-cv + alice 8 in acme-llm = 58; + 8 > 64 (line 14)
			running:    []slurmrest.Job{running(1, "carol", "acme-cv", "gres/gpu=50"), running(2, "alice", "acme-llm", "gres/gpu=8")},
			job:        pending(9, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRES"),
			wantDetail: "tenant acme uses 58 of its 64 GPUs; this job asks for 8",
			wantLevel:  "tenant acme", wantLine: 14,
		},
		"ask above the limit": {
			job:        pending(9, "alice", "acme-llm", "gres/gpu=20", "AssocGrpGRES"),
			wantDetail: "this job asks for 20 GPUs, more than the 16 that user alice in acme-llm may hold at once: it can never start under this limit",
			wantLevel:  "user alice in acme-llm", wantLine: 23,
		},
		"GPUs free again": { // Slurm said so a moment ago; nothing runs now
			job:        pending(9, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRES"),
			wantDetail: "an account's limit on GPUs held at once (GrpTRES) is reached, but the running jobs seen now leave room under every limit on its way up: Slurm may not have looked at the job again since jobs ended",
		},
		"tenant CPUs": { // 250 + 8 > 256 (line 15)
			running:    []slurmrest.Job{running(1, "carol", "acme-cv", "cpu=250")},
			job:        pending(9, "alice", "acme-llm", "cpu=8", "AssocGrpCpuLimit"),
			wantDetail: "tenant acme uses 250 of its 256 CPUs; this job asks for 8",
			wantLevel:  "tenant acme", wantLine: 15,
		},
		"tenant memory": { // 1000 GiB (1024000 MiB) + 32 GiB > 1024 GiB (line 16)
			running:    []slurmrest.Job{running(1, "carol", "acme-cv", "mem=1024000M")},
			job:        pending(9, "alice", "acme-llm", "mem=32G", "AssocGrpMemLimit"),
			wantDetail: "tenant acme uses 1000 of its 1024 GiB of memory; this job asks for 32",
			wantLevel:  "tenant acme", wantLine: 16,
		},
		"budget used up": { // 1000.5 GPU-hours used of 1000 (line 17)
			job: pending(9, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRESMinutes"),
			edit: func(s *explain.Snapshot) {
				s.Shares = []slurmrest.Share{{Account: "acme", Parent: "root", TRESUsage: map[string]float64{"gres/gpu": 1000.5 * 3600}}}
			},
			wantDetail: "tenant acme has used 1000.5 of its 1000 GPU-hours",
			wantLevel:  "tenant acme", wantLine: 17, wantHint: "PriorityDecayHalfLife",
		},
		"budget not enough for this job": { // 900 used + 50 running + 8 GPUs x 8h = 1014 > 1000
			job: pending(9, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRESMinutes"),
			edit: func(s *explain.Snapshot) {
				s.Shares = []slurmrest.Share{{Account: "acme", Parent: "root", TRESUsage: map[string]float64{"gres/gpu": 900 * 3600},
					TRESRunSecs: map[string]int64{"gres/gpu": 50 * 3600}}}
			},
			wantDetail: "tenant acme has used 900 of its 1000 GPU-hours, its running jobs may use 50 more, and this job up to 64 (8 GPUs for 8h)",
			wantLevel:  "tenant acme", wantLine: 17,
		},
		"budget usage unavailable": {
			job:        pending(9, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRESMinutes"),
			edit:       func(s *explain.Snapshot) { s.SharesUnavailable = "HTTP 500" },
			wantDetail: "tenant acme has a budget of 1000 GPU-hours; how much is used is unavailable (HTTP 500)",
			wantLevel:  "tenant acme", wantLine: 17,
		},
		"running jobs": { // 10 running in acme-llm, GrpJobs 10 (line 24)
			running:    tenJobs(),
			job:        pending(11, "alice", "acme-llm", "gres/gpu=1", "AssocGrpJobsLimit"),
			wantDetail: "project acme-llm runs 10 jobs, and may run 10 at once; this job would be one more",
			wantLevel:  "project acme-llm", wantLine: 24,
		},
		"class GPUs per job": { // max_gpus_per_job: 16 (line 9)
			job:        pending(9, "alice", "acme-llm", "gres/gpu=32", "QOSMaxGRESPerJob"),
			wantDetail: "this job asks for 32 GPUs; class train allows 16 per job",
			wantLevel:  "class train", wantLine: 9, wantHint: "ask for at most 16 GPUs",
		},
		"class time limit": { // max_time: 2d (line 8)
			job: func() slurmrest.Job {
				j := pending(9, "alice", "acme-llm", "gres/gpu=1", "QOSMaxWallDurationPerJobLimit")
				j.TimeLimit = 72 * time.Hour
				return j
			}(),
			wantDetail: "its time limit of 3d is longer than the 2d that class train allows",
			wantLevel:  "class train", wantLine: 8,
		},
		"QOS GPUs": { // a limit set in Slurm alone: 28 + 8 > 32
			running: []slurmrest.Job{running(1, "bob", "acme-cv", "gres/gpu=28")},
			job:     pending(9, "alice", "acme-llm", "gres/gpu=8", "QOSGrpGRES"),
			edit: func(s *explain.Snapshot) {
				s.QOS[0].GrpTRES = tres("gres/gpu=32")
			},
			wantDetail: "QOS train uses 28 of its 32 GPUs; this job asks for 8",
			wantLevel:  "QOS train",
		},
		"QOS GPUs per user": { // bob's jobs do not count for alice
			running: []slurmrest.Job{running(1, "alice", "acme-llm", "gres/gpu=8"), running(2, "bob", "acme-llm", "gres/gpu=8")},
			job:     pending(9, "alice", "acme-llm", "gres/gpu=4", "QOSMaxGRESPerUser"),
			edit: func(s *explain.Snapshot) {
				s.QOS[0].MaxTRESPerUser = tres("gres/gpu=8")
			},
			wantDetail: "user alice holds 8 GPUs in QOS train, which allows 8 per user; this job asks for 4",
			wantLevel:  "QOS train",
		},
		"partition time limit": {
			job: func() slurmrest.Job {
				j := pending(9, "alice", "acme-llm", "gres/gpu=1", "PartitionTimeLimit")
				j.TimeLimit = 48 * time.Hour
				return j
			}(),
			wantDetail: "its time limit of 2d is longer than the 1d that partition gpu allows",
			wantLevel:  "partition gpu",
		},
		"resources": { // gpu1 full, gpu2 has 4 free, gpu3 drained
			job: pending(9, "alice", "acme-llm", "node=1,gres/gpu=8", "Resources"),
			edit: func(s *explain.Snapshot) {
				s.Nodes = []slurmrest.Node{
					{Name: "gpu1", Partitions: []string{"gpu"}, State: []string{"ALLOCATED"}, GPUs: 8, GPUsUsed: 8},
					{Name: "gpu2", Partitions: []string{"gpu"}, State: []string{"MIXED"}, GPUs: 8, GPUsUsed: 4},
					{Name: "gpu3", Partitions: []string{"gpu"}, State: []string{"IDLE", "DRAIN"}, GPUs: 8},
					{Name: "cpu1", Partitions: []string{"cpu"}, State: []string{"IDLE"}},
				}
			},
			wantDetail: "it asks for 8 GPUs on 1 node; 4 of the 24 GPUs of partition gpu are free now",
		},
		"priority": {
			job: pending(9, "alice", "acme-llm", "gres/gpu=8", "Priority"),
			edit: func(s *explain.Snapshot) {
				s.Shares = []slurmrest.Share{{Account: "acme-llm", User: "alice", Parent: "acme-llm", FairShareFactor: 0.25}}
			},
			wantDetail: "jobs of higher priority wait for the same resources and go first in partition gpu; the fair-share factor of user alice in acme-llm is 0.250",
		},
		"priority, factor not computed yet": { // right after an apply: slurmctld's priority thread has not run
			job: pending(9, "alice", "acme-llm", "gres/gpu=8", "Priority"),
			edit: func(s *explain.Snapshot) {
				s.Shares = []slurmrest.Share{{Account: "acme-llm", User: "alice", Parent: "acme-llm", Shares: 1, FairShareFactor: 0}}
			},
			wantDetail: "jobs of higher priority wait for the same resources and go first in partition gpu; the fair-share factor of user alice in acme-llm is not computed yet",
			wantHint:   "PriorityCalcPeriod",
		},
		"nodes not available": {
			job: func() slurmrest.Job {
				j := pending(9, "alice", "acme-llm", "gres/gpu=8", "ReqNodeNotAvail")
				j.StateDesc = "ReqNodeNotAvail, UnavailableNodes:gpu3"
				return j
			}(),
			wantDetail: "a node the job needs is not available (down, drained, reserved or in use): unavailable nodes gpu3",
		},
		"dependency": {
			job: func() slurmrest.Job {
				j := pending(9, "alice", "acme-llm", "gres/gpu=8", "Dependency")
				j.Dependency = "afterok:12(unfulfilled)"
				return j
			}(),
			wantDetail: "the job waits for other jobs (its dependency): afterok:12(unfulfilled)",
		},
		"held by its owner": {
			job:        pending(42, "alice", "acme-llm", "gres/gpu=8", "JobHeldUser"),
			wantDetail: "the job is held by its owner or a coordinator",
			wantHint:   "scontrol release 42",
		},
		"held by an admin": {
			job:        pending(42, "alice", "acme-llm", "gres/gpu=8", "JobHeldAdmin"),
			wantDetail: "an administrator holds the job",
		},
		"begin time": {
			job: func() slurmrest.Job {
				j := pending(9, "alice", "acme-llm", "gres/gpu=8", "BeginTime")
				j.EligibleTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
				return j
			}(),
			wantDetail: "it may not start before 2026-03-01 12:00:00 UTC",
		},
		"not looked at yet": {
			job:        pending(9, "alice", "acme-llm", "gres/gpu=8", ""),
			wantDetail: "Slurm has not looked at the job yet",
			wantHint:   "next scheduling cycle",
		},
		"unknown code": {
			job:        pending(9, "alice", "acme-llm", "gres/gpu=8", "SomethingNew"),
			wantDetail: "Slurm's reason SomethingNew (see JOB REASON CODES in squeue(1))",
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := smallInput(t)
			in.Live.Jobs = append(append(in.Live.Jobs, tc.running...), tc.job)
			if tc.edit != nil {
				tc.edit(&in.Live)
			}
			r, err := explain.Job(in, tc.job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if p := explain.Prepare(in).Why(&in.Live.Jobs[len(in.Live.Jobs)-1]); !reflect.DeepEqual(p, r.Why) {
				t.Errorf("Prepare(in).Why = %+v, Job(in).Why = %+v", p, r.Why)
			}
			w := r.Why
			if w == nil {
				t.Fatal("no Why for a pending job")
			}
			if w.Detail != tc.wantDetail {
				t.Errorf("detail:\n got: %s\nwant: %s", w.Detail, tc.wantDetail)
			}
			level, line := "", 0
			if w.Limit != nil {
				level = w.Limit.Level
				if w.Limit.Limit.Source != nil {
					line = w.Limit.Limit.Source.Line
				}
			}
			if level != tc.wantLevel || line != tc.wantLine {
				t.Errorf("blocker = %q at line %d, want %q at line %d (%+v)", level, line, tc.wantLevel, tc.wantLine, w.Limit)
			}
			if !strings.Contains(w.Hint, tc.wantHint) {
				t.Errorf("hint %q does not say %q", w.Hint, tc.wantHint)
			}
		})
	}
}

// TestMeaning: every reason a cluster under the policy shows has its own
// plain words (not the fallback by prefix), and codes Strata does not
// know still read as something.
func TestMeaning(t *testing.T) {
	for _, code := range []string{"AssocGrpGRES", "AssocGrpGRESMinutes", "AssocGrpJobsLimit", "AssocGrpCpuLimit",
		"AssocGrpMemLimit", "QOSGrpGRES", "QOSMaxGRESPerUser", "QOSMaxGRESPerJob", "QOSMaxWallDurationPerJobLimit",
		"Priority", "Resources", "ReqNodeNotAvail", "Dependency", "JobHeldUser", "JobHeldAdmin", "BeginTime",
		"PartitionTimeLimit", "None", ""} {
		if m := explain.Meaning(code); m == "" || strings.Contains(m, "("+code+")") || strings.HasPrefix(m, "Slurm's reason") {
			t.Errorf("Meaning(%q) = %q: want words of its own", code, m)
		}
	}
	for code, want := range map[string]string{
		"AssocGrpGRES":      "an account's limit on GPUs held at once (GrpTRES) is reached",
		"QOSMaxGRESPerUser": "the user holds as many GPUs in the QOS as one user may (MaxTRESPerUser)",
		"AssocGrpBB":        "an account has reached an aggregate limit (AssocGrpBB)",
		"AssocMaxBBPerJob":  "the job asks for more than one job or user of the account may have (AssocMaxBBPerJob)",
		"QOSGrpBBMinutes":   "the QOS has reached an aggregate limit (QOSGrpBBMinutes)",
		"QOSMaxBBPerUser":   "the job asks for more than one job or user of the QOS may have (QOSMaxBBPerUser)",
		"QOSMinGRES":        "the job asks for less than the QOS requires (QOSMinGRES)",
		"MaxBBPerAccount":   "the account has reached a per-account limit of the QOS (MaxBBPerAccount)",
		"FrontEndDown":      "Slurm's reason FrontEndDown (see JOB REASON CODES in squeue(1))",
	} {
		if got := explain.Meaning(code); got != want {
			t.Errorf("Meaning(%q) = %q, want %q", code, got, want)
		}
	}
}

func f(v float64) *float64 { return &v }

// TestAccount: the limits of acme-llm with their lines (21-24 of
// smallPolicy), Slurm's values, a drifted one, the usage of its running
// jobs, the tenant above it, and fair-share from root down.
func TestAccount(t *testing.T) {
	in := smallInput(t)
	in.Live.Associations[2].GrpTRES = tres("gres/gpu=40") // acme-llm: 40 in Slurm, 48 in the policy
	in.Live.Jobs = []slurmrest.Job{
		running(1, "alice", "acme-llm", "cpu=8,mem=32G,gres/gpu=8,gres/gpu:h100=8"),
		running(2, "bob", "acme-cv", "cpu=4,gres/gpu=4"), // acme-cv is not below acme-llm
		pending(3, "bob", "acme-llm", "gres/gpu=8", "Priority"),
	}
	in.Live.Shares = []slurmrest.Share{
		{Account: "root", Shares: 1, SharesNorm: 1, RawUsage: 100, EffectiveUsage: 1, LevelFS: 0},
		{Account: "acme", Parent: "root", Shares: 60, SharesNorm: 0.6, RawUsage: 90, EffectiveUsage: 0.9, LevelFS: 0.6 / 0.9,
			TRESUsage: map[string]float64{"gres/gpu": 250 * 3600}, TRESRunSecs: map[string]int64{"gres/gpu": 12 * 3600}},
		{Account: "acme-llm", Parent: "acme", Shares: 70, SharesNorm: 1, RawUsage: 90, EffectiveUsage: 1, LevelFS: 1},
	}
	r, err := explain.Account(in, "acme-llm")
	if err != nil {
		t.Fatal(err)
	}
	src := func(line int, path string) *explain.Source {
		return &explain.Source{File: "policy.yaml", Line: line, Path: path}
	}
	wantLimits := []explain.Limit{
		{Name: "gpus", Slurm: "GrpTRES gres/gpu", Unit: "GPUs", Policy: f(48), Source: src(22, "tenants[0].projects[0].limits.gpus"),
			Live: f(40), Drift: true, Used: f(8)},
		{Name: "running_jobs", Slurm: "GrpJobs", Unit: "jobs", Policy: f(10), Source: src(24, "tenants[0].projects[0].limits.running_jobs"),
			Live: f(10), Used: f(1)},
	}
	if diff := cmp.Diff(wantLimits, r.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	if r.Kind != "project" || r.Tenant != "acme" || r.Project != "llm" || r.Parent != "acme" || r.Source.Line != 19 {
		t.Errorf("account = %s %s/%s under %s at %v, want project acme/llm under acme at line 19", r.Kind, r.Tenant, r.Project, r.Parent, r.Source)
	}
	wantUsage := explain.Usage{GPUs: 8, GPUsByType: map[string]int64{"h100": 8}, CPUs: 8, MemoryGiB: 32, Running: 1, Pending: 1}
	if diff := cmp.Diff(wantUsage, r.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if r.Budget != nil {
		t.Errorf("budget %+v: acme-llm has none (acme has)", r.Budget)
	}
	if len(r.Above) != 1 || r.Above[0].Account != "acme" || r.Above[0].Kind != "tenant" || len(r.Above[0].Limits) != 4 {
		t.Fatalf("above = %+v, want tenant acme with gpus, cpus, memory_gb and gpu_hours", r.Above)
	}
	// acme's usage counts the jobs of both projects: 8 + 4 GPUs; its
	// budget is 250 of 1000 GPU-hours used (line 17).
	gpus, hours := r.Above[0].Limits[0], r.Above[0].Limits[3]
	if gpus.Name != "gpus" || *gpus.Used != 12 || hours.Name != "gpu_hours" || *hours.Used != 250 || *hours.Live != 1000 || hours.Source.Line != 17 {
		t.Errorf("acme's limits: %+v", r.Above[0].Limits)
	}
	var rows []string
	for _, s := range r.FairShare {
		rows = append(rows, s.Account)
	}
	if strings.Join(rows, ",") != "root,acme,acme-llm" || r.FairShare[0].LevelFS != nil || *r.FairShare[2].LevelFS != 1 || r.FairShare[2].FairShareFactor != nil {
		t.Errorf("fair share = %+v, want root, acme, acme-llm; no level for root, no factor for accounts", r.FairShare)
	}
	if strings.Join(r.Users, ",") != "alice,bob" {
		t.Errorf("users = %v, want alice,bob (dave is a viewer)", r.Users)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "acme-llm differs from the policy in 1 limit (drift)") {
		t.Errorf("notes = %q, want one about the drifted limit", r.Notes)
	}

	// The tenant has the budget: 250 used, 12 still to run.
	tr, err := explain.Account(in, "acme")
	if err != nil {
		t.Fatal(err)
	}
	wantBudget := &explain.Budget{Hours: 1000, Source: src(17, "tenants[0].limits.gpu_hours"), Used: f(250), Running: f(12)}
	if diff := cmp.Diff(wantBudget, tr.Budget); diff != "" {
		t.Errorf("acme's budget (-want +got):\n%s", diff)
	}
	in.Live.Shares, in.Live.SharesUnavailable = nil, "HTTP 500"
	if tr, err = explain.Account(in, "acme"); err != nil || tr.Budget.Used != nil || !strings.Contains(tr.Budget.Unavailable, "HTTP 500") {
		t.Errorf("budget without shares = %+v, %v: want unavailable, saying why", tr.Budget, err)
	}
}

// TestUser: alice's projects, her default (line 27), her per-user limit
// (line 23) under the limits of acme-llm and acme, the account the policy
// does not know, and her jobs with why the pending one waits.
func TestUser(t *testing.T) {
	in := smallInput(t)
	in.Live.Jobs = []slurmrest.Job{
		running(1, "alice", "acme-llm", "gres/gpu=8"),
		running(2, "bob", "acme-llm", "gres/gpu=40"),
		pending(3, "alice", "acme-llm", "gres/gpu=8", "AssocGrpGRES"),
	}
	r, err := explain.User(in, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if r.DefaultAccount != "acme-llm" || r.LiveDefault != "acme-llm" || r.DefaultDrift || r.DefaultSource.Line != 27 {
		t.Errorf("default = %q (line %v), Slurm %q, drift %v", r.DefaultAccount, r.DefaultSource, r.LiveDefault, r.DefaultDrift)
	}
	var accts []string
	for _, m := range r.Accounts {
		accts = append(accts, m.Account+"/"+m.Role)
	}
	if strings.Join(accts, ",") != "acme-llm/member,testbed/" {
		t.Fatalf("accounts = %v, want acme-llm as member and testbed from Slurm alone", accts)
	}
	llm := r.Accounts[0]
	var levels []string
	for _, l := range llm.Levels {
		levels = append(levels, l.Name())
	}
	if strings.Join(levels, ",") != "user alice in acme-llm,project acme-llm,tenant acme" || !llm.Default || llm.Source.Line != 26 {
		t.Errorf("acme-llm: levels %v, default %v, source %v", levels, llm.Default, llm.Source)
	}
	want := explain.Limit{Name: "gpus_per_user", Slurm: "GrpTRES gres/gpu (user association)", Unit: "GPUs", Policy: f(16),
		Source: &explain.Source{File: "policy.yaml", Line: 23, Path: "tenants[0].projects[0].limits.gpus_per_user"}, Live: f(16), Used: f(8)}
	if diff := cmp.Diff([]explain.Limit{want}, llm.Levels[0].Limits); diff != "" {
		t.Errorf("per-user limit (-want +got):\n%s", diff)
	}
	wantJobs := []explain.JobSummary{
		{ID: 1, Account: "acme-llm", QOS: "train", State: "RUNNING", GPUs: 8},
		{ID: 3, Account: "acme-llm", QOS: "train", State: "PENDING", GPUs: 8, Reason: "AssocGrpGRES",
			Why: "project acme-llm uses 48 of its 48 GPUs; this job asks for 8"},
	}
	if diff := cmp.Diff(wantJobs, r.Jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}

	// dave is a viewer: in the policy, no association.
	d, err := explain.User(in, "dave")
	if err != nil || len(d.Accounts) != 1 || d.Accounts[0].Role != "viewer" || d.Accounts[0].Levels != nil || d.InSlurm {
		t.Errorf("dave = %+v, %v: want a viewer of acme-llm with no levels, not in Slurm", d, err)
	}
}

// TestNotFound: names neither side has are errors that say so.
func TestNotFound(t *testing.T) {
	in := smallInput(t)
	for name, tc := range map[string]struct {
		run  func() error
		want string
	}{
		"user":    {func() error { _, err := explain.User(in, "mallory"); return err }, "no user mallory in the policy or in Slurm"},
		"account": {func() error { _, err := explain.Account(in, "nope"); return err }, "no account nope in the policy or in Slurm"},
		"job":     {func() error { _, err := explain.Job(in, 999); return err }, "no job 999 in Slurm"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.run()
			var nf *explain.NotFoundError
			if !errors.As(err, &nf) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want a NotFoundError starting %q", err, tc.want)
			}
		})
	}
	// In the policy but not yet in Slurm is no error: the report says so.
	in.Live = explain.Snapshot{}
	r, err := explain.Account(in, "acme-cv")
	if err != nil || r.InSlurm || len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "not in Slurm yet") {
		t.Errorf("account before apply = %+v, %v", r, err)
	}
}

// TestMapWithoutLimits: a tenants.json from before the map carried limits
// still explains: Slurm's values alone, no drift claimed, and a note that
// says why the policy's side is missing.
func TestMapWithoutLimits(t *testing.T) {
	in := smallInput(t)
	old := *in.Tenants
	old.Policy, old.Classes = "", nil
	old.Tenants = slices.Clone(old.Tenants)
	for i := range old.Tenants {
		tn := &old.Tenants[i]
		tn.Source, tn.Limits = nil, nil
		tn.Projects = slices.Clone(tn.Projects)
		for j := range tn.Projects {
			tn.Projects[j].Source, tn.Projects[j].Limits = nil, nil
		}
	}
	in.Tenants = &old
	in.Live.Jobs = []slurmrest.Job{pending(3, "alice", "acme-llm", "gres/gpu=24", "AssocGrpGRES")}
	r, err := explain.Account(in, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Limits) == 0 {
		t.Fatal("no limits: Slurm's values must still be shown")
	}
	for _, l := range r.Limits {
		if l.Policy != nil || l.Source != nil || l.Drift || l.Live == nil {
			t.Errorf("limit %+v: want Slurm's value alone, no drift", l)
		}
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "holds no limits") {
		t.Errorf("notes = %q, want one that says the map holds no limits", r.Notes)
	}
	j, err := explain.Job(in, 3)
	if err != nil {
		t.Fatal(err)
	}
	if j.Why == nil || j.Why.Limit == nil || j.Why.Limit.Level != "user alice in acme-llm" || j.Why.Limit.Limit.Source != nil ||
		len(j.Notes) == 0 || !strings.Contains(j.Notes[0], "holds no limits") {
		t.Errorf("job = %+v (why %+v): want the per-user limit from Slurm, no policy line, and the note", j, j.Why)
	}
	// The map as render writes it has the policy's side.
	full, err := explain.Account(smallInput(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if full.Limits[0].Source == nil || len(full.Notes) != 0 {
		t.Errorf("full map: limits %+v, notes %q", full.Limits, full.Notes)
	}
}

// TestFactorNotComputed: right after an apply slurmctld reports a factor of
// 0 for every new user association (its priority thread has not run yet);
// explain says "not computed yet", in text and JSON, instead of 0.000,
// which reads as the lowest priority. A computed factor, and a 0 that
// comes with usage, stay numbers.
func TestFactorNotComputed(t *testing.T) {
	for name, tc := range map[string]struct {
		share       slurmrest.Share
		wantText    string
		wantJSON    string
		notComputed bool
	}{
		"new association": {slurmrest.Share{Shares: 1, FairShareFactor: 0}, "not computed yet", `"fair_share_factor":null,"fair_share_factor_not_computed":true`, true},
		"computed":        {slurmrest.Share{Shares: 1, FairShareFactor: 0.5, RawUsage: 10}, "0.500", `"fair_share_factor":0.5}`, false},
		"no usage, 1":     {slurmrest.Share{Shares: 1, FairShareFactor: 1}, "1.000", `"fair_share_factor":1}`, false},
		"used it all":     {slurmrest.Share{Shares: 1, FairShareFactor: 0, RawUsage: 1 << 40}, "0.000", `"fair_share_factor":0}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			in := smallInput(t)
			s := tc.share
			s.Account, s.User, s.Parent = "acme-llm", "alice", "acme-llm"
			for i, old := range in.Live.Shares {
				if old.User == "alice" {
					in.Live.Shares[i] = s
				}
			}
			if !slices.ContainsFunc(in.Live.Shares, func(x slurmrest.Share) bool { return x.User == "alice" }) {
				in.Live.Shares = append(in.Live.Shares, s)
			}
			r, err := explain.User(in, "alice")
			if err != nil {
				t.Fatal(err)
			}
			rows := r.Accounts[0].FairShare
			row := rows[len(rows)-1]
			if row.User != "alice" || row.FactorNotComputed != tc.notComputed {
				t.Fatalf("alice's row = %+v, want not computed %v", row, tc.notComputed)
			}
			var b strings.Builder
			if err := explain.Text(&b, r); err != nil {
				t.Fatal(err)
			}
			var line string
			for l := range strings.Lines(b.String()) {
				if f := strings.Fields(l); len(f) > 2 && f[0] == "acme-llm" && f[1] == "alice" {
					line = l
					break
				}
			}
			if !strings.HasSuffix(strings.TrimSpace(line), tc.wantText) {
				t.Errorf("alice's fair-share row %q, want it to end in %q:\n%s", line, tc.wantText, b.String())
			}
			js, err := json.Marshal(row)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(js), tc.wantJSON) {
				t.Errorf("JSON %s, want %s", js, tc.wantJSON)
			}
		})
	}
}
