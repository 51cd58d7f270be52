package plan

import (
	"maps"
	"slices"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// TestNewAccounts: a user change names the associations it adds, and only
// those (apply posts exactly these; an association that exists and is
// posted again would lose the limits the post leaves out).
func TestNewAccounts(t *testing.T) {
	for name, tc := range map[string]struct {
		live func() Live
		add  map[string]int64 // accounts added to alice in the policy
		want []string         // NewAccounts of alice's change; nil: no user change
	}{
		"a new user: every account, sorted": {
			live: func() Live { l := matching(); l.Users = l.Users[1:]; l.Associations = l.Associations[:2]; return l },
			add:  map[string]int64{"acme": 0},
			want: []string{"acme", "acme-llm"},
		},
		"a user gets a second project: only that one": {
			live: matching,
			add:  map[string]int64{"acme": 0},
			want: []string{"acme"},
		},
		"nothing new: no user change": {
			live: matching,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := want()
			for a, n := range tc.add {
				w.Users[0].Accounts[a] = n
			}
			var got []string
			found := false
			for _, c := range Make(w, tc.live(), Options{}) {
				if c.Kind == "user" && c.Name == "alice" {
					got, found = c.NewAccounts, true
				}
			}
			if found != (tc.want != nil) || !slices.Equal(got, tc.want) {
				t.Errorf("alice's change adds %v (a change: %v), want %v", got, found, tc.want)
			}
		})
	}
}

// TestHasRecord: an account with a record but no association on the
// cluster is created without writing its record again.
func TestHasRecord(t *testing.T) {
	l := matching()
	l.Associations = slices.DeleteFunc(l.Associations, func(a slurmrest.Association) bool { return a.Account == "acme-llm" })
	l.Accounts = slices.DeleteFunc(l.Accounts, func(a slurmrest.Account) bool { return a.Name == "acme" })
	l.Associations = slices.DeleteFunc(l.Associations, func(a slurmrest.Association) bool { return a.Account == "acme" })
	got := map[string]bool{}
	for _, c := range Make(want(), l, Options{}) {
		if c.Kind == "account" {
			if c.Op != "create" {
				t.Errorf("%s %s, want create", c.Op, c.Name)
			}
			got[c.Name] = c.HasRecord
		}
	}
	if want := map[string]bool{"acme": false, "acme-llm": true}; !maps.Equal(got, want) {
		t.Errorf("account creates and whether they have a record: %v, want %v", got, want)
	}
}
