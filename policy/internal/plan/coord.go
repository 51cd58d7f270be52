package plan

import (
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
)

// The ops of changes that are not plain writes of an object.
const (
	OpAdd    = "add"    // a coordinator
	OpRemove = "remove" // a coordinator
	OpSkip   = "skip"   // a removal held back by running or pending jobs
	OpCancel = "cancel" // the jobs that hold a removal back (--force-busy)
)

// KindCoordinator is a coordinator of an account; KindJobs the jobs a
// cancel change stops.
const (
	KindCoordinator = "coordinator"
	KindJobs        = "jobs"
)

// Coordinator is a user who coordinates an account.
type Coordinator struct {
	Account, User string
}

// coordinatorAdds lists the tenant admins who are not yet coordinators of
// their tenant's account, after the users exist (slurmdbd keeps only
// coordinators it has a user record of). Only tenant accounts (under root)
// have coordinators in a policy; Slurm makes them coordinators of the
// project accounts below too.
func coordinatorAdds(want *compile.State, live map[string]slurmrest.Account) []Change {
	var out []Change
	for _, w := range want.Accounts {
		if w.Parent != "root" {
			continue
		}
		have := live[w.Name].Coordinators
		for _, u := range w.Coordinators {
			if !slices.Contains(have, u) {
				out = append(out, coordinatorChange(OpAdd, w.Name, u))
			}
		}
	}
	return out
}

// coordinatorRemovals lists, for prune, the direct coordinators of the
// marked tenant accounts that the policy no longer names. Accounts that
// go take their coordinators with them.
func coordinatorRemovals(want *compile.State, live map[string]slurmrest.Account) []Change {
	var out []Change
	for _, w := range want.Accounts {
		l, ok := live[w.Name]
		if w.Parent != "root" || !ok || !strings.EqualFold(l.Organization, compile.Marker) {
			continue
		}
		have := slices.Clone(l.Coordinators)
		slices.Sort(have)
		for _, u := range have {
			if !slices.Contains(w.Coordinators, u) {
				out = append(out, coordinatorChange(OpRemove, w.Name, u))
			}
		}
	}
	return out
}

func coordinatorChange(op, account, user string) Change {
	return Change{Op: op, Kind: KindCoordinator, Name: account + "/" + user, Coordinator: &Coordinator{Account: account, User: user}}
}
