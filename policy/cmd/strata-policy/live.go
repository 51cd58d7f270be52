package main

import (
	"errors"
	"sort"
	"sync"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// How readLive reads the associations: accounts per request, requests at
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
