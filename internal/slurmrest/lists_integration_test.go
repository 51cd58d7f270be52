//go:build integration

package slurmrest_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestListWrites writes QOS, accounts, users and associations as lists
// and reads each back; then shows what slurmdbd does with a list request
// it refuses part of: it keeps nothing of that request.
func TestListWrites(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		p := testbed.Unique("lw")
		q1, q2, q3 := p+"q1", p+"q2", p+"q3"
		tenant, p1, p2 := p+"t", p+"t-p1", p+"t-p2"
		u1, u2 := p+"u1", p+"u2"
		t.Cleanup(func() {
			ctx := testbed.Context(t)
			for _, u := range []string{u1, u2} {
				_ = c.DeleteUser(ctx, u)
			}
			for _, a := range []string{p1, p2, tenant} {
				_ = c.DeleteAccount(ctx, a)
			}
			for _, q := range []string{q1, q2, q3} {
				_ = c.DeleteQOS(ctx, q)
			}
		})

		prio := int64(7)
		if err := c.SetQOSList(ctx, []slurmrest.QOS{{Name: q1, Description: "one", Priority: &prio}, {Name: q2, Description: "two"}}); err != nil {
			t.Fatalf("set 2 QOS: %v", err)
		}
		if q := findQOS(t, c, q1); q == nil || deref(q.Priority) != 7 || findQOS(t, c, q2) == nil {
			t.Fatalf("after SetQOSList: %s = %+v, %s present: %v", q1, q, q2, findQOS(t, c, q2) != nil)
		}

		// Records first, with their own descriptions; then the
		// associations, children listed after their parent.
		accts := []slurmrest.AccountSpec{{Name: tenant, Parent: "root", Description: "tenant", Organization: "strata"},
			{Name: p1, Parent: tenant, Description: "project one", Organization: "strata"},
			{Name: p2, Parent: tenant, Description: "project two", Organization: "strata"}}
		if err := c.SetAccounts(ctx, accts); err != nil {
			t.Fatalf("set account records: %v", err)
		}
		if got := accounts(t, c, tenant, p1, p2); len(got) != 0 {
			t.Errorf("account records alone made associations: %+v", got)
		}
		if err := c.AddAccountAssociations(ctx, b.Cluster, accts); err != nil {
			t.Fatalf("add account associations: %v", err)
		}
		if err := c.AddAccountAssociations(ctx, b.Cluster, accts); err != nil {
			t.Errorf("adding the same associations again: %v, want nil (they exist)", err)
		}
		accts[1].Description = "project one, renamed"
		if err := c.SetAccounts(ctx, accts[1:2]); err != nil {
			t.Errorf("set an account record again: %v", err)
		}
		parents := map[string]string{}
		for _, a := range accounts(t, c, tenant, p1, p2) {
			parents[a.Account] = a.Parent
		}
		if parents[tenant] != "root" || parents[p1] != tenant || parents[p2] != tenant {
			t.Fatalf("account associations and their parents: %v", parents)
		}
		all, err := c.Accounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(all, func(a slurmrest.Account) bool { return a.Name == p1 }); i < 0 ||
			all[i].Description != "project one, renamed" || all[i].Organization != "strata" {
			t.Errorf("account %s after two SetAccounts: %+v, want the second description and organization strata", p1, all)
		}

		// Users: records, then their associations, the default marked.
		if err := c.AddUsers(ctx, []string{u1, u2}); err != nil {
			t.Fatalf("add users: %v", err)
		}
		if err := c.SetAssociations(ctx, []slurmrest.Association{
			{Cluster: b.Cluster, Account: p1, User: u1, GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 4}}},
			{Cluster: b.Cluster, Account: p2, User: u1, IsDefault: true},
			{Cluster: b.Cluster, Account: p2, User: u2, IsDefault: true},
		}); err != nil {
			t.Fatalf("add user associations: %v", err)
		}
		got := map[string]string{}
		for _, a := range accounts(t, c, tenant, p1, p2) {
			if a.User != "" {
				got[a.Account+"/"+a.User] = a.GrpTRES.String()
				if a.IsDefault {
					got[a.User] = "default " + a.Account
				}
			}
		}
		want := map[string]string{p1 + "/" + u1: "gres/gpu=4", p2 + "/" + u1: "", p2 + "/" + u2: "", u1: "default " + p2, u2: "default " + p2}
		if !maps.Equal(got, want) {
			t.Fatalf("user associations: %v, want %v", got, want)
		}
		// Read in requests of one account, two at a time: the same
		// associations, in the order of the accounts.
		some, err := c.AssociationsOfAccounts(ctx, []string{p2, tenant, p1}, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, a := range some {
			order = append(order, a.Account+"/"+a.User)
		}
		slices.Sort(order[0:3]) // within one account, slurmdbd's order
		if want := []string{p2 + "/", p2 + "/" + u1, p2 + "/" + u2, tenant + "/", p1 + "/", p1 + "/" + u1}; !slices.Equal(order, want) {
			t.Errorf("AssociationsOfAccounts: %v, want %v", order, want)
		}
		if err := c.SetDefaultAccounts(ctx, []slurmrest.User{{Name: u1, DefaultAccount: p1}}); err != nil {
			t.Fatalf("set default accounts: %v", err)
		}
		moved := false
		for _, a := range accounts(t, c, tenant, p1, p2) {
			moved = moved || a.User == u1 && a.Account == p1 && a.IsDefault
		}
		if !moved {
			t.Errorf("after SetDefaultAccounts, %s's default association is not the one under %s", u1, p1)
		}

		// A refused element rolls the whole request back: q3 is not
		// created, as q1 preempting itself is a loop.
		if err := c.SetQOSList(ctx, []slurmrest.QOS{{Name: q3, Description: "three"}, {Name: q1, Preempt: []string{q1}}}); err == nil {
			t.Fatal("a QOS that preempts itself: no error")
		}
		if findQOS(t, c, q3) != nil {
			t.Errorf("%s was created by a request slurmdbd refused", q3)
		}
		// The same for associations: a change of shares and a new user
		// association go with a refused default QOS (not in the account's
		// QOS list).
		err = c.SetAssociations(ctx, []slurmrest.Association{
			{Cluster: b.Cluster, Account: tenant, Fairshare: 77},
			{Cluster: b.Cluster, Account: p1, User: u2},
			{Cluster: b.Cluster, Account: p2, QOS: []string{q2}, DefaultQOS: q1},
		})
		if err == nil {
			t.Fatal("an association whose default QOS is not in its QOS list: no error")
		}
		for _, a := range accounts(t, c, tenant, p1, p2) {
			if a.Account == tenant && a.User == "" && a.Fairshare == 77 || a.Account == p1 && a.User == u2 {
				t.Errorf("%s/%s (fairshare %d) was written by a request slurmdbd refused (%v)", a.Account, a.User, a.Fairshare, err)
			}
		}
	})
}

// accounts returns the associations of the named accounts.
func accounts(t *testing.T, c *slurmrest.Client, names ...string) []slurmrest.Association {
	t.Helper()
	all, err := c.Associations(testbed.Context(t), slurmrest.AssociationFilter{Accounts: names})
	if err != nil {
		t.Fatal(err)
	}
	return all
}
