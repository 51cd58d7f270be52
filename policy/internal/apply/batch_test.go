package apply

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

func qosChange(op, name string, preempt ...string) plan.Change {
	return plan.Change{Op: op, Kind: "qos", Name: name, QOS: &compile.QOS{Name: name, Preempt: preempt}}
}

func accountChange(op, name, parent string) plan.Change {
	return plan.Change{Op: op, Kind: "account", Name: name, Account: &compile.Account{Name: name, Parent: parent}}
}

func userChange(op, name string, accounts ...string) plan.Change {
	u := &compile.User{Name: name, Accounts: map[string]int64{}}
	for _, a := range accounts {
		u.Accounts[a] = 0
	}
	if len(accounts) > 0 {
		u.DefaultAccount = accounts[0]
	}
	return plan.Change{Op: op, Kind: "user", Name: name, User: u, NewAccounts: accounts,
		Fields: []plan.Field{{Name: "accounts", New: strings.Join(accounts, ",")}, {Name: "default_account", New: u.DefaultAccount}}}
}

func assocChange(account, user string, gpus int64) plan.Change {
	return plan.Change{Op: "modify", Kind: "association", Name: account + "/" + user,
		Assoc: &slurmrest.Association{Cluster: "c1", Account: account, User: user, GrpTRES: gpuTRES(gpus)}}
}

func gpuTRES(n int64) slurmrest.TRESList {
	return slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: n}}
}

// groups prints batches as "kind:name,name | kind:name".
func groups(bs [][]plan.Change) string {
	var out []string
	for _, b := range bs {
		names := make([]string, 0, len(b))
		for _, c := range b {
			names = append(names, c.Name)
		}
		k := batchKind(b[0])
		if k == "" {
			k = "alone"
		}
		out = append(out, k+":"+strings.Join(names, ","))
	}
	return strings.Join(out, " | ")
}

// TestBatches: batches keep the plan's order, hold consecutive changes of
// one kind only, never more than the size, and cut where one request
// could not write what the plan asks for.
func TestBatches(t *testing.T) {
	for name, tc := range map[string]struct {
		changes []plan.Change
		size    int
		want    string
	}{
		"a plan on an empty slurmdbd: one batch per kind": {
			changes: []plan.Change{
				qosChange("create", "batch"), qosChange("modify", "serve"),
				accountChange("create", "acme", "root"), accountChange("create", "acme-llm", "acme"),
				userChange("create", "alice", "acme-llm"), assocChange("acme-llm", "alice", 8),
				userChange("create", "bob", "acme-llm"),
			},
			size: 500,
			want: "qos:batch,serve | account-create:acme,acme-llm | users:alice,acme-llm/alice,bob",
		},
		"the size limit cuts a run": {
			changes: []plan.Change{
				accountChange("create", "a", "root"), accountChange("create", "b", "root"), accountChange("create", "c", "root"),
				accountChange("create", "d", "root"), accountChange("create", "e", "root"),
			},
			size: 2,
			want: "account-create:a,b | account-create:c,d | account-create:e",
		},
		"size 1 is one change at a time": {
			changes: []plan.Change{qosChange("create", "batch"), qosChange("create", "train")},
			size:    1,
			want:    "qos:batch | qos:train",
		},
		"a size below 1 is taken as 1": {
			changes: []plan.Change{qosChange("create", "batch"), qosChange("create", "train")},
			size:    0,
			want:    "qos:batch | qos:train",
		},
		"a new kind starts a new batch, even of the same object kind": {
			changes: []plan.Change{
				accountChange("create", "acme", "root"), accountChange("modify", "ops", "root"), accountChange("create", "acme-cv", "acme"),
			},
			size: 500,
			want: "account-create:acme | account-modify:ops | account-create:acme-cv",
		},
		"a QOS that preempts one the same batch creates waits for the next request": {
			changes: []plan.Change{
				qosChange("create", "batch"), qosChange("create", "interactive", "batch"), qosChange("create", "train", "batch"),
			},
			size: 500,
			want: "qos:batch | qos:interactive,train",
		},
		"a QOS that preempts one that exists joins the batch": {
			changes: []plan.Change{qosChange("modify", "batch"), qosChange("create", "train", "batch")},
			size:    500,
			want:    "qos:batch,train",
		},
		"removals and default moves are written alone": {
			changes: []plan.Change{
				{Op: "modify", Kind: "user", Name: "alice", DefaultOnly: true, User: &compile.User{Name: "alice", DefaultAccount: "ops"}},
				{Op: "delete", Kind: "association", Name: "acme-cv/alice", Assoc: &slurmrest.Association{Account: "acme-cv", User: "alice"}},
				{Op: "delete", Kind: "account", Name: "acme-cv"},
				{Op: "delete", Kind: "account", Name: "acme"},
				{Op: "delete", Kind: "qos", Name: "old"},
			},
			size: 500,
			want: "alone:alice | alone:acme-cv/alice | alone:acme-cv | alone:acme | alone:old",
		},
		"kinds apply knows no batch for are written alone": {
			changes: []plan.Change{userChange("create", "alice", "acme-llm"), {Op: "create", Kind: "coordinator", Name: "acme/alice"},
				userChange("create", "bob", "acme-llm")},
			size: 500,
			want: "users:alice | alone:acme/alice | users:bob",
		},
	} {
		t.Run(name, func(t *testing.T) {
			bs := batches(tc.changes, tc.size)
			if got := groups(bs); got != tc.want {
				t.Errorf("batches:\n got  %s\n want %s", got, tc.want)
			}
			var flat []plan.Change
			for _, b := range bs {
				flat = append(flat, b...)
			}
			if diff := cmp.Diff(tc.changes, flat); diff != "" {
				t.Errorf("the batches do not hold the plan in order (-plan +batches):\n%s", diff)
			}
		})
	}
}

// TestWritesOf: the requests of a batch carry exactly what its changes
// ask for, in one element per object.
func TestWritesOf(t *testing.T) {
	alice := userChange("create", "alice", "acme-cv", "acme-llm")
	alice.User.Accounts["acme-llm"] = 8
	alice.User.DefaultAccount = "acme-llm"
	movedToOld := plan.Change{Op: "modify", Kind: "user", Name: "bob", NewAccounts: []string{"acme-cv"},
		User:   &compile.User{Name: "bob", DefaultAccount: "acme-llm", Accounts: map[string]int64{"acme-llm": 0, "acme-cv": 0}},
		Fields: []plan.Field{{Name: "accounts", New: "acme-cv"}, {Name: "default_account", Old: "ops", New: "acme-llm"}}}
	movedToNew := plan.Change{Op: "modify", Kind: "user", Name: "carol", NewAccounts: []string{"acme-cv"},
		User:   &compile.User{Name: "carol", DefaultAccount: "acme-cv", Accounts: map[string]int64{"acme-llm": 0, "acme-cv": 0}},
		Fields: []plan.Field{{Name: "accounts", New: "acme-cv"}, {Name: "default_account", Old: "acme-llm", New: "acme-cv"}}}
	tenant := &compile.Account{Name: "acme", Parent: "root", Description: "tenant acme", Fairshare: 60, QOS: []string{"batch"},
		DefaultQOS: "batch", GrpTRES: compile.TRES{"gres/gpu": 64}, GrpTRESMins: compile.TRES{}}
	for name, tc := range map[string]struct {
		batch []plan.Change
		want  writes
	}{
		"new users: records first, then each association once, with its limit and the default": {
			batch: []plan.Change{alice, assocChange("acme-llm", "alice", 8), userChange("create", "dave", "acme-cv")},
			want: writes{
				Users: []string{"alice", "dave"},
				Assocs: []slurmrest.Association{
					{Cluster: "c1", Account: "acme-cv", User: "alice"},
					{Cluster: "c1", Account: "acme-llm", User: "alice", IsDefault: true, GrpTRES: gpuTRES(8)},
					{Cluster: "c1", Account: "acme-cv", User: "dave", IsDefault: true},
				},
			},
		},
		"a default that moves to an association that exists is written on the user": {
			batch: []plan.Change{movedToOld},
			want: writes{
				Assocs:   []slurmrest.Association{{Cluster: "c1", Account: "acme-cv", User: "bob"}},
				Defaults: []slurmrest.User{{Name: "bob", DefaultAccount: "acme-llm"}},
			},
		},
		"a default that moves to a new association is marked on it": {
			batch: []plan.Change{movedToNew},
			want:  writes{Assocs: []slurmrest.Association{{Cluster: "c1", Account: "acme-cv", User: "carol", IsDefault: true}}},
		},
		"a limit change of an association that exists is its own element": {
			batch: []plan.Change{assocChange("acme-llm", "bob", -1)},
			want:  writes{Assocs: []slurmrest.Association{{Cluster: "c1", Account: "acme-llm", User: "bob", GrpTRES: gpuTRES(-1)}}},
		},
		"new accounts: records, associations under their parents, then every limit of each": {
			batch: []plan.Change{{Op: "create", Kind: "account", Name: "acme", Account: tenant}},
			want: writes{
				Records:  []slurmrest.AccountSpec{{Name: "acme", Parent: "root", Description: "tenant acme", Organization: "strata"}},
				Accounts: []slurmrest.AccountSpec{{Name: "acme", Parent: "root", Description: "tenant acme", Organization: "strata"}},
				Assocs:   []slurmrest.Association{accountAssoc("c1", tenant)},
			},
		},
		"an account whose record exists: its record is not written again (that would drop its coordinators)": {
			batch: []plan.Change{{Op: "create", Kind: "account", Name: "acme", Account: tenant, HasRecord: true}},
			want: writes{
				Accounts: []slurmrest.AccountSpec{{Name: "acme", Parent: "root", Description: "tenant acme", Organization: "strata"}},
				Assocs:   []slurmrest.Association{accountAssoc("c1", tenant)},
			},
		},
		"modified accounts: one element each": {
			batch: []plan.Change{{Op: "modify", Kind: "account", Name: "acme", Account: tenant}},
			want:  writes{Assocs: []slurmrest.Association{accountAssoc("c1", tenant)}},
		},
		"QOS: one element each": {
			batch: []plan.Change{qosChange("create", "batch"), qosChange("modify", "train", "batch")},
			want:  writes{QOS: []slurmrest.QOS{qosOf(&compile.QOS{Name: "batch"}), qosOf(&compile.QOS{Name: "train", Preempt: []string{"batch"}})}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := writesOf("c1", tc.batch)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := writesOf("c1", []plan.Change{{Op: "delete", Kind: "qos", Name: "old"}}); err == nil {
		t.Error("a removal has no batch: want an error")
	}
}
