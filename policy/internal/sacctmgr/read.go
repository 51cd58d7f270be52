package sacctmgr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Reading every association of a large slurmdbd through slurmrestd is
// slow: on Slurm 26.05 with 42,000 associations it writes 98 MB of JSON.
// sacctmgr's parsable listing is faster, and faster still without "parent
// info": slurmdbd then skips working out, for every association, what it
// inherits from the ones above it (2.1 s instead of 4 s for 42,000). So
// Associations makes three listings side by side (2.5 to 2.9 s in all):
//
//   - every association without parent info: each row's own values;
//   - the account associations (user ""), with parent info: their parent
//     account and what they inherit, as slurmrestd shows them (0.2 s);
//   - the users' default associations ("onlydefaults"; the association
//     listing does not mark them, and the user listing, which shows the
//     default account, takes 17 s for 35,000 users).
//
// and fills in what each user association inherits from its account's
// association, as slurmdbd does: the QOS list, default QOS, priority, and
// each per-job TRES limit it does not set itself. The result is what
// slurmrestd's GET .../associations returns; an integration test reads one
// slurmdbd both ways and compares. One difference is known: a QOS list
// changed with += or -= on a user association (one that has no list of its
// own) reads differently: without parent info slurmdbd applies the change
// to an empty list, so "+=q" reads as q alone, and "-=q" as the account's
// whole list; strata-policy compares only the GPU limit of user
// associations. And IsDefault is set on user associations only (Slurm
// 24.11's slurmrestd marks every account association default, 26.05's
// none).

// assocFields are the association fields read, in the order of
// sacctmgr's format= option and of its output.
var assocFields = []string{"Cluster", "Account", "User", "Partition", "ParentName", "Fairshare",
	"QOS", "DefaultQOS", "GrpTRES", "GrpTRESMins", "MaxTRES", "GrpJobs", "Priority"}

// defaultFields are the fields of the default associations' listing.
var defaultFields = []string{"Cluster", "Account", "User", "Partition"}

// fairshareParent is the raw share of an association whose Fairshare is
// "parent" (SLURMDB_FS_USE_PARENT), as slurmrestd reports it.
const fairshareParent = math.MaxInt32

// assocKey names an association.
type assocKey struct{ cluster, account, user, partition string }

// readTimeout bounds the listings: 42,000 associations take seconds.
const readTimeout = 2 * time.Minute

// Associations lists every association, as slurmrestd's
// GET /slurmdb/.../associations does (see above). The first listing that
// fails stops the others.
func (s *Command) Associations(ctx context.Context) ([]slurmrest.Association, error) {
	format := "format=" + strings.Join(assocFields, ",")
	listings := [][]string{
		{"-n", "-P", "show", "associations", "wopinfo", format},
		{"-n", "-P", "show", "associations", "where", "users=", format},
		{"-n", "-P", "show", "associations", "onlydefaults", "wopinfo", "format=" + strings.Join(defaultFields, ",")},
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	outs := make([][]byte, len(listings))
	var (
		first error // the cause, not the listings it stopped
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	for i, args := range listings {
		wg.Go(func() {
			out, err := s.run(ctx, args...)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
			outs[i] = out
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	listing := func(i int, err error) error {
		return fmt.Errorf("sacctmgr %s: %w", strings.Join(listings[i][2:], " "), err)
	}
	all, err := ParseAssociations(outs[0])
	if err != nil {
		return nil, listing(0, err)
	}
	accounts, err := ParseAssociations(outs[1])
	if err != nil {
		return nil, listing(1, err)
	}
	defaults, err := ParseDefaults(outs[2])
	if err != nil {
		return nil, listing(2, err)
	}
	return Resolve(all, accounts, defaults)
}

// Resolve makes the listing of every association without parent info
// into slurmrestd's view: account associations as the listing of
// account associations with parent info shows them, user associations
// with what they inherit from their account's, and IsDefault set on the
// users' default associations.
//
// slurmdbd also passes MaxJobs, MaxSubmitJobs, MaxWall, MaxTRESPerNode and
// MaxTRESMins down the tree: a field of these added to
// slurmrest.Association needs its rule here too.
func Resolve(all, accounts []slurmrest.Association, defaults map[assocKey]bool) ([]slurmrest.Association, error) {
	if len(all) == 0 || len(accounts) == 0 {
		// slurmdbd always has root's association: an empty listing is not
		// an empty slurmdbd.
		return nil, errors.New("sacctmgr listed no associations, not even root's")
	}
	acct := make(map[assocKey]slurmrest.Association, len(accounts))
	for _, a := range accounts {
		if a.User != "" {
			return nil, fmt.Errorf("sacctmgr listed user association %s/%s among the account associations", a.Account, a.User)
		}
		acct[assocKey{a.Cluster, a.Account, "", a.Partition}] = a
	}
	out := make([]slurmrest.Association, 0, len(all))
	for _, a := range all {
		k := assocKey{a.Cluster, a.Account, a.User, a.Partition}
		if a.User == "" {
			full, ok := acct[k]
			if !ok {
				return nil, fmt.Errorf("account association %s on %s is in one sacctmgr listing and not the other: slurmdbd changed while it was read; run again", a.Account, a.Cluster)
			}
			out = append(out, full)
			continue
		}
		p, ok := acct[assocKey{a.Cluster, a.Account, "", ""}]
		if !ok {
			return nil, fmt.Errorf("user association %s/%s on %s: no association of account %s: slurmdbd changed while it was read; run again", a.Account, a.User, a.Cluster, a.Account)
		}
		if len(a.QOS) == 0 {
			a.QOS = slices.Clone(p.QOS)
		}
		if a.DefaultQOS == "" {
			a.DefaultQOS = p.DefaultQOS
		}
		if a.Priority == nil && p.Priority != nil {
			a.Priority = new(*p.Priority)
		}
		a.MaxTRESJob = inheritTRES(a.MaxTRESJob, p.MaxTRESJob)
		a.IsDefault = defaults[k]
		out = append(out, a)
	}
	return out, nil
}

// inheritTRES adds to own each TRES of parent it does not have.
func inheritTRES(own, parent slurmrest.TRESList) slurmrest.TRESList {
	for _, t := range parent {
		if _, ok := own.Get(t.Key()); !ok {
			own = append(own, t)
		}
	}
	return own
}

// ParseAssociations parses `sacctmgr -n -P show associations
// format=<assocFields>`. An error names the line and the field.
func ParseAssociations(out []byte) ([]slurmrest.Association, error) {
	var list []slurmrest.Association
	err := eachLine(out, len(assocFields), func(f []string) error {
		a := slurmrest.Association{Cluster: f[0], Account: f[1], User: f[2], Partition: f[3], Parent: f[4], DefaultQOS: f[7]}
		if a.Account == "" {
			return fmt.Errorf("field Account is empty")
		}
		var err error
		if a.Fairshare, err = fairshare(f[5]); err != nil {
			return err
		}
		if f[6] != "" {
			a.QOS = strings.Split(f[6], ",")
		}
		for i, dst := range []*slurmrest.TRESList{&a.GrpTRES, &a.GrpTRESMin, &a.MaxTRESJob} {
			if *dst, err = slurmrest.ParseTRES(f[8+i]); err != nil {
				return fmt.Errorf("field %s: %w", assocFields[8+i], err)
			}
		}
		if a.MaxJobs, err = optInt(assocFields[11], f[11]); err != nil {
			return err
		}
		if a.Priority, err = optInt(assocFields[12], f[12]); err != nil {
			return err
		}
		list = append(list, a)
		return nil
	})
	return list, err
}

// ParseDefaults parses `sacctmgr -n -P show associations onlydefaults
// format=<defaultFields>`: the users' default associations.
func ParseDefaults(out []byte) (map[assocKey]bool, error) {
	m := map[assocKey]bool{}
	err := eachLine(out, len(defaultFields), func(f []string) error {
		if f[1] == "" || f[2] == "" {
			return fmt.Errorf("a default association needs an account and a user")
		}
		m[assocKey{f[0], f[1], f[2], f[3]}] = true
		return nil
	})
	return m, err
}

// eachLine splits sacctmgr's parsable output (-P: fields separated by
// "|", no trailing one) into lines of n fields.
func eachLine(out []byte, n int, f func([]string) error) error {
	for i, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fields := strings.Split(string(line), "|")
		if len(fields) != n {
			return fmt.Errorf("sacctmgr output, line %d: %d fields, want %d: %q", i+1, len(fields), n, line)
		}
		if err := f(fields); err != nil {
			return fmt.Errorf("sacctmgr output, line %d: %w: %q", i+1, err, line)
		}
	}
	return nil
}

func fairshare(s string) (int64, error) {
	switch s {
	case "parent":
		return fairshareParent, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field Fairshare %q: not a number or \"parent\"", s)
	}
	return n, nil
}

// optInt reads a limit that sacctmgr prints empty when it is not set.
func optInt(name, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("field %s %q: not a number", name, s)
	}
	return &n, nil
}
