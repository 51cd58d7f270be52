package apply

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

// Loader loads a sacctmgr flat file (*sacctmgr.Command): what slurmdbd
// lacks of it is added in one transaction, and a load that fails keeps
// nothing.
type Loader interface {
	Load(ctx context.Context, file []byte) error
	// LoadInOrder loads independent files side by side and commits them
	// in order: what it keeps is the first n.
	LoadInOrder(ctx context.Context, files [][]byte) (n int, err error)
}

// A run of new users is loaded in parts side by side, loadParts at most,
// of loadPartAssocs user associations or more each: sacctmgr's own time
// grows with the square of a file's lines, slurmdbd logs a load's
// associations in one INSERT that MariaDB refuses over max_allowed_packet
// (16 MiB by default, about 30,000 associations), and one load keeps one
// slurmdbd connection, and so about one CPU, busy. On the 2-CPU benchmark
// bed a first apply of 4,000 user associations took 5.8–8.4 s in 4
// parts, 6.6–6.9 s in 8 and 13.4–14.1 s in one load (sacctmgr load of
// the same file: 10.3–20.2 s); of 40,000, 91–98 s in 2, 4 or 8 parts.
const (
	loadPartAssocs = 1000
	loadParts      = 8
)

// DefaultLoadMin is the fewest changes a run of new accounts and users
// must have to be written by one `sacctmgr load` rather than in REST
// batches. On Slurm 26.05 slurmrestd makes a user record with one
// slurmdbd call per user, each scanning every association, and reads each
// association before it adds it; a load does neither, so a first apply
// of 42,000 objects takes minutes less (see the README's benchmark). Below
// a batch or so either way takes well under a second.
const DefaultLoadMin = DefaultBatchSize

// loadable says whether c can go into a load of the run before it:
// accounts slurmdbd has no trace of, users it has no trace of, and the
// limits of the associations such a user gets. created holds the users
// the run creates so far.
func loadable(c plan.Change, created map[string]bool) bool {
	switch {
	case c.Kind == "account" && c.Op == "create":
		return !c.HasRecord && c.Account != nil && flatSafe(c.Account.Name, c.Account.Parent, c.Account.Description)
	case c.Kind == "user" && c.Op == "create":
		return !c.DefaultOnly && c.User != nil && flatSafe(c.User.Name, c.User.DefaultAccount)
	case c.Kind == "association" && c.Op == "modify":
		return c.Assoc != nil && c.Assoc.User != "" && created[c.Assoc.User]
	}
	return false
}

// loadRun is the length of the run of loadable changes that starts the
// plan (0: none).
func loadRun(changes []plan.Change) int {
	created := map[string]bool{}
	for i, c := range changes {
		if !loadable(c, created) {
			return i
		}
		if c.Kind == "user" {
			created[c.Name] = true
		}
	}
	return len(changes)
}

// flatSafe says whether the values can be written in a flat file: its
// lines are split at ':' and values quoted with '.
func flatSafe(vals ...string) bool {
	for _, v := range vals {
		if strings.ContainsAny(v, "':\n\r\"") {
			return false
		}
	}
	return true
}

// loadChanges writes a run of loadable changes as one flat file.
func loadChanges(ctx context.Context, l Loader, cluster string, run []plan.Change) error {
	var accounts []*compile.Account
	var users []*compile.User
	for _, c := range run {
		switch c.Kind {
		case "account":
			accounts = append(accounts, c.Account)
		case "user":
			users = append(users, c.User)
		}
		// An association change carries a limit the user's own (compiled)
		// accounts already hold.
	}
	file, err := FlatFile(cluster, accounts, users)
	if err != nil {
		return err
	}
	return l.Load(ctx, file)
}

// FlatFile is the sacctmgr flat file (`sacctmgr load`, the format of
// `sacctmgr dump`) that creates the accounts, under their parents (listed
// before their children), and the users with their associations: the
// fields apply writes through slurmrestd, with the ownership mark. Each
// user's default association comes first, with its default account. It
// holds no QOS (a load cannot create them) and no coordinators.
func FlatFile(cluster string, accounts []*compile.Account, users []*compile.User) ([]byte, error) {
	var b bytes.Buffer
	if !flatSafe(cluster) {
		return nil, fmt.Errorf("flat file: cluster %q", cluster)
	}
	fmt.Fprintf(&b, "Cluster - '%s'\n", cluster)
	var parents []string
	byParent := map[string][]*compile.Account{}
	for _, a := range accounts {
		if !flatSafe(a.Name, a.Parent, a.Description, a.DefaultQOS) {
			return nil, fmt.Errorf("flat file: account %q has a value a flat file cannot hold", a.Name)
		}
		p := a.Parent
		if p == "" {
			p = "root"
		}
		if _, ok := byParent[p]; !ok {
			parents = append(parents, p)
		}
		byParent[p] = append(byParent[p], a)
	}
	for _, p := range parents {
		fmt.Fprintf(&b, "Parent - '%s'\n", p)
		for _, a := range byParent[p] {
			fmt.Fprintf(&b, "Account - '%s':Description='%s':Organization='%s':Fairshare=%d", a.Name, a.Description, compile.Marker, a.Fairshare)
			if a.Priority > 0 {
				fmt.Fprintf(&b, ":Priority=%d", a.Priority)
			}
			if len(a.QOS) > 0 {
				fmt.Fprintf(&b, ":QOS='%s'", strings.Join(a.QOS, ","))
			}
			if a.DefaultQOS != "" {
				fmt.Fprintf(&b, ":DefaultQOS='%s'", a.DefaultQOS)
			}
			if len(a.GrpTRES) > 0 {
				fmt.Fprintf(&b, ":GrpTRES=%s", a.GrpTRES)
			}
			if len(a.GrpTRESMins) > 0 {
				fmt.Fprintf(&b, ":GrpTRESMins=%s", a.GrpTRESMins)
			}
			if a.GrpJobs > 0 {
				fmt.Fprintf(&b, ":GrpJobs=%d", a.GrpJobs)
			}
			b.WriteByte('\n')
		}
	}
	// Users by account, accounts in the order they first appear: first
	// each user's association under its default account (a load takes a
	// new user's default from its first line), then its others.
	var accts []string
	members := map[string][]*compile.User{}
	add := func(a string, u *compile.User) {
		if _, ok := members[a]; !ok {
			accts = append(accts, a)
		}
		members[a] = append(members[a], u)
	}
	for _, u := range users {
		if !flatSafe(u.Name, u.DefaultAccount) {
			return nil, fmt.Errorf("flat file: user %q has a value a flat file cannot hold", u.Name)
		}
		if _, ok := u.Accounts[u.DefaultAccount]; !ok {
			return nil, fmt.Errorf("flat file: user %q: default account %q is none of its accounts", u.Name, u.DefaultAccount)
		}
		add(u.DefaultAccount, u)
	}
	writeUsers(&b, accts, members)
	accts, members = nil, map[string][]*compile.User{}
	for _, u := range users {
		names := make([]string, 0, len(u.Accounts))
		for a := range u.Accounts {
			if a != u.DefaultAccount {
				names = append(names, a)
			}
		}
		sort.Strings(names)
		for _, a := range names {
			if !flatSafe(a) {
				return nil, fmt.Errorf("flat file: account %q of user %q", a, u.Name)
			}
			add(a, u)
		}
	}
	writeUsers(&b, accts, members)
	return b.Bytes(), nil
}

// writeUsers writes the users' lines under each account, each with the
// user's default account (as `sacctmgr dump` does).
func writeUsers(b *bytes.Buffer, accts []string, members map[string][]*compile.User) {
	for _, a := range accts {
		fmt.Fprintf(b, "Parent - '%s'\n", a)
		for _, u := range members[a] {
			fmt.Fprintf(b, "User - '%s':DefaultAccount='%s'", u.Name, u.DefaultAccount)
			if n := u.Accounts[a]; n > 0 {
				b.WriteString(":GrpTRES=gres/gpu=" + strconv.FormatInt(n, 10))
			}
			b.WriteByte('\n')
		}
	}
}

// applyLoad writes a run of loadable changes and records them; false
// when a load failed. A load keeps nothing when it fails, and parts are
// committed in order, so what was applied is a prefix of the run: the
// caller writes the rest in batches, which finds the change at fault.
// A run of few user associations is one load; one of many loads its
// accounts first, then its users in parts side by side (see LoadInOrder).
func applyLoad(ctx context.Context, l Loader, cluster string, run []plan.Change, res *Result, log *slog.Logger) int {
	accounts, assocs := 0, 0
	for i, c := range run {
		switch {
		case c.Kind == "account" && accounts == i:
			accounts++
		case c.Kind == "user":
			assocs += len(c.User.Accounts)
		}
	}
	if loadPartsFor(assocs) < 2 {
		if err := loadChanges(ctx, l, cluster, run); err != nil {
			log.Warn("sacctmgr load failed, and kept nothing: writing its changes in batches", "changes", len(run),
				"first", run[0].Name, "error", err)
			return 0
		}
		log.Info("policy changes loaded", "changes", len(run), "first", run[0].Name, "last", run[len(run)-1].Name)
		res.Applied = append(res.Applied, run...)
		res.Batches++
		res.Loads++
		return len(run)
	}
	done := 0
	if accounts > 0 {
		if err := loadChanges(ctx, l, cluster, run[:accounts]); err != nil {
			log.Warn("sacctmgr load of the new accounts failed, and kept nothing: writing the run in batches", "changes", accounts, "error", err)
			return 0
		}
		log.Info("policy changes loaded", "changes", accounts, "first", run[0].Name, "last", run[accounts-1].Name)
		res.Applied = append(res.Applied, run[:accounts]...)
		res.Batches++
		res.Loads++
		done = accounts
	}
	rest := run[done:]
	bounds := splitUsers(rest)
	files := make([][]byte, len(bounds))
	for k, b := range bounds {
		var us []*compile.User
		for _, c := range rest[b[0]:b[1]] {
			if c.Kind == "user" {
				us = append(us, c.User)
			}
		}
		f, err := FlatFile(cluster, nil, us)
		if err != nil {
			log.Warn("no flat file for the new users: writing them in batches", "error", err)
			return done
		}
		files[k] = f
	}
	n, err := l.LoadInOrder(ctx, files)
	for k := range n {
		part := rest[bounds[k][0]:bounds[k][1]]
		res.Applied = append(res.Applied, part...)
		res.Batches++
		res.Loads++
		done += len(part)
	}
	if err != nil {
		log.Warn("sacctmgr load failed: the parts before it are committed, it and those after it kept nothing; writing the rest in batches",
			"parts", len(files), "committed", n, "error", err)
		return done
	}
	log.Info("policy changes loaded in parts side by side", "changes", len(rest), "parts", len(files), "first", rest[0].Name, "last", rest[len(rest)-1].Name)
	return done
}

// loadPartsFor is how many parts a run of new users with assocs user
// associations is loaded in.
func loadPartsFor(assocs int) int {
	return max(1, min(loadParts, assocs/loadPartAssocs))
}

// splitUsers cuts a run of new users (each followed by its associations'
// changes) into loadPartsFor parts to load side by side, of about as many associations
// each, every user whole in one part. It returns each part's start and
// end in run.
func splitUsers(run []plan.Change) [][2]int {
	assocs := 0
	for _, c := range run {
		if c.Kind == "user" {
			assocs += len(c.User.Accounts)
		}
	}
	parts := loadPartsFor(assocs)
	per, seen := (assocs+parts-1)/parts, 0
	var cuts []int // start of each part
	for i, c := range run {
		if c.Kind != "user" {
			continue
		}
		if len(cuts) == 0 || seen >= per*len(cuts) {
			cuts = append(cuts, i)
		}
		seen += len(c.User.Accounts)
	}
	if len(cuts) == 0 || cuts[0] != 0 {
		cuts = append([]int{0}, cuts...)
	}
	bounds := make([][2]int, len(cuts))
	for k, from := range cuts {
		to := len(run)
		if k+1 < len(cuts) {
			to = cuts[k+1]
		}
		bounds[k] = [2]int{from, to}
	}
	return bounds
}
