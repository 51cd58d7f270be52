package slurmrest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Coordinators through slurmrestd. There is no coordinator endpoint:
// POST /accounts sets an account's description, organization and its whole
// list of direct coordinators at once. Seen on Slurm 26.05 (v0.0.45 and
// v0.0.42) and 24.11 (v0.0.42), all alike:
//   - the list replaces the account's direct coordinators, and a post
//     without "coordinators" clears them (so every write of an account
//     record must carry its coordinators);
//   - a user slurmdbd does not know is dropped without an error or a
//     warning, so the write is read back;
//   - GET /accounts lists coordinators only with ?WithCoordinators=true
//     (an empty value lists none), inherited ones with direct=false.

// AddCoordinators makes users coordinators of account (adding to those it
// has). It reads the result back, and fails when slurmdbd did not keep one
// of them, which happens to a user it has no record of.
func (c *Client) AddCoordinators(ctx context.Context, account string, users ...string) error {
	return c.changeCoordinators(ctx, "add coordinators to "+account, account, users, nil)
}

// RemoveCoordinators takes users off the coordinators of account; users
// who are not coordinators of it are ignored.
func (c *Client) RemoveCoordinators(ctx context.Context, account string, users ...string) error {
	return c.changeCoordinators(ctx, "remove coordinators from "+account, account, nil, users)
}

func (c *Client) changeCoordinators(ctx context.Context, op, account string, add, remove []string) error {
	for _, u := range append(slices.Clone(add), remove...) {
		if u == "" {
			return fmt.Errorf("%s: empty user name", op)
		}
	}
	ctx = c.ctx(ctx)
	a, err := c.account(ctx, op, account)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, u := range a.Coordinators {
		want[u] = true
	}
	for _, u := range add {
		want[u] = true
	}
	for _, u := range remove {
		delete(want, u)
	}
	list := make([]string, 0, len(want))
	for u := range want {
		list = append(list, u)
	}
	sort.Strings(list)
	if err := c.be.setCoordinators(ctx, a, list); err != nil {
		return err
	}
	after, err := c.account(ctx, op+": read back", account)
	if err != nil {
		return err
	}
	got := slices.Clone(after.Coordinators)
	sort.Strings(got)
	if !slices.Equal(got, list) {
		var missing []string
		for _, u := range list {
			if !slices.Contains(got, u) {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s: slurmdbd did not keep %s (it drops users it has no record of without an error): "+
				"a coordinator must be a Slurm user, with an association somewhere: %w",
				op, strings.Join(missing, ", "), ErrNotFound)
		}
		return fmt.Errorf("%s: coordinators are %s after the write, want %s", op, strings.Join(got, ","), strings.Join(list, ","))
	}
	return nil
}

// account reads one account with its direct coordinators.
func (c *Client) account(ctx context.Context, op, name string) (Account, error) {
	all, err := c.be.accounts(ctx, true)
	if err != nil {
		return Account{}, err
	}
	for _, a := range all {
		if a.Name == name {
			return a, nil
		}
	}
	return Account{}, fmt.Errorf("%s: no account %s: %w", op, name, ErrNotFound)
}
