package apply

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

// DefaultBatchSize is the most changes one batch writes unless told
// otherwise: large enough that a policy of 40,000 associations takes a few
// hundred requests, small enough that one request stays well inside
// slurmrestd's and the client's time limits (500 users take 2-7 s).
const DefaultBatchSize = 500

// Batcher is a Slurm that also takes lists (*slurmrest.Client): each call
// is one request, or one per parent for AddAccountAssociations. A Slurm that is not a
// Batcher is written one change at a time.
type Batcher interface {
	Slurm
	SetQOSList(ctx context.Context, q []slurmrest.QOS) error
	SetAccounts(ctx context.Context, a []slurmrest.AccountSpec) error
	AddAccountAssociations(ctx context.Context, cluster string, a []slurmrest.AccountSpec) error
	AddUsers(ctx context.Context, names []string) error
	SetDefaultAccounts(ctx context.Context, u []slurmrest.User) error
}

// Kinds of batch: the changes one batch may hold. A change of no kind is
// written alone.
const (
	batchQOS           = "qos"            // QOS created or modified: POST /qos
	batchAccountCreate = "account-create" // POST /accounts, accounts_association per parent, POST /associations
	batchAccountModify = "account-modify" // POST /associations
	batchUsers         = "users"          // POST /users, POST /associations, and POST /users for moved defaults
)

// batchKind says which batch c can join, "" for none. A user's association
// changes follow the user's own change in the plan, so users and
// associations share one kind: a batch creates the users first, then every
// association in one request.
func batchKind(c plan.Change) string {
	switch {
	case c.Kind == "qos" && (c.Op == "create" || c.Op == "modify"):
		return batchQOS
	case c.Kind == "account" && c.Op == "create":
		return batchAccountCreate
	case c.Kind == "account" && c.Op == "modify":
		return batchAccountModify
	case c.Kind == "user" && (c.Op == "create" || c.Op == "modify") && !c.DefaultOnly && c.User != nil,
		c.Kind == "association" && c.Op == "modify" && c.Assoc != nil:
		return batchUsers
	}
	return ""
}

// fits reports whether c may join batch b of at most size changes.
func fits(b []plan.Change, c plan.Change, size int) bool {
	if len(b) == 0 {
		return true
	}
	k := batchKind(c)
	if k == "" || len(b) >= size || batchKind(b[0]) != k {
		return false
	}
	if k == batchQOS && c.QOS != nil {
		// slurmrestd resolves a preempted QOS's name before it writes
		// anything: one the same request creates is unknown.
		for _, p := range b {
			if p.Op == "create" && slices.Contains(c.QOS.Preempt, p.Name) {
				return false
			}
		}
	}
	return true
}

// batches cuts the plan into batches, in order: maximal runs of
// consecutive changes of one kind, at most size each; a change of no kind
// is a batch of its own.
func batches(changes []plan.Change, size int) [][]plan.Change {
	if size < 1 {
		size = 1
	}
	var out [][]plan.Change
	var cur []plan.Change
	for _, c := range changes {
		if !fits(cur, c, size) {
			out, cur = append(out, cur), nil
		}
		cur = append(cur, c)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// ApplyBatched runs the changes in order, at most size in one batch (1:
// one change at a time; 0: DefaultBatchSize), and stops at the first
// failure. A batch whose write fails is written again one change at a
// time, so the change that fails is the one reported and every change
// before it is applied: slurmdbd keeps nothing of a list request it
// refuses, but a batch of several requests keeps the requests before the
// failed one, and its error does not say which change was at fault.
func ApplyBatched(ctx context.Context, s Slurm, cluster string, changes []plan.Change, size int, log *slog.Logger) Result {
	return ApplyWith(ctx, s, cluster, changes, Options{BatchSize: size}, log)
}

// Options say how ApplyWith writes.
type Options struct {
	// BatchSize is the most changes in one batch (0: DefaultBatchSize; 1:
	// one change at a time, and no loads).
	BatchSize int
	// Loader, when set, writes each run of at least LoadMin (0:
	// DefaultLoadMin) consecutive changes that create accounts and users
	// slurmdbd has no trace of with one `sacctmgr load`.
	Loader  Loader
	LoadMin int
}

// ApplyWith is ApplyBatched with loads: a run of new accounts and users
// (see loadable) goes to slurmdbd in one load, which keeps all of it or,
// when it fails, nothing; then the run is written in batches as without a
// Loader, so a failure stops at the change at fault as always and Applied
// stays a prefix of the plan.
func ApplyWith(ctx context.Context, s Slurm, cluster string, changes []plan.Change, opt Options, log *slog.Logger) Result {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	size := opt.BatchSize
	if size == 0 {
		size = DefaultBatchSize
	}
	b, ok := s.(Batcher)
	if !ok {
		size = 1
	}
	loadMin := opt.LoadMin
	if loadMin < 1 {
		loadMin = DefaultLoadMin
	}
	var res Result
	for i := 0; i < len(changes); {
		n := 0
		if opt.Loader != nil && size > 1 {
			n = loadRun(changes[i:])
		}
		if n >= loadMin {
			run := changes[i : i+n]
			if done := applyLoad(ctx, opt.Loader, cluster, run, &res, log); done < n {
				left := run[done:]
				if ctx.Err() != nil {
					res.Failed, res.Err = &left[0], fmt.Errorf("load of %d changes from %s: %w", len(left), left[0].Name, ctx.Err())
					return res
				}
				if !applyBatches(ctx, s, b, cluster, left, size, &res, log) {
					return res
				}
			}
			i += n
			continue
		}
		// No run long enough starts at i, nor inside the n changes after
		// it (a run from there ends where this one does, or before).
		j := i + max(n, 1)
		if opt.Loader == nil || size == 1 {
			j = len(changes)
		}
		for j < len(changes) {
			m := loadRun(changes[j:])
			if m >= loadMin {
				break
			}
			j += max(m, 1)
		}
		if j > len(changes) {
			j = len(changes)
		}
		if !applyBatches(ctx, s, b, cluster, changes[i:j], size, &res, log) {
			return res
		}
		i = j
	}
	return res
}

// applyBatches writes the changes in batches of at most size; false when
// one failed (res says which).
func applyBatches(ctx context.Context, s Slurm, b Batcher, cluster string, changes []plan.Change, size int, res *Result, log *slog.Logger) bool {
	for _, batch := range batches(changes, size) {
		res.Batches++
		if len(batch) > 1 {
			err := writeBatch(ctx, b, cluster, batch)
			if err == nil {
				log.Info("policy batch applied", "kind", batchKind(batch[0]), "changes", len(batch),
					"first", batch[0].Name, "last", batch[len(batch)-1].Name)
				res.Applied = append(res.Applied, batch...)
				continue
			}
			if ctx.Err() != nil {
				res.Failed, res.Err = &batch[0], fmt.Errorf("%s batch of %d changes from %s: %w", batchKind(batch[0]), len(batch), batch[0].Name, err)
				return false
			}
			log.Warn("policy batch failed: writing its changes one at a time", "kind", batchKind(batch[0]),
				"changes", len(batch), "first", batch[0].Name, "error", err)
			res.Retried += len(batch)
		}
		for _, c := range batch {
			if !applyOne(ctx, s, cluster, c, res, log) {
				return false
			}
		}
	}
	return true
}

// writeBatch writes a batch of one kind (see batchKind).
func writeBatch(ctx context.Context, b Batcher, cluster string, batch []plan.Change) error {
	w, err := writesOf(cluster, batch)
	if err != nil {
		return err
	}
	steps := []struct {
		n  int
		do func() error
	}{
		{len(w.QOS), func() error { return b.SetQOSList(ctx, w.QOS) }},
		{len(w.QOS), func() error { return clearPreempts(ctx, b, batch) }}, // what REST cannot write (qos.go)
		{len(w.Records), func() error { return b.SetAccounts(ctx, w.Records) }},
		{len(w.Accounts), func() error { return b.AddAccountAssociations(ctx, cluster, w.Accounts) }},
		{len(w.Users), func() error { return b.AddUsers(ctx, w.Users) }},
		{len(w.Assocs), func() error { return b.SetAssociations(ctx, w.Assocs) }},
		{len(w.Defaults), func() error { return b.SetDefaultAccounts(ctx, w.Defaults) }},
	}
	for _, s := range steps {
		if s.n == 0 {
			continue
		}
		if err := s.do(); err != nil {
			return err
		}
	}
	return nil
}

// writes are the list requests of one batch, made in the order of the
// fields (an empty list makes no request): QOS; account records; the
// accounts' associations under their parents; user records; the
// associations' settings, new user associations included; users' default
// accounts.
type writes struct {
	QOS      []slurmrest.QOS
	Records  []slurmrest.AccountSpec // only accounts with no record: a record write drops coordinators
	Accounts []slurmrest.AccountSpec
	Users    []string
	Assocs   []slurmrest.Association
	Defaults []slurmrest.User
}

// writesOf says what a batch of one kind writes.
//
// A batch of users writes the new users' records, then every association
// the batch adds or changes in one request (a user's new association and
// its limit change are one element), then the defaults that move to an
// association that already existed: an existing association's default
// flag is not posted, as a post that leaves out its other limits would
// clear them.
func writesOf(cluster string, batch []plan.Change) (writes, error) {
	var w writes
	switch batchKind(batch[0]) {
	case batchQOS:
		for _, c := range batch {
			w.QOS = append(w.QOS, qosOf(c.QOS))
		}
	case batchAccountCreate:
		for _, c := range batch {
			a := c.Account
			spec := slurmrest.AccountSpec{Name: a.Name, Parent: a.Parent, Description: a.Description, Organization: compile.Marker}
			if !c.HasRecord {
				w.Records = append(w.Records, spec)
			}
			w.Accounts = append(w.Accounts, spec)
			w.Assocs = append(w.Assocs, accountAssoc(cluster, a))
		}
	case batchAccountModify:
		for _, c := range batch {
			w.Assocs = append(w.Assocs, accountAssoc(cluster, c.Account))
		}
	case batchUsers:
		at := map[string]int{} // account/user → index in w.Assocs
		put := func(a slurmrest.Association) {
			k := a.Account + "/" + a.User
			i, ok := at[k]
			if !ok {
				at[k] = len(w.Assocs)
				w.Assocs = append(w.Assocs, a)
				return
			}
			w.Assocs[i].GrpTRES = a.GrpTRES // a limit change of an association the batch creates
		}
		for _, c := range batch {
			if c.Kind == "association" {
				put(*c.Assoc)
				continue
			}
			u := c.User
			if c.Op == "create" {
				w.Users = append(w.Users, u.Name)
			}
			added := newAccounts(c)
			for _, acct := range added {
				a := slurmrest.Association{Cluster: cluster, Account: acct, User: u.Name, IsDefault: acct == u.DefaultAccount}
				if n := u.Accounts[acct]; n != 0 {
					a.GrpTRES = slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: n}}
				}
				put(a)
			}
			if hasField(c, "default_account") && !slices.Contains(added, u.DefaultAccount) {
				w.Defaults = append(w.Defaults, slurmrest.User{Name: u.Name, DefaultAccount: u.DefaultAccount})
			}
		}
	default:
		return w, fmt.Errorf("no batch for %s %s", batch[0].Op, batch[0].Kind)
	}
	return w, nil
}

// newAccounts are the accounts a user change adds the user under: the
// plan's list, or every account of a user the change creates.
func newAccounts(c plan.Change) []string {
	if c.NewAccounts != nil || c.Op != "create" {
		return c.NewAccounts
	}
	out := make([]string, 0, len(c.User.Accounts))
	for a := range c.User.Accounts {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func hasField(c plan.Change, name string) bool {
	for _, f := range c.Fields {
		if f.Name == name {
			return true
		}
	}
	return false
}
