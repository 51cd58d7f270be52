// Package apply carries out a plan through slurmrestd in plan order, in
// batches of consecutive changes that one list request can write (or one
// change at a time), stops at the first failed write, and reports exactly
// what was applied, so a re-run converges.
package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

// Slurm is what apply writes through (*slurmrest.Client).
type Slurm interface {
	SetQOS(ctx context.Context, q slurmrest.QOS) error
	DeleteQOS(ctx context.Context, name string) error
	CreateAccount(ctx context.Context, cluster string, a slurmrest.AccountSpec) error
	DeleteAccount(ctx context.Context, name string) error
	SetAssociations(ctx context.Context, a []slurmrest.Association) error
	DeleteAssociation(ctx context.Context, cluster, account, user string) error
	AddUser(ctx context.Context, cluster string, u slurmrest.UserSpec) error
	SetDefaultAccount(ctx context.Context, user, account string) error
	DeleteUser(ctx context.Context, name string) error
}

// Result says what was applied.
type Result struct {
	// Applied are the changes made, a prefix of the plan.
	Applied []plan.Change
	// Failed is the change whose write failed (nil when all were made).
	Failed *plan.Change
	Err    error
	// Batches counts the writes: batches and changes written alone.
	Batches int
	// Retried counts the changes of failed batches written again one at a
	// time.
	Retried int
	// Loads counts the writes that were sacctmgr loads (in Batches too).
	Loads int
}

// Apply runs the changes in order, in batches of DefaultBatchSize, and
// stops at the first failure.
func Apply(ctx context.Context, s Slurm, cluster string, changes []plan.Change, log *slog.Logger) Result {
	return ApplyBatched(ctx, s, cluster, changes, DefaultBatchSize, log)
}

// applyOne writes one change and records it in res; false when it failed.
func applyOne(ctx context.Context, s Slurm, cluster string, c plan.Change, res *Result, log *slog.Logger) bool {
	if err := one(ctx, s, cluster, c); err != nil {
		res.Failed, res.Err = &c, fmt.Errorf("%s %s %s: %w", c.Op, c.Kind, c.Name, err)
		log.Error("policy change failed: stopping", "op", c.Op, "kind", c.Kind, "name", c.Name, "error", err)
		return false
	}
	log.Info("policy change applied", "op", c.Op, "kind", c.Kind, "name", c.Name, "fields", len(c.Fields))
	res.Applied = append(res.Applied, c)
	return true
}

func tres(t compile.TRES, clear map[string]bool) slurmrest.TRESList {
	var out slurmrest.TRESList
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	for k := range clear {
		if _, ok := t[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		typ, name, _ := cut(k)
		n, ok := t[k]
		if !ok {
			n = -1 // slurmdbd clears a limit set to -1
		}
		out = append(out, slurmrest.TRES{Type: typ, Name: name, Count: n})
	}
	if out == nil {
		out = slurmrest.TRESList{}
	}
	return out
}

func cut(k string) (string, string, bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return k, "", false
}

// knownTRES are the limits Strata manages; a limit the policy drops is
// cleared (-1) so the live state converges.
var knownTRES = map[string]bool{"gres/gpu": true, "cpu": true, "mem": true}

func one(ctx context.Context, s Slurm, cluster string, c plan.Change) error {
	if c.Op == "delete" && len(c.Busy) > 0 { // after a cancel of its jobs (busy.go)
		c2 := c
		c2.Busy = nil
		return removeBusy(ctx, c, func() error { return one(ctx, s, cluster, c2) })
	}
	switch {
	case c.Kind == plan.KindCoordinator:
		return coordinator(ctx, s, c)
	case c.Kind == plan.KindJobs && c.Op == plan.OpCancel:
		return cancelJobs(ctx, s, c)
	case c.Kind == "qos" && c.Op != "delete":
		return setQOS(ctx, s, c)
	case c.Kind == "qos":
		return s.DeleteQOS(ctx, c.Name)
	case c.Kind == "account" && c.Op == "create":
		a := c.Account
		err := s.CreateAccount(ctx, cluster, slurmrest.AccountSpec{Name: a.Name, Parent: a.Parent, Description: a.Description,
			Organization: compile.Marker, Fairshare: a.Fairshare, QOS: a.QOS, DefaultQOS: a.DefaultQOS, GrpTRES: tres(a.GrpTRES, nil)})
		if err != nil && !errors.Is(err, slurmrest.ErrExists) {
			return err
		}
		return setAccount(ctx, s, cluster, a) // limits the create does not take (GrpTRESMins), and an existing account's fields
	case c.Kind == "account" && c.Op == "modify":
		return setAccount(ctx, s, cluster, c.Account)
	case c.Kind == "account":
		return s.DeleteAccount(ctx, c.Name)
	case c.Kind == "user" && c.Op == "delete":
		return s.DeleteUser(ctx, c.Name)
	case c.Kind == "user" && (c.DefaultOnly || c.Op == "modify" && !hasField(c, "accounts")):
		// Only the default moves: users_association would answer 304 for
		// associations that all exist.
		return s.SetDefaultAccount(ctx, c.Name, c.User.DefaultAccount)
	case c.Kind == "user":
		u := c.User
		accts := make([]string, 0, len(u.Accounts))
		for a := range u.Accounts {
			accts = append(accts, a)
		}
		sort.Strings(accts)
		return s.AddUser(ctx, cluster, slurmrest.UserSpec{Name: u.Name, Accounts: accts, DefaultAccount: u.DefaultAccount})
	case c.Kind == "association" && c.Op == "delete":
		return s.DeleteAssociation(ctx, cluster, c.Assoc.Account, c.Assoc.User)
	case c.Kind == "association":
		return s.SetAssociations(ctx, []slurmrest.Association{*c.Assoc})
	}
	return fmt.Errorf("unknown change %s %s", c.Op, c.Kind)
}

func setAccount(ctx context.Context, s Slurm, cluster string, a *compile.Account) error {
	return s.SetAssociations(ctx, []slurmrest.Association{accountAssoc(cluster, a)})
}

// qosOf is what Strata writes for a class's QOS, alone or in a batch.
func qosOf(q *compile.QOS) slurmrest.QOS {
	return slurmrest.QOS{Name: q.Name, Description: q.Description, Priority: &q.Priority, MaxWall: q.MaxWall,
		MaxTRESPerJob: tres(q.MaxTRESPerJob, map[string]bool{"gres/gpu": true}), Preempt: q.Preempt, PreemptMode: preemptMode(q.PreemptMode)}
}

// accountAssoc is what Strata writes on an account's association, alone or
// in a batch. slurmdbd clears the TRES limits a write leaves out, so it
// carries every limit the account keeps.
func accountAssoc(cluster string, a *compile.Account) slurmrest.Association {
	return slurmrest.Association{Cluster: cluster, Account: a.Name, Parent: a.Parent, Fairshare: a.Fairshare,
		QOS: a.QOS, DefaultQOS: a.DefaultQOS, GrpTRES: tres(a.GrpTRES, knownTRES), GrpTRESMin: tres(a.GrpTRESMins, map[string]bool{"gres/gpu": true}),
		MaxJobs: orClear(a.GrpJobs), Priority: orClear(a.Priority)}
}
