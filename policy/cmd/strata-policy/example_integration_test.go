//go:build integration

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// exampleFile is the commented example policy that packages install as
// /etc/strata/policy.yaml.
const exampleFile = "../../../etc/strata/policy.yaml"

// exampleEdit is one change to the example's text that fits it to a test
// bed: old must occur exactly n times, so that a change to the example
// that this test does not know about fails here, not somewhere later.
type exampleEdit struct {
	old, new string
	n        int
}

// exampleFor returns the example policy fitted to bed b, with every class
// and tenant name prefixed by prefix.
func exampleFor(t *testing.T, b *testbed.Bed, prefix string) string {
	t.Helper()
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	edits := []exampleEdit{
		// The cluster is the bed's ClusterName, not the example's "gpu".
		{"\n  name: gpu\n", "\n  name: " + b.Cluster + "\n", 1},
		// The bed's AccountingStorageTRES (test/testbed/slurm/etc/slurm.conf.in)
		// is gres/gpu,gres/gpu:h100: it tracks no a100, and has no second
		// type to put in its place. With the a100 limits, apply exits 0 but
		// slurmdbd keeps only the cpu and gres/gpu parts of those accounts'
		// GrpTRES (acme loses its h100 and memory limits too, globex its
		// "h100: 0"), and the next plan lists them again (24.11 and 26.05). So
		// a100 goes: from gpu_types, acme's and globex's "a100: 32", and
		// vision's only type limit. The H100 limits stay, the forbidden
		// type (globex's "h100: 0") among them.
		{"gpu_types: [h100, a100]\n", "gpu_types: [h100]\n", 1},
		{"\n        a100: 32\n", "\n", 2},
		{"\n          gpus_by_type:\n            a100: 24\n", "\n", 1},
		// Class names become QOS names and tenant names account names in
		// the bed's slurmdbd, which other tests and the demo share: each
		// gets the prefix, and so does every place that names a class
		// (default_class, the preempt lists, the classes of a tenant or
		// project). Project accounts are <tenant>-<project>, so they take
		// the tenant's prefix. Users keep their names: slurmdbd needs no
		// Unix user for an association.
		{"\n  default_class: batch\n", "\n  default_class: " + prefix + "batch\n", 1},
		{"\n  - name: train\n", "\n  - name: " + prefix + "train\n", 1},
		// Only classes named train or batch are requeueable by default, and
		// batch's "preempt_mode: requeue" needs that: the renamed batch
		// says "requeue: true", which the example's batch gets by default.
		{"\n  - name: batch\n", "\n  - name: " + prefix + "batch\n    requeue: true\n", 1},
		{"\n  - name: interactive\n", "\n  - name: " + prefix + "interactive\n", 1},
		{"\n  - name: serve\n", "\n  - name: " + prefix + "serve\n", 1},
		{"preempt: [batch]\n", "preempt: [" + prefix + "batch]\n", 3},
		{"classes: [train, batch, interactive, serve]\n",
			"classes: [" + prefix + "train, " + prefix + "batch, " + prefix + "interactive, " + prefix + "serve]\n", 1},
		{"classes: [batch, interactive]\n", "classes: [" + prefix + "batch, " + prefix + "interactive]\n", 1},
		{"classes: [train, batch, interactive]\n", "classes: [" + prefix + "train, " + prefix + "batch, " + prefix + "interactive]\n", 1},
		{"\n  - name: acme\n", "\n  - name: " + prefix + "acme\n", 1},
		{"\n  - name: globex\n", "\n  - name: " + prefix + "globex\n", 1},
	}
	for _, e := range edits {
		if got := strings.Count(text, e.old); got != e.n {
			t.Fatalf("%s: %q occurs %d times, want %d: fit this test to the changed example", exampleFile, e.old, got, e.n)
		}
		text = strings.ReplaceAll(text, e.old, e.new)
	}
	return text
}

// TestApplyExample applies the shipped example policy, fitted to the bed
// (see exampleFor), to a slurmdbd that has none of its objects: plan lists
// the creations, one apply makes them, a second plan and drift find
// nothing to do, and slurmdbd holds the example's values.
func TestApplyExample(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		c := b.Client(t)
		prefix := testbed.Unique("ex") + "-"
		text := exampleFor(t, b, prefix)
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}

		// What the apply will make, for the cleanup and to prove that the
		// prefix reached every QOS and account.
		p, err := spec.Parse(file, []byte(text))
		if err != nil {
			t.Fatalf("the fitted example: %v", err)
		}
		want, err := compile.Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range want.QOS {
			if !strings.HasPrefix(q.Name, prefix) {
				t.Fatalf("QOS %s has no prefix %s", q.Name, prefix)
			}
		}
		for _, a := range want.Accounts {
			if !strings.HasPrefix(a.Name, prefix) {
				t.Fatalf("account %s has no prefix %s", a.Name, prefix)
			}
		}
		before, err := c.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		existed := map[string]bool{}
		for _, u := range before {
			existed[u.Name] = true
		}
		t.Cleanup(func() {
			// The bed's users (alice, bob) get their default account back
			// (other tests submit as them without --account); users the
			// apply made go, and their associations with them; then the
			// accounts, projects before tenants, and the QOS.
			for _, u := range b.Users {
				if err := c.SetDefaultAccount(ctx, u, b.Account); err != nil {
					t.Errorf("cleanup: default account of %s: %v", u, err)
				}
			}
			for _, u := range want.Users {
				if !existed[u.Name] {
					if err := c.DeleteUser(ctx, u.Name); err != nil {
						t.Errorf("cleanup: user %s: %v", u.Name, err)
					}
				}
			}
			for i := len(want.Accounts) - 1; i >= 0; i-- {
				if err := c.DeleteAccount(ctx, want.Accounts[i].Name); err != nil {
					t.Errorf("cleanup: account %s: %v", want.Accounts[i].Name, err)
				}
			}
			for _, q := range want.QOS {
				if err := c.DeleteQOS(ctx, q.Name); err != nil {
					t.Errorf("cleanup: QOS %s: %v", q.Name, err)
				}
			}
		})

		code, out := policyOn(t, b, file, "plan")
		for _, w := range []string{"create qos         " + prefix + "train", "create qos         " + prefix + "batch",
			"create account     " + prefix + "acme\n", "create account     " + prefix + "acme-llm", "create account     " + prefix + "acme-vision",
			"create account     " + prefix + "globex\n", "create account     " + prefix + "globex-rl", "create user        carol",
			"add    coordinator " + prefix + "acme/alice", "add    coordinator " + prefix + "globex/erin"} {
			if code != exitChanges || !strings.Contains(out, w) {
				t.Fatalf("plan on a slurmdbd without the example: exit %d, want %d and %q:\n%s", code, exitChanges, w, out)
			}
		}
		if code, out = policyOn(t, b, file, "apply", "--apply"); code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		if code, out = policyOn(t, b, file, "plan"); code != exitOK || !strings.Contains(out, "Slurm matches") {
			t.Fatalf("plan after apply: exit %d, want 0 and no change:\n%s", code, out)
		}
		if code, out = policyOn(t, b, file, "drift"); code != exitOK {
			t.Fatalf("drift after apply: exit %d, want 0:\n%s", code, out)
		}

		// What slurmdbd holds, read back through the REST facade, against
		// the lines of the example.
		assocs, err := c.Associations(ctx, slurmrest.AssociationFilter{Accounts: []string{
			prefix + "acme", prefix + "acme-llm", prefix + "acme-vision", prefix + "globex", prefix + "globex-rl"}})
		if err != nil {
			t.Fatal(err)
		}
		account := func(name string) slurmrest.Association {
			t.Helper()
			for _, a := range assocs {
				if a.Account == name && a.User == "" {
					return a
				}
			}
			t.Fatalf("no association of account %s in %+v", name, assocs)
			return slurmrest.Association{}
		}
		tres := func(a slurmrest.Association, key string) string {
			if n, ok := a.GrpTRES.Get(key); ok {
				return a.Account + " " + key + "=" + strconv.FormatInt(n, 10)
			}
			return a.Account + " " + key + " unset"
		}
		acme, llm, globex := account(prefix+"acme"), account(prefix+"acme-llm"), account(prefix+"globex")
		for _, chk := range []struct{ what, got, want string }{
			// acme: "shares: 60", a tenant under root.
			{"acme's fair-share", strconv.FormatInt(acme.Fairshare, 10) + " under " + acme.Parent, "60 under root"},
			// llm: "limits: gpus: 48, gpus_by_type: h100: 48".
			{"llm's GPUs", tres(llm, "gres/gpu"), prefix + "acme-llm gres/gpu=48"},
			{"llm's H100s", tres(llm, "gres/gpu:h100"), prefix + "acme-llm gres/gpu:h100=48"},
			{"llm's parent", llm.Parent, prefix + "acme"},
			// globex: "h100: 0" forbids the type: a limit of 0, not no limit.
			{"globex's H100s", tres(globex, "gres/gpu:h100"), prefix + "globex gres/gpu:h100=0"},
			{"globex's GPUs", tres(globex, "gres/gpu"), prefix + "globex gres/gpu=32"},
		} {
			if chk.got != chk.want {
				t.Errorf("%s: %s, want %s", chk.what, chk.got, chk.want)
			}
		}

		// train: "max_time: 7d", "preempt: [batch]", "preempt_mode: requeue".
		qos, err := c.QOS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(qos, func(q slurmrest.QOS) bool { return q.Name == prefix+"train" })
		if i < 0 {
			t.Fatalf("no QOS %strain", prefix)
		}
		if q := qos[i]; q.MaxWall != 7*24*time.Hour || !slices.Equal(q.Preempt, []string{prefix + "batch"}) || !slices.Contains(q.PreemptMode, "REQUEUE") {
			t.Errorf("QOS %s: MaxWall %v, Preempt %v, PreemptMode %v; want 168h0m0s, [%sbatch], REQUEUE", q.Name, q.MaxWall, q.Preempt, q.PreemptMode, prefix)
		}

		// carol's only project is vision ("a user's first project is their
		// default"); bob's default is llm ("default: true"); dave is a
		// viewer of llm: no association, so no Slurm user either.
		users, err := c.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defaults := map[string]string{}
		for _, u := range users {
			defaults[u.Name] = u.DefaultAccount
		}
		for user, want := range map[string]string{"carol": prefix + "acme-vision", "bob": prefix + "acme-llm", "erin": prefix + "globex-rl"} {
			if defaults[user] != want {
				t.Errorf("default account of %s: %q, want %q", user, defaults[user], want)
			}
		}
		for _, a := range assocs {
			if a.User == "dave" {
				t.Errorf("viewer dave has an association: %+v", a)
			}
		}
		if _, ok := defaults["dave"]; ok && !existed["dave"] {
			t.Errorf("viewer dave became a Slurm user")
		}
	})
}
