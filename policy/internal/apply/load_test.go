package apply

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (review the diff)")

// TestLoadRun: a load takes the run of changes that only create, from the
// start of the plan: accounts and users slurmdbd has no trace of, and the
// limits of the new users' associations; anything else ends it.
func TestLoadRun(t *testing.T) {
	withRecord := accountChange("create", "t2", "")
	withRecord.HasRecord = true
	quoted := accountChange("create", "t3", "")
	quoted.Account.Description = "Bob's lab"
	for name, tc := range map[string]struct {
		changes []plan.Change
		want    int
	}{
		"a first apply, after its QOS": {
			changes: []plan.Change{accountChange("create", "t1", ""), accountChange("create", "t1-p1", "t1"),
				userChange("create", "u1", "t1-p1"), assocChange("t1-p1", "u1", 8), userChange("create", "u2", "t1-p1")},
			want: 5,
		},
		"a QOS is written through slurmrestd": {
			changes: []plan.Change{qosChange("create", "batch"), accountChange("create", "t1", "")},
		},
		"an account with a record left by a stopped apply ends the run": {
			changes: []plan.Change{accountChange("create", "t1", ""), withRecord, accountChange("create", "t4", "")},
			want:    1,
		},
		"a user that exists, given a project, ends it": {
			changes: []plan.Change{userChange("create", "u1", "p1"), userChange("modify", "u2", "p1")},
			want:    1,
		},
		"the limit of an association that exists ends it": {
			changes: []plan.Change{userChange("create", "u1", "p1"), assocChange("p1", "u9", 4)},
			want:    1,
		},
		"a limit before its user is created ends it": {
			changes: []plan.Change{assocChange("p1", "u1", 4), userChange("create", "u1", "p1")},
		},
		"a value a flat file cannot hold ends it": {
			changes: []plan.Change{accountChange("create", "t1", ""), quoted},
			want:    1,
		},
		"removals end it": {
			changes: []plan.Change{accountChange("create", "t1", ""), {Op: "delete", Kind: "account", Name: "old"}},
			want:    1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := loadRun(tc.changes); got != tc.want {
				t.Errorf("loadRun = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFlatFile: the flat file holds every field apply writes, accounts
// under parents listed before them, users under each of their accounts
// with the default on every line. Refresh with -update and review.
func TestFlatFile(t *testing.T) {
	accounts := []*compile.Account{
		{Name: "physics", Parent: "root", Description: "tenant physics", Fairshare: 40, Priority: 10, QOS: []string{"batch", "train"},
			DefaultQOS: "batch", GrpTRES: compile.TRES{"gres/gpu": 64, "cpu": 512}, GrpTRESMins: compile.TRES{"gres/gpu": 600000}, GrpJobs: 100},
		{Name: "chem", Parent: "", Description: "tenant chem", Fairshare: 1},
		{Name: "physics-lattice", Parent: "physics", Description: "project lattice of physics", Fairshare: 20,
			QOS: []string{"batch", "train"}, DefaultQOS: "batch", GrpTRES: compile.TRES{"gres/gpu": 32}},
		{Name: "chem-md", Parent: "chem", Description: "project md of chem", Fairshare: 5},
	}
	users := []*compile.User{
		{Name: "alice", DefaultAccount: "physics-lattice", Accounts: map[string]int64{"physics-lattice": 8, "chem-md": 0}},
		{Name: "bob", DefaultAccount: "chem-md", Accounts: map[string]int64{"chem-md": 2}},
	}
	got, err := FlatFile("c1", accounts, users)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "flat.cfg")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("flat file (-want +got):\n%s", d)
	}

	for name, tc := range map[string]struct {
		accounts []*compile.Account
		users    []*compile.User
		want     string
	}{
		"a quote in a description": {accounts: []*compile.Account{{Name: "a", Description: "Bob's"}}, want: `account "a"`},
		"a colon in a default":     {users: []*compile.User{{Name: "u", DefaultAccount: "a:b"}}, want: `user "u"`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := FlatFile("c1", tc.accounts, tc.users); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}
