package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
)

func gpus(n int64) slurmrest.TRESList {
	return slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: n}}
}

// want is a small compiled policy: one class QOS, tenant acme with
// project acme-llm, user alice.
func want() *compile.State {
	return &compile.State{
		Cluster: "c1",
		QOS:     []compile.QOS{{Name: "train", Description: "strata: class train", Priority: 100, MaxWall: 48 * time.Hour}},
		Accounts: []compile.Account{
			{Name: "acme", Parent: "root", Fairshare: 60, QOS: []string{"train"}, DefaultQOS: "train", GrpTRES: compile.TRES{"gres/gpu": 64}, GrpTRESMins: compile.TRES{}},
			{Name: "acme-llm", Parent: "acme", Fairshare: 40, QOS: []string{"train"}, DefaultQOS: "train", GrpTRES: compile.TRES{"gres/gpu": 48}, GrpTRESMins: compile.TRES{}},
		},
		Users: []compile.User{{Name: "alice", DefaultAccount: "acme-llm", Accounts: map[string]int64{"acme-llm": 0}}},
	}
}

// matching is the live state that want describes.
func matching() Live {
	prio := int64(100)
	return Live{
		QOS:      []slurmrest.QOS{{Name: "train", Description: "strata: class train", Priority: &prio, MaxWall: 48 * time.Hour}},
		Accounts: []slurmrest.Account{{Name: "acme", Organization: "strata"}, {Name: "acme-llm", Organization: "strata"}, {Name: "ops", Organization: "ops"}},
		Associations: []slurmrest.Association{
			{Cluster: "c1", Account: "acme", Parent: "root", Fairshare: 60, QOS: []string{"train"}, DefaultQOS: "train", GrpTRES: gpus(64)},
			{Cluster: "c1", Account: "acme-llm", Parent: "acme", Fairshare: 40, QOS: []string{"train"}, DefaultQOS: "train", GrpTRES: gpus(48)},
			{Cluster: "c1", Account: "acme-llm", User: "alice"},
			{Cluster: "c1", Account: "ops", Parent: "root", Fairshare: 1},
			{Cluster: "c1", Account: "ops", User: "root"},
		},
		Users: []slurmrest.User{{Name: "alice", DefaultAccount: "acme-llm"}, {Name: "root", DefaultAccount: "ops"}},
	}
}

func lines(cs []Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, strings.Join(strings.Fields(c.String()), " "))
	}
	return strings.Join(out, "\n")
}

func TestMake(t *testing.T) {
	for name, tc := range map[string]struct {
		live  func() Live
		want  func() *compile.State
		prune bool
		plan  string
	}{
		"in sync: nothing to do": {live: matching, want: want},
		"empty slurmdbd: QOS, parents, children, users in order": {
			live: func() Live { return Live{} }, want: want,
			plan: "create qos train\n description: (none) -> strata: class train\n priority: 0 -> 100\n max_wall: (none) -> 48h0m0s\n" +
				"create account acme\n parent: (none) -> root\n fairshare: 0 -> 60\n qos: (none) -> train\n default_qos: (none) -> train\n grp_tres: (none) -> gres/gpu=64\n" +
				"create account acme-llm\n parent: (none) -> acme\n fairshare: 0 -> 40\n qos: (none) -> train\n default_qos: (none) -> train\n grp_tres: (none) -> gres/gpu=48\n" +
				"create user alice\n accounts: (none) -> acme-llm\n default_account: (none) -> acme-llm",
		},
		"a share and a limit changed: two fields on one line each": {
			live: matching,
			want: func() *compile.State {
				w := want()
				w.Accounts[1].Fairshare = 45
				w.Accounts[1].GrpTRES = compile.TRES{"gres/gpu": 56}
				return w
			},
			plan: "modify account acme-llm\n fairshare: 40 -> 45\n grp_tres: gres/gpu=48 -> gres/gpu=56",
		},
		"per-user GPU limit: the user's association": {
			live: matching,
			want: func() *compile.State {
				w := want()
				w.Users[0].Accounts["acme-llm"] = 8
				return w
			},
			plan: "modify association acme-llm/alice\n grp_tres: (none) -> gres/gpu=8",
		},
		"without prune nothing goes": {
			live: matching,
			want: func() *compile.State {
				w := want()
				w.Accounts = w.Accounts[:1]
				w.Users = nil
				return w
			},
		},
		"prune: the default moves first, children before parents, unmarked stays": {
			live:  matching,
			prune: true,
			want: func() *compile.State {
				w := want()
				w.Accounts = nil
				w.Users = nil
				w.QOS = nil
				return w
			},
			plan: "delete user alice\n" +
				"delete account acme-llm\n" +
				"delete account acme\n" +
				"delete qos train",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := lines(Make(tc.want(), tc.live(), Options{Prune: tc.prune}))
			if got != normal(tc.plan) {
				t.Errorf("plan:\n%s\nwant:\n%s", got, normal(tc.plan))
			}
		})
	}
}

// normal writes an expected plan the way lines() does: one line per change.
func normal(s string) string {
	var out []string
	var cur []string
	for _, l := range strings.Split(s, "\n") {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, " ") && len(cur) > 0 {
			out = append(out, strings.Join(strings.Fields(strings.Join(cur, " ")), " "))
			cur = nil
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(strings.Fields(strings.Join(cur, " ")), " "))
	}
	return strings.Join(out, "\n")
}
