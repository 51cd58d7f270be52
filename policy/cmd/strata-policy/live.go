package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/plan"
	"github.com/strata-hpc/strata/policy/internal/sacctmgr"
)

// The ways to read the associations (--read-with).
const (
	readAuto     = "auto"
	readSacctmgr = "sacctmgr"
	readREST     = "rest"
)

// liveReader reads what plan compares: QOS and accounts with their
// coordinators through slurmrestd, the associations through sacctmgr or
// slurmrestd, and the jobs for prune (removals must not take running or
// pending jobs with them).
//
// On a slurmdbd with 42,000 associations slurmrestd takes 7 s to list
// them on an idle 2-CPU machine (20 s and more under load), sacctmgr 3 s:
// see policy/README.md, "Reads".
// Through slurmrestd they are read in requests of assocAccounts accounts,
// assocReads at a time. The users come from the associations (a user's
// default is the association marked default) rather than from a read of
// their own.
type liveReader struct {
	rest     *slurmrest.Client
	sacctmgr *sacctmgr.Command // nil: read through slurmrestd
	// fallback: when sacctmgr fails, say so and read through slurmrestd
	// (--read-with auto).
	fallback bool
	log      *slog.Logger
}

// newLiveReader picks the way to read associations for --read-with mode.
func newLiveReader(rest *slurmrest.Client, sm *sacctmgr.Command, mode string, log *slog.Logger) (*liveReader, error) {
	r := &liveReader{rest: rest, log: log}
	switch mode {
	case readREST:
	case readSacctmgr:
		r.sacctmgr = sm
	case readAuto:
		path, err := exec.LookPath(sm.Path)
		if err != nil {
			log.Info("reading associations through slurmrestd: no sacctmgr found", "sacctmgr", sm.Path, "error", err)
			break
		}
		log.Debug("reading associations through sacctmgr", "path", path)
		r.sacctmgr, r.fallback = sm, true
	default:
		return nil, fmt.Errorf("--read-with %q: give %s, %s or %s", mode, readAuto, readSacctmgr, readREST)
	}
	return r, nil
}

// read reads the live state; jobs too when jobs is set.
func (r *liveReader) read(ctx context.Context, cluster string, jobs bool) (plan.Live, error) {
	var l plan.Live
	viaREST := r.sacctmgr == nil
	reads := []func() error{
		func() (err error) { l.QOS, err = r.rest.QOS(ctx); return err },
		func() (err error) { l.Accounts, err = r.rest.AccountsWithCoordinators(ctx); return err },
	}
	if !viaREST {
		reads = append(reads, func() error {
			start := time.Now()
			list, err := r.sacctmgr.Associations(ctx)
			if err == nil && !hasRoot(list, cluster) {
				err = fmt.Errorf("sacctmgr lists no association of account root on cluster %s: its slurm.conf may name another slurmdbd than --url", cluster)
			}
			if err != nil && r.fallback && ctx.Err() == nil {
				r.log.Warn("could not read the associations through sacctmgr; reading them through slurmrestd, which is slower on a large slurmdbd "+
					"(--read-with rest skips sacctmgr, --read-with sacctmgr makes this an error)", "error", err)
				viaREST = true
				return nil
			}
			l.Associations = list
			r.log.Debug("read associations through sacctmgr", "count", len(list), "took", time.Since(start))
			return err
		})
	}
	if jobs {
		reads = append(reads, func() error {
			list, err := r.rest.Jobs(ctx, time.Time{})
			l.Jobs = list.Jobs
			return err
		})
	}
	if err := parallel(reads); err != nil {
		return l, err
	}
	if viaREST {
		// Through slurmrestd, after the accounts: it asks by account.
		names := make([]string, 0, len(l.Accounts))
		for _, a := range l.Accounts {
			names = append(names, a.Name)
		}
		start := time.Now()
		var err error
		if l.Associations, err = r.rest.AssociationsOfAccounts(ctx, names, assocAccounts, assocReads); err != nil {
			return l, err
		}
		r.log.Debug("read associations through slurmrestd", "count", len(l.Associations), "took", time.Since(start))
	}
	l.Users = usersOf(l.Associations, cluster)
	return l, nil
}

// hasRoot says whether the associations hold the root account's own
// association on cluster, which every slurmdbd that serves it has.
func hasRoot(list []slurmrest.Association, cluster string) bool {
	for _, a := range list {
		if a.Cluster == cluster && a.Account == "root" && a.User == "" && a.Partition == "" {
			return true
		}
	}
	return false
}

// How read reads the associations through slurmrestd: accounts per request, requests at
// a time. Measured on Slurm 26.05 with 2,200 accounts and 42,000
// associations on 2 CPUs: 8 requests, 4 at a time, took 6 s; 16, 4 at a
// time, 8 s; one request for all, 29 s.
const (
	assocAccounts = 256
	assocReads    = 4
)

// parallel runs the reads side by side and returns all their errors.
func parallel(reads []func() error) error {
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() { errs[i] = r() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// usersOf lists the users that have an association, sorted, each with
// the account of its default association on cluster. A user record with
// no association at all is not listed: plan then calls the user's change
// a create, and apply's write of the record leaves a record that exists
// as it is.
func usersOf(assocs []slurmrest.Association, cluster string) []slurmrest.User {
	byName := map[string]*slurmrest.User{}
	for _, a := range assocs {
		if a.User == "" {
			continue
		}
		u := byName[a.User]
		if u == nil {
			u = &slurmrest.User{Name: a.User}
			byName[a.User] = u
		}
		if a.IsDefault && a.Cluster == cluster && a.Partition == "" {
			u.DefaultAccount = a.Account
		}
	}
	out := make([]slurmrest.User, 0, len(byName))
	for _, u := range byName {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
