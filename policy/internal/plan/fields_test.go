package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
)

func n64(n int64) *int64 { return &n }

// richWant has every field plan compares: two class QOS, one preempting
// the other with a preempt mode and a per-job GPU cap; tenant acme with a
// priority, a running-job limit and two coordinators; project acme-llm
// with its own running-job limit; users alice and bob.
func richWant() *compile.State {
	return &compile.State{
		Cluster: "c1",
		QOS: []compile.QOS{
			{Name: "batch", Description: "strata: class batch", Priority: 10, PreemptMode: "requeue"},
			{Name: "train", Description: "strata: class train", Priority: 100, MaxWall: 48 * time.Hour,
				MaxTRESPerJob: compile.TRES{"gres/gpu": 64}, Preempt: []string{"batch"}, PreemptMode: "cancel"},
		},
		Accounts: []compile.Account{
			{Name: "acme", Parent: "root", Fairshare: 60, Priority: 10, QOS: []string{"batch", "train"}, DefaultQOS: "batch",
				GrpTRES: compile.TRES{"gres/gpu": 64}, GrpTRESMins: compile.TRES{}, GrpJobs: 200, Coordinators: []string{"alice", "bob"}},
			{Name: "acme-llm", Parent: "acme", Fairshare: 40, QOS: []string{"batch", "train"}, DefaultQOS: "batch",
				GrpTRES: compile.TRES{"gres/gpu": 48}, GrpTRESMins: compile.TRES{}, GrpJobs: 20},
		},
		Users: []compile.User{
			{Name: "alice", DefaultAccount: "acme-llm", Accounts: map[string]int64{"acme-llm": 0}},
			{Name: "bob", DefaultAccount: "acme-llm", Accounts: map[string]int64{"acme-llm": 0}},
		},
	}
}

// richLive is what slurmdbd reports once richWant is applied: the preempt
// modes as Slurm spells them (batch's in upper case, and DISABLED, the
// cluster's mode, where the policy names none), GrpJobs as max.jobs.per.count.
func richLive() Live {
	return Live{
		QOS: []slurmrest.QOS{
			{Name: "batch", Description: "strata: class batch", Priority: n64(10), PreemptMode: []string{"REQUEUE"}},
			{Name: "train", Description: "strata: class train", Priority: n64(100), MaxWall: 48 * time.Hour,
				MaxTRESPerJob: gpus(64), Preempt: []string{"batch"}, PreemptMode: []string{"CANCEL"}},
		},
		Accounts: []slurmrest.Account{
			{Name: "acme", Organization: "strata", Coordinators: []string{"bob", "alice"}},
			{Name: "acme-llm", Organization: "strata", Coordinators: []string{"zed"}}, // a project's own coordinator is the site's
			{Name: "ops", Organization: "ops", Coordinators: []string{"root"}},
		},
		Associations: []slurmrest.Association{
			{Cluster: "c1", Account: "acme", Parent: "root", Fairshare: 60, Priority: n64(10), QOS: []string{"batch", "train"}, DefaultQOS: "batch",
				GrpTRES: gpus(64), MaxJobs: n64(200)},
			{Cluster: "c1", Account: "acme-llm", Parent: "acme", Fairshare: 40, QOS: []string{"train", "batch"}, DefaultQOS: "batch",
				GrpTRES: gpus(48), MaxJobs: n64(20)},
			{Cluster: "c1", Account: "acme-llm", User: "alice"},
			{Cluster: "c1", Account: "acme-llm", User: "bob"},
			{Cluster: "c1", Account: "ops", Parent: "root", Fairshare: 1},
			{Cluster: "c1", Account: "ops", User: "root"},
		},
		Users: []slurmrest.User{{Name: "alice", DefaultAccount: "acme-llm"}, {Name: "bob", DefaultAccount: "acme-llm"}, {Name: "root", DefaultAccount: "ops"}},
	}
}

func job(id int64, account, user string, state ...string) slurmrest.Job {
	return slurmrest.Job{ID: id, Account: account, User: user, State: state}
}

// TestMakeFields covers the fields and changes beyond fair-share and TRES
// limits: running-job limits, the tenant's priority, QOS preemption and
// per-job caps, coordinators, and removals held back by jobs.
func TestMakeFields(t *testing.T) {
	for name, tc := range map[string]struct {
		live      func() Live
		want      func() *compile.State
		prune     bool
		forceBusy bool
		plan      string
		check     func(t *testing.T, cs []Change)
	}{
		"in sync, DISABLED as the cluster's mode, a project's coordinator ignored: nothing to do": {
			live: richLive, want: richWant, prune: true,
		},
		"running-job limits and the tenant's priority change: old -> new, one line each": {
			live: richLive,
			want: func() *compile.State {
				w := richWant()
				w.Accounts[0].GrpJobs, w.Accounts[0].Priority = 250, 20
				w.Accounts[1].GrpJobs = 0 // the project's limit goes
				return w
			},
			plan: "modify account acme\n grp_jobs: 200 -> 250\n priority: 10 -> 20\n" +
				"modify account acme-llm\n grp_jobs: 20 -> (none)",
		},
		"a project shows its tenant's priority, inherited: no change": {
			live: func() Live {
				l := richLive()
				l.Associations[1].Priority = n64(10)
				return l
			},
			want: richWant,
		},
		"a project's own priority, unlike its tenant's, goes": {
			live: func() Live {
				l := richLive()
				l.Associations[1].Priority = n64(3)
				return l
			},
			want: richWant,
			plan: "modify account acme-llm\n priority: 3 -> (none)",
		},
		"a tenant that inherits root's priority, and asks for another": {
			live: func() Live {
				l := richLive()
				l.Associations = append(l.Associations, slurmrest.Association{Cluster: "c1", Account: "root", Priority: n64(7)})
				l.Associations[0].Priority, l.Associations[1].Priority = n64(7), n64(7)
				return l
			},
			want: richWant,
			plan: "modify account acme\n priority: (none) -> 10",
		},
		"a limit and a priority set where there were none": {
			live: func() Live {
				l := richLive()
				l.Associations[0].MaxJobs, l.Associations[0].Priority = nil, nil
				return l
			},
			want: richWant,
			plan: "modify account acme\n grp_jobs: (none) -> 200\n priority: (none) -> 10",
		},
		"QOS: preempt mode, preempt list emptied, per-job cap; ClearPreempt only where the list empties": {
			live: richLive,
			want: func() *compile.State {
				w := richWant()
				w.QOS[0].PreemptMode = "" // back to the cluster's mode
				w.QOS[1].Preempt, w.QOS[1].PreemptMode = nil, "requeue"
				w.QOS[1].MaxTRESPerJob = compile.TRES{"gres/gpu": 32}
				return w
			},
			plan: "modify qos batch\n preempt_mode: requeue -> (none)\n" +
				"modify qos train\n max_tres_per_job: gres/gpu=64 -> gres/gpu=32\n preempt: batch -> (none)\n preempt_mode: cancel -> requeue",
			check: func(t *testing.T, cs []Change) {
				if cs[0].ClearPreempt || !cs[1].ClearPreempt {
					t.Errorf("ClearPreempt = %v, %v: want only train's (its list empties)", cs[0].ClearPreempt, cs[1].ClearPreempt)
				}
			},
		},
		"QOS: a preempt list that grows is a REST write, not a clear": {
			live: func() Live {
				l := richLive()
				l.QOS[1].Preempt = nil
				return l
			},
			want: richWant,
			plan: "modify qos train\n preempt: (none) -> batch",
			check: func(t *testing.T, cs []Change) {
				if cs[0].ClearPreempt {
					t.Error("ClearPreempt on a list that grows")
				}
			},
		},
		"QOS: the per-job cap removed": {
			live: richLive,
			want: func() *compile.State {
				w := richWant()
				w.QOS[1].MaxTRESPerJob = compile.TRES{}
				return w
			},
			plan: "modify qos train\n max_tres_per_job: gres/gpu=64 -> (none)",
		},
		"coordinators: the new admin is added after the users, the old one stays without prune": {
			live: richLive,
			want: func() *compile.State {
				w := richWant()
				w.Users = append(w.Users, compile.User{Name: "carol", DefaultAccount: "acme-llm", Accounts: map[string]int64{"acme-llm": 0}})
				w.Accounts[0].Coordinators = []string{"alice", "carol"}
				return w
			},
			plan: "create user carol\n accounts: (none) -> acme-llm\n default_account: (none) -> acme-llm\n" +
				"add coordinator acme/carol",
		},
		"coordinators: with prune the old one goes before any removal": {
			live: richLive, prune: true,
			want: func() *compile.State {
				w := richWant()
				w.Accounts[0].Coordinators = []string{"alice"}
				w.Users = w.Users[:1]
				return w
			},
			plan: "remove coordinator acme/bob\n" +
				"delete user bob",
			check: func(t *testing.T, cs []Change) {
				if c := cs[0].Coordinator; c == nil || *c != (Coordinator{Account: "acme", User: "bob"}) {
					t.Errorf("coordinator = %+v", c)
				}
			},
		},
		"coordinators: an account that is not Strata's keeps its coordinators": {
			live: func() Live {
				l := richLive()
				l.Accounts[0].Organization = "site"
				l.Accounts[0].Coordinators = []string{"alice", "bob", "root"}
				return l
			},
			want: richWant, prune: true,
		},
		"empty slurmdbd: coordinators come last, after the users they need": {
			live: func() Live { return Live{} },
			want: func() *compile.State {
				w := richWant()
				w.QOS, w.Accounts = nil, w.Accounts[:1]
				w.Users = []compile.User{{Name: "alice", DefaultAccount: "acme", Accounts: map[string]int64{"acme": 0}}}
				return w
			},
			plan: "create account acme\n parent: (none) -> root\n fairshare: 0 -> 60\n qos: (none) -> batch,train\n default_qos: (none) -> batch\n" +
				" grp_tres: (none) -> gres/gpu=64\n grp_jobs: (none) -> 200\n priority: (none) -> 10\n" +
				"create user alice\n accounts: (none) -> acme\n default_account: (none) -> acme\n" +
				"add coordinator acme/alice\n" +
				"add coordinator acme/bob",
		},
		"busy: removals with running or pending jobs are skipped, the default move with them, idle ones go": {
			live: func() Live {
				l := richLive()
				l.Jobs = []slurmrest.Job{
					job(7, "acme-llm", "bob", "RUNNING"),
					job(9, "acme-llm", "bob", "PENDING", "REQUEUED"),
					job(3, "acme-llm", "alice", "COMPLETED"),
					job(4, "ops", "bob", "RUNNING"),
				}
				// bob also works in ops: his acme-llm association goes, he stays.
				l.Associations = append(l.Associations, slurmrest.Association{Cluster: "c1", Account: "ops", User: "bob"})
				return l
			},
			prune: true,
			want: func() *compile.State {
				w := richWant()
				w.Accounts, w.Users, w.QOS = nil, nil, nil
				return w
			},
			plan: "delete user alice\n" +
				"skip association acme-llm/bob\n busy: jobs 7,9 are running or pending (--force-busy cancels them)\n" +
				"skip account acme-llm\n busy: jobs 7,9 are running or pending (--force-busy cancels them)\n" +
				"skip account acme\n busy: jobs 7,9 are running or pending (--force-busy cancels them)\n" +
				"delete qos batch\n" +
				"delete qos train",
			check: func(t *testing.T, cs []Change) {
				if got := len(Actionable(cs)); got != 3 {
					t.Errorf("%d actionable changes, want 3 (the skips are not)", got)
				}
			},
		},
		"busy with force: the jobs are cancelled once, before the first removal that needs it": {
			live: func() Live {
				l := richLive()
				// dave, at home in ops, runs a job in the tenant account itself.
				l.Associations = append(l.Associations, slurmrest.Association{Cluster: "c1", Account: "acme", User: "dave"},
					slurmrest.Association{Cluster: "c1", Account: "ops", User: "dave"})
				l.Users = append(l.Users, slurmrest.User{Name: "dave", DefaultAccount: "ops"})
				l.Jobs = []slurmrest.Job{job(7, "acme-llm", "bob", "RUNNING"), job(8, "acme", "dave", "SUSPENDED"), job(5, "ops", "dave", "RUNNING")}
				return l
			},
			prune: true, forceBusy: true,
			want: func() *compile.State {
				w := richWant()
				w.Accounts, w.Users = nil, nil
				return w
			},
			plan: "delete user alice\n" +
				"cancel jobs bob\n jobs: 7\n" +
				"delete user bob\n" +
				"cancel jobs acme/dave\n jobs: 8\n" +
				"delete association acme/dave\n" +
				"delete account acme-llm\n" +
				"delete account acme",
			check: func(t *testing.T, cs []Change) {
				if !slices.Equal(cs[6].Busy, []int64{7, 8}) || !slices.Equal(cs[4].Busy, []int64{8}) || cs[0].Busy != nil {
					t.Errorf("Busy = %v on acme, %v on acme/dave, %v on alice: want 7,8 (all its jobs, for apply to wait on), 8 and none",
						cs[6].Busy, cs[4].Busy, cs[0].Busy)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := Make(tc.want(), tc.live(), Options{Prune: tc.prune, ForceBusy: tc.forceBusy})
			if got := lines(cs); got != normal(tc.plan) {
				t.Fatalf("plan:\n%s\nwant:\n%s", got, normal(tc.plan))
			}
			if tc.check != nil {
				tc.check(t, cs)
			}
		})
	}
}

// TestPreemptMode: Slurm's list of modes as the policy spells them.
func TestPreemptMode(t *testing.T) {
	for in, want := range map[string]string{
		"":               "",
		"DISABLED":       "",
		"REQUEUE":        "requeue",
		"CANCEL":         "cancel",
		"SUSPEND,GANG":   "suspend,gang",
		"DISABLED,OTHER": "other",
	} {
		var m []string
		if in != "" {
			m = strings.Split(in, ",")
		}
		if got := preemptMode(m); got != want {
			t.Errorf("preemptMode(%q) = %q, want %q", in, got, want)
		}
	}
}
