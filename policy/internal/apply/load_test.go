package apply

import (
	"flag"
	"fmt"
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

// TestSplitUsers: a run of new users is cut into min(8, associations /
// 1,000) parts, at least one, of about as many associations each; a part
// starts at a user's change and holds the changes of that user's
// associations, so no two parts write the same user.
func TestSplitUsers(t *testing.T) {
	// users makes n users of k projects each, each followed by the limit
	// changes of its associations.
	users := func(n, k int) []plan.Change {
		var run []plan.Change
		for i := range n {
			u := fmt.Sprintf("u%05d", i)
			var accts []string
			for j := range k {
				accts = append(accts, fmt.Sprintf("p%d", (i+j)%50))
			}
			run = append(run, userChange("create", u, accts...))
			for _, a := range accts {
				run = append(run, assocChange(a, u, 8))
			}
		}
		return run
	}
	for name, tc := range map[string]struct {
		run   []plan.Change
		parts int
	}{
		"1,999 associations: one part (one load of the whole run)": {run: users(1999, 1), parts: 1},
		"2,000: two parts":                           {run: users(2000, 1), parts: 2},
		"3,000: three parts":                         {run: users(3000, 1), parts: 3},
		"4,000 (the CI-scale benchmark): four parts": {run: users(4000, 1), parts: 4},
		"1,500 users of two projects: three parts":   {run: users(1500, 2), parts: 3},
		"40,000 (full size): eight parts":            {run: users(40000, 1), parts: 8},
		"100,000: still eight":                       {run: users(50000, 2), parts: 8},
	} {
		t.Run(name, func(t *testing.T) {
			bounds := splitUsers(tc.run)
			if len(bounds) != tc.parts {
				t.Fatalf("%d parts, want %d: %v", len(bounds), tc.parts, bounds)
			}
			assocs, users := 0, map[string]int{}
			var sizes []int
			for k, b := range bounds {
				if want := 0; k > 0 {
					want = bounds[k-1][1]
					if b[0] != want {
						t.Fatalf("part %d starts at %d, want %d (where part %d ends)", k+1, b[0], want, k)
					}
				}
				if c := tc.run[b[0]]; c.Kind != "user" {
					t.Errorf("part %d starts with a %s change, want a user's", k+1, c.Kind)
				}
				n := 0
				for _, c := range tc.run[b[0]:b[1]] {
					switch c.Kind {
					case "user":
						users[c.Name] = k
						n += len(c.User.Accounts)
					case "association":
						if p, ok := users[c.Assoc.User]; !ok || p != k {
							t.Errorf("part %d holds association %s, whose user is not in it", k+1, c.Name)
						}
					}
				}
				sizes = append(sizes, n)
				assocs += n
			}
			if last := bounds[len(bounds)-1][1]; last != len(tc.run) {
				t.Errorf("the parts end at %d, want %d", last, len(tc.run))
			}
			per := (assocs + tc.parts - 1) / tc.parts
			for k, n := range sizes {
				// A part ends at the first user past its share, so it
				// exceeds it by less than one user's associations.
				if n > per+2 || k < len(sizes)-1 && n < per-2 {
					t.Errorf("part %d has %d associations, want about %d: %v", k+1, n, per, sizes)
				}
			}
		})
	}
}
