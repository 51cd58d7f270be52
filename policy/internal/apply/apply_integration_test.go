//go:build integration

package apply

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
	"github.com/strata-hpc/strata/policy/internal/spec"
	"github.com/strata-hpc/strata/test/policygen"
)

// writeCounter counts the requests that are not reads.
type writeCounter struct{ n atomic.Int64 }

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestFailedBatch: a write fails in the middle of a batch. An admin
// removes the third of five tenants between the plan and its apply, so
// the batch that creates the 20 projects fails at its fourth request: the
// account records, the associations under tenants 1 and 2, then those
// under tenant 3, which slurmdbd refuses. apply then writes
// the batch's changes one at a time: the 8 projects of tenants 1 and 2
// are applied, it stops at tenant 3's first project and reports exactly
// those. After the failure a new plan converges, and then nothing is left
// to write.
func TestFailedBatch(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		writes := &writeCounter{}
		cfg := b.Config()
		cfg.HTTPClient = &http.Client{Timeout: time.Minute, Transport: writes}
		c, err := slurmrest.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := generatedState(t, b, c, policygen.Spec{Tenants: 5, Projects: 4, Members: 5, Seed: 2})
		tenants, projects := want.Accounts[:5], want.Accounts[5:]

		changes := plan.Make(want, live(t, c), plan.Options{})
		first := 3 + len(tenants) // QOS, then tenants
		if res := ApplyBatched(ctx, c, b.Cluster, changes[:first], DefaultBatchSize, nil); res.Err != nil {
			t.Fatalf("QOS and tenants: %v", res.Err)
		}
		changes = plan.Make(want, live(t, c), plan.Options{})
		if changes[0].Kind != "account" || changes[0].Name != projects[0].Name {
			t.Fatalf("the plan after the tenants starts with %s %s, want project %s", changes[0].Op, changes[0].Name, projects[0].Name)
		}
		if err := c.DeleteAccount(ctx, tenants[2].Name); err != nil {
			t.Fatal(err)
		}
		writes.n.Store(0)
		res := ApplyBatched(ctx, c, b.Cluster, changes, DefaultBatchSize, nil)

		var applied []string
		for _, ch := range res.Applied {
			applied = append(applied, ch.Name)
		}
		var wantApplied []string
		for _, p := range projects[:8] {
			wantApplied = append(wantApplied, p.Name)
		}
		if strings.Join(applied, " ") != strings.Join(wantApplied, " ") {
			t.Errorf("applied %v, want the projects of tenants 1 and 2: %v", applied, wantApplied)
		}
		if res.Failed == nil || res.Failed.Name != projects[8].Name || res.Err == nil {
			t.Fatalf("failed at %+v (%v), want %s, tenant 3's first project", res.Failed, res.Err, projects[8].Name)
		}
		if res.Retried != len(projects) {
			t.Errorf("%d changes written again one at a time, want the batch's %d", res.Retried, len(projects))
		}
		// The batch: records, associations under tenants 1, 2 and 3 (refused);
		// then one at a time: 2 requests for each of 8 projects (the
		// association, which exists: 304; its settings) and the refused one.
		if n := writes.n.Load(); n != 4+8*2+1 {
			t.Errorf("%d write requests, want 21", n)
		}
		l := live(t, c)
		settled := map[string]bool{}
		for _, a := range l.Associations {
			for _, p := range projects {
				if a.User == "" && a.Account == p.Name && a.Fairshare == p.Fairshare && a.DefaultQOS == p.DefaultQOS {
					settled[p.Name] = true
				}
			}
		}
		for i, p := range projects {
			if settled[p.Name] != (i < 8) {
				t.Errorf("project %s has its policy settings: %v, want %v", p.Name, settled[p.Name], i < 8)
			}
		}

		// The next plan puts tenant 3 back and finishes the rest.
		changes = plan.Make(want, l, plan.Options{})
		if res := ApplyBatched(ctx, c, b.Cluster, changes, DefaultBatchSize, nil); res.Err != nil || len(res.Applied) != len(changes) {
			t.Fatalf("apply after the failure: %d of %d applied: %v", len(res.Applied), len(changes), res.Err)
		}
		if left := plan.Make(want, live(t, c), plan.Options{}); len(left) != 0 {
			t.Errorf("after converging, %d changes left, first: %s", len(left), left[0])
		}
	})
}

// generatedState compiles a generated policy with names no other test
// uses, and removes what applying it made when the test ends.
func generatedState(t *testing.T, b *testbed.Bed, c *slurmrest.Client, s policygen.Spec) *compile.State {
	t.Helper()
	s.Cluster, s.Partition, s.Prefix = b.Cluster, b.Partition, testbed.Unique("pf")
	var buf bytes.Buffer
	if _, err := policygen.Write(&buf, s); err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse("generated.yaml", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want, err := compile.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := testbed.Context(t)
		for _, u := range want.Users {
			_ = c.DeleteUser(ctx, u.Name)
		}
		for i := len(want.Accounts) - 1; i >= 0; i-- {
			_ = c.DeleteAccount(ctx, want.Accounts[i].Name)
		}
		for _, q := range want.QOS {
			_ = c.DeleteQOS(ctx, q.Name)
		}
	})
	return want
}

// live reads what plan compares.
func live(t *testing.T, c *slurmrest.Client) plan.Live {
	t.Helper()
	ctx := testbed.Context(t)
	var l plan.Live
	var err error
	if l.QOS, err = c.QOS(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Accounts, err = c.Accounts(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Associations, err = c.Associations(ctx, slurmrest.AssociationFilter{}); err != nil {
		t.Fatal(err)
	}
	if l.Users, err = c.Users(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}
