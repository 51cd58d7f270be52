package slurmrest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Writes of many slurmdbd objects in one request each. slurmrestd applies
// the elements of one list request in one slurmdbd transaction: when
// slurmdbd refuses one element (a QOS preemption loop, a default QOS outside
// an association's QOS list, an unknown parent account), nothing of that
// request is kept, and the error does not say which element it was (seen on
// Slurm 24.11 and 26.05). A call below that makes several requests keeps
// the requests that succeeded before the one that failed.

// SetQOSList creates or updates several QOS in one request (an upsert, as
// SetQOS).
func (c *Client) SetQOSList(ctx context.Context, q []QOS) error {
	if len(q) == 0 {
		return nil
	}
	for _, x := range q {
		if x.Name == "" {
			return errors.New("set QOS: a QOS has no name")
		}
	}
	return c.be.setQOSList(c.ctx(ctx), q)
}

// SetAccounts creates or updates account records, with no association, in
// one request (POST /accounts): Name, Description and Organization. An
// account's record holds its coordinators too, and slurmdbd replaces them
// with the ones a write gives, here none: write only accounts that have no
// record yet, or whose coordinators should go. Give the accounts their
// associations with AddAccountAssociations.
func (c *Client) SetAccounts(ctx context.Context, a []AccountSpec) error {
	if len(a) == 0 {
		return nil
	}
	for _, x := range a {
		if x.Name == "" {
			return errors.New("set accounts: an account has no name")
		}
	}
	return c.be.setAccounts(c.ctx(ctx), a)
}

// AddAccountAssociations gives accounts whose records exist their
// association on cluster under their Parent ("" is root): one request
// (accounts_association) per distinct parent, parents in the order they
// first appear in a, so list a parent before its children. Only Name and
// Parent are used; set shares, QOS and limits with SetAssociations. An
// association that exists is left as it is. (An association for an account
// slurmdbd does not know, posted to SetAssociations, would be an orphan
// with no parent: create the records first.)
func (c *Client) AddAccountAssociations(ctx context.Context, cluster string, a []AccountSpec) error {
	if len(a) == 0 {
		return nil
	}
	if cluster == "" {
		return errors.New("add account associations: no cluster")
	}
	var parents []string
	byParent := map[string][]string{}
	for _, x := range a {
		if x.Name == "" {
			return errors.New("add account associations: an account has no name")
		}
		if _, ok := byParent[x.Parent]; !ok {
			parents = append(parents, x.Parent)
		}
		byParent[x.Parent] = append(byParent[x.Parent], x.Name)
	}
	ctx = c.ctx(ctx)
	for _, p := range parents {
		err := c.be.addAccountAssociations(ctx, cluster, p, byParent[p])
		if err != nil && !errors.Is(err, ErrExists) {
			return err
		}
	}
	return nil
}

// AddUsers creates user records with no association in one request (POST
// /users); users that exist are left as they are. Give them associations
// with SetAssociations (IsDefault marks the default one) afterwards:
// slurmdbd accepts an association for a user it does not know and keeps it
// with no user record.
func (c *Client) AddUsers(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		if n == "" {
			return errors.New("add users: a user has no name")
		}
	}
	return c.be.addUsers(c.ctx(ctx), names)
}

// SetDefaultAccounts sets the default account (Name and DefaultAccount of
// each User) of several users in one request; each must already have an
// association under that account.
func (c *Client) SetDefaultAccounts(ctx context.Context, u []User) error {
	if len(u) == 0 {
		return nil
	}
	for _, x := range u {
		if x.Name == "" || x.DefaultAccount == "" {
			return fmt.Errorf("set default accounts: user %q with default account %q", x.Name, x.DefaultAccount)
		}
	}
	return c.be.setDefaultAccounts(c.ctx(ctx), u)
}

// listOp names a write of a list for errors: "set QOS a", or "set QOS (3):
// a, b, c" with at most a few names.
func listOp[T any](verb string, in []T, name func(T) string) string {
	if len(in) == 1 {
		return verb + " " + name(in[0])
	}
	const shown = 3
	names := make([]string, 0, shown)
	for i := 0; i < len(in) && i < shown; i++ {
		names = append(names, name(in[i]))
	}
	more := ""
	if len(in) > shown {
		more = fmt.Sprintf(" and %d more", len(in)-shown)
	}
	return fmt.Sprintf("%s (%d): %s%s", verb, len(in), strings.Join(names, ", "), more)
}

func orRoot(parent string) string {
	if parent == "" {
		return "root"
	}
	return parent
}

// AssociationsOfAccounts lists the associations of accounts, perRequest
// accounts in a request and up to parallel requests at a time, in the order
// of accounts. On a large slurmdbd it is several times faster than one
// request for everything: slurmrestd's time grows faster than its answer
// (measured on Slurm 26.05 with 42,000 associations: 29 s in one request,
// 11 s in 8 requests one after another, 6 s with 4 at a time).
func (c *Client) AssociationsOfAccounts(ctx context.Context, accounts []string, perRequest, parallel int) ([]Association, error) {
	if perRequest < 1 || parallel < 1 {
		return nil, fmt.Errorf("list associations: %d accounts a request, %d at a time: give 1 or more", perRequest, parallel)
	}
	var chunks [][]string
	for i := 0; i < len(accounts); i += perRequest {
		chunks = append(chunks, accounts[i:min(i+perRequest, len(accounts))])
	}
	out := make([][]Association, len(chunks))
	errs := make([]error, len(chunks))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, ch := range chunks {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if out[i], errs[i] = c.Associations(ctx, AssociationFilter{Accounts: ch}); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []Association
	for _, o := range out {
		all = append(all, o...)
	}
	return all, nil
}
