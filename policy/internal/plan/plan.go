// Package plan compares the Slurm state a policy asks for with the live
// state slurmdbd reports and lists the changes, ordered so they can be
// applied one by one: QOS before accounts, parents before children, users
// last, removals in reverse. Only objects Strata marked are changed or
// removed; removals are listed only with prune.
package plan

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/compile"
)

// Live is what slurmdbd reports.
type Live struct {
	QOS          []slurmrest.QOS
	Accounts     []slurmrest.Account
	Associations []slurmrest.Association
	Users        []slurmrest.User
	// Jobs are the jobs slurmctld knows (read for prune only): removals of
	// accounts, associations and users with running or pending jobs are
	// held back (see Options.ForceBusy).
	Jobs []slurmrest.Job
}

// Field is one changed field: old and new as sacctmgr would print them.
type Field struct {
	Name     string
	Old, New string
}

// Change is one write.
type Change struct {
	Op     string // create, modify, delete
	Kind   string // qos, account, user, association
	Name   string // QOS, account, user, or "account/user" for an association
	Fields []Field
	Line   int // policy line, when known

	// DefaultOnly marks a user change that only moves the default account
	// (before an association that is the default can go).
	DefaultOnly bool
	// NewAccounts are the accounts a user change adds the user under (the
	// associations it creates), sorted.
	NewAccounts []string
	// HasRecord marks an account change that creates only the association:
	// slurmdbd has the account's record (used on another cluster, or left
	// by an apply that stopped), which keeps its description, organization
	// and coordinators.
	HasRecord bool
	// ClearPreempt marks a QOS change that empties the QOS's preempt list,
	// which slurmrestd cannot do (apply runs sacctmgr for it).
	ClearPreempt bool
	// Busy are the running and pending jobs that hold a removal back: on a
	// skipped removal ("skip"), on the cancel --force-busy puts before it
	// ("cancel jobs"), and on the removal after that cancel.
	Busy []int64

	// What to write, for apply.
	QOS     *compile.QOS
	Account *compile.Account
	User    *compile.User
	Assoc   *slurmrest.Association
	// Coordinator is the account and user of a coordinator change.
	Coordinator *Coordinator
}

func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-11s %s", c.Op, c.Kind, c.Name)
	for _, f := range c.Fields {
		fmt.Fprintf(&b, "\n         %s: %s -> %s", f.Name, orNone(f.Old), orNone(f.New))
	}
	if c.Op == OpSkip {
		fmt.Fprintf(&b, "\n         busy: jobs %s are running or pending (--force-busy cancels them)", jobIDs(c.Busy))
	}
	if c.Op == OpCancel {
		fmt.Fprintf(&b, "\n         jobs: %s", jobIDs(c.Busy))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Options of Make.
type Options struct {
	Prune bool // list removals of marked objects the policy no longer has
	// ForceBusy cancels the running and pending jobs that would hold a
	// removal back (Live.Jobs), instead of skipping that removal.
	ForceBusy bool
}

// Make lists the changes from live to want.
func Make(want *compile.State, live Live, opt Options) []Change {
	var out []Change
	liveQOS := map[string]slurmrest.QOS{}
	for _, q := range live.QOS {
		liveQOS[q.Name] = q
	}
	for i := range want.QOS {
		w := want.QOS[i]
		l, ok := liveQOS[w.Name]
		if !ok {
			out = append(out, Change{Op: "create", Kind: "qos", Name: w.Name, QOS: &w, Line: w.Line, Fields: qosFields(nil, w)})
			continue
		}
		if f := qosFields(&l, w); len(f) > 0 {
			out = append(out, Change{Op: "modify", Kind: "qos", Name: w.Name, QOS: &w, Line: w.Line, Fields: f,
				ClearPreempt: len(w.Preempt) == 0 && len(l.Preempt) > 0})
		}
	}
	accounts := map[string]slurmrest.Account{}
	for _, a := range live.Accounts {
		accounts[a.Name] = a
	}
	assoc := map[string]slurmrest.Association{}
	for _, a := range live.Associations {
		if a.Partition == "" && a.Cluster == want.Cluster {
			assoc[a.Account+"/"+a.User] = a
		}
	}
	wantAccounts := map[string]bool{}
	for i := range want.Accounts {
		w := want.Accounts[i]
		wantAccounts[w.Name] = true
		l, ok := assoc[w.Name+"/"]
		if _, exists := accounts[w.Name]; !exists || !ok {
			out = append(out, Change{Op: "create", Kind: "account", Name: w.Name, Account: &w, Line: w.Line, Fields: accountFields(nil, w), HasRecord: exists})
			continue
		}
		l.Priority = ownPriority(l, assoc[l.Parent+"/"], w.Priority)
		if f := accountFields(&l, w); len(f) > 0 {
			out = append(out, Change{Op: "modify", Kind: "account", Name: w.Name, Account: &w, Line: w.Line, Fields: f})
		}
	}
	liveUsers := map[string]slurmrest.User{}
	for _, u := range live.Users {
		liveUsers[u.Name] = u
	}
	wantUserAssoc := map[string]bool{}
	for i := range want.Users {
		w := want.Users[i]
		accts := make([]string, 0, len(w.Accounts))
		for a := range w.Accounts {
			accts = append(accts, a)
			wantUserAssoc[a+"/"+w.Name] = true
		}
		sort.Strings(accts)
		var missing []string
		for _, a := range accts {
			if _, ok := assoc[a+"/"+w.Name]; !ok {
				missing = append(missing, a)
			}
		}
		lu, exists := liveUsers[w.Name]
		switch {
		case !exists || len(missing) > 0:
			op := "create"
			if exists {
				op = "modify"
			}
			f := []Field{{Name: "accounts", New: strings.Join(missing, ",")}}
			if lu.DefaultAccount != w.DefaultAccount {
				f = append(f, Field{Name: "default_account", Old: lu.DefaultAccount, New: w.DefaultAccount})
			}
			out = append(out, Change{Op: op, Kind: "user", Name: w.Name, User: &w, Fields: f, NewAccounts: missing})
		case lu.DefaultAccount != w.DefaultAccount:
			out = append(out, Change{Op: "modify", Kind: "user", Name: w.Name, User: &w,
				Fields: []Field{{Name: "default_account", Old: lu.DefaultAccount, New: w.DefaultAccount}}})
		}
		for _, a := range accts {
			limit := w.Accounts[a]
			l, ok := assoc[a+"/"+w.Name]
			var old int64
			if ok {
				old, _ = l.GrpTRES.Get("gres/gpu")
			}
			if old != limit {
				as := slurmrest.Association{Cluster: want.Cluster, Account: a, User: w.Name,
					GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: clearIfZero(limit)}}}
				out = append(out, Change{Op: "modify", Kind: "association", Name: a + "/" + w.Name, Assoc: &as,
					Fields: []Field{{Name: "grp_tres", Old: tresText(old), New: tresText(limit)}}})
			}
		}
	}
	out = append(out, coordinatorAdds(want, accounts)...)
	if opt.Prune {
		out = append(out, coordinatorRemovals(want, accounts)...)
		out = append(out, holdBusy(prune(want, live, accounts, assoc, wantAccounts, wantUserAssoc), live.Jobs, assoc, opt.ForceBusy)...)
	}
	return out
}

func clearIfZero(n int64) int64 {
	if n == 0 {
		return -1 // slurmdbd's "clear this limit"
	}
	return n
}

func tresText(n int64) string {
	if n == 0 {
		return ""
	}
	return "gres/gpu=" + strconv.FormatInt(n, 10)
}

// prune lists removals of marked objects the policy no longer names:
// user associations first, then project accounts, then tenants, then QOS.
func prune(want *compile.State, live Live, accounts map[string]slurmrest.Account, assoc map[string]slurmrest.Association,
	wantAccounts, wantUserAssoc map[string]bool) []Change {
	var out []Change
	marked := map[string]bool{}
	for _, a := range live.Accounts {
		if strings.EqualFold(a.Organization, compile.Marker) {
			marked[a.Name] = true
		}
	}
	var keys []string
	for k := range assoc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The user associations to remove, by user.
	going := map[string]map[string]bool{}
	for _, k := range keys {
		a := assoc[k]
		if a.User != "" && marked[a.Account] && !wantUserAssoc[k] {
			if going[a.User] == nil {
				going[a.User] = map[string]bool{}
			}
			going[a.User][a.Account] = true
		}
	}
	liveUsers := map[string]slurmrest.User{}
	for _, u := range live.Users {
		liveUsers[u.Name] = u
	}
	wantDefault := map[string]string{}
	for _, u := range want.Users {
		wantDefault[u.Name] = u.DefaultAccount
	}
	for _, k := range keys {
		a := assoc[k]
		if a.User == "" || !going[a.User][a.Account] {
			continue
		}
		// slurmdbd refuses to remove a user's default association: move
		// the default to one that stays first, or remove the user when
		// nothing stays.
		if u, ok := liveUsers[a.User]; ok && u.DefaultAccount == a.Account {
			var stays []string
			for _, k2 := range keys {
				b := assoc[k2]
				if b.User == a.User && !going[a.User][b.Account] {
					stays = append(stays, b.Account)
				}
			}
			next := ""
			if d := wantDefault[a.User]; d != "" && slices.Contains(stays, d) {
				next = d
			} else if len(stays) > 0 {
				next = stays[0]
			}
			if next == "" {
				out = append(out, Change{Op: "delete", Kind: "user", Name: a.User})
				going[a.User] = nil // the user's removal takes every association
				continue
			}
			out = append(out, Change{Op: "modify", Kind: "user", Name: a.User, DefaultOnly: true,
				User:   &compile.User{Name: a.User, DefaultAccount: next},
				Fields: []Field{{Name: "default_account", Old: a.Account, New: next}}})
			liveUsers[a.User] = slurmrest.User{Name: a.User, DefaultAccount: next}
		}
		as := a
		out = append(out, Change{Op: "delete", Kind: "association", Name: k, Assoc: &as})
	}
	var gone []slurmrest.Association
	for _, k := range keys {
		a := assoc[k]
		if a.User == "" && marked[a.Account] && !wantAccounts[a.Account] {
			gone = append(gone, a)
		}
	}
	// Children before parents: a deleted parent takes its children's
	// associations but leaves their account records behind.
	sort.SliceStable(gone, func(i, j int) bool { return gone[i].Parent != "root" && gone[j].Parent == "root" })
	for _, a := range gone {
		out = append(out, Change{Op: "delete", Kind: "account", Name: a.Account})
	}
	wantQOS := map[string]bool{}
	for _, q := range want.QOS {
		wantQOS[q.Name] = true
	}
	for _, q := range live.QOS {
		if strings.HasPrefix(q.Description, compile.Marker+":") && !wantQOS[q.Name] {
			out = append(out, Change{Op: "delete", Kind: "qos", Name: q.Name})
		}
	}
	return out
}

func qosFields(l *slurmrest.QOS, w compile.QOS) []Field {
	var f []Field
	add := func(name, old, nw string) {
		if old != nw {
			f = append(f, Field{name, old, nw})
		}
	}
	var lp int64
	var lwall time.Duration
	var ljob, ldesc, lmode string
	var lpre []string
	if l != nil {
		if l.Priority != nil {
			lp = *l.Priority
		}
		lwall, ldesc, lpre = l.MaxWall, l.Description, l.Preempt
		ljob = tresMap(l.MaxTRESPerJob).String()
		lmode = preemptMode(l.PreemptMode)
	}
	add("description", ldesc, w.Description)
	add("priority", itoa(lp), itoa(w.Priority))
	add("max_wall", dur(lwall), dur(w.MaxWall))
	add("max_tres_per_job", ljob, w.MaxTRESPerJob.String())
	lp2 := slices.Clone(lpre)
	sort.Strings(lp2)
	add("preempt", strings.Join(lp2, ","), strings.Join(w.Preempt, ","))
	add("preempt_mode", lmode, w.PreemptMode)
	return f
}

// preemptMode is a QOS's PreemptMode as the policy spells it: "requeue",
// "cancel", "suspend" ("suspend,gang" for a mode with GANG), and "" for
// DISABLED, which means the cluster's PreemptMode.
func preemptMode(m []string) string {
	var out []string
	for _, x := range m {
		if x = strings.ToLower(x); x != "" && x != "disabled" {
			out = append(out, x)
		}
	}
	return strings.Join(out, ",")
}

func accountFields(l *slurmrest.Association, w compile.Account) []Field {
	var f []Field
	add := func(name, old, nw string) {
		if old != nw {
			f = append(f, Field{name, old, nw})
		}
	}
	var lshare, lprio, ljobs int64
	var lparent, ldef, lqos, lgrp, lmins string
	if l != nil {
		lshare, lparent, ldef = l.Fairshare, l.Parent, l.DefaultQOS
		if l.Priority != nil {
			lprio = *l.Priority
		}
		if l.MaxJobs != nil {
			ljobs = *l.MaxJobs
		}
		q := slices.Clone(l.QOS)
		sort.Strings(q)
		lqos = strings.Join(q, ",")
		lgrp, lmins = tresMap(l.GrpTRES).String(), tresMap(l.GrpTRESMin).String()
	}
	add("parent", lparent, w.Parent)
	add("fairshare", itoa(lshare), itoa(w.Fairshare))
	add("qos", lqos, strings.Join(w.QOS, ","))
	add("default_qos", ldef, w.DefaultQOS)
	add("grp_tres", lgrp, w.GrpTRES.String())
	add("grp_tres_mins", lmins, w.GrpTRESMins.String())
	add("grp_jobs", unlimited(ljobs), unlimited(w.GrpJobs))
	add("priority", unlimited(lprio), unlimited(w.Priority))
	return f
}

// ownPriority is the priority an account association has of its own. An
// association without one shows its parent's (slurmdbd fills it in, and a
// write of -1 makes it inherit again), so a priority equal to the
// parent's is taken as inherited, unless the policy asks for that value.
func ownPriority(l, parent slurmrest.Association, want int64) *int64 {
	if l.Priority != nil && parent.Priority != nil && *l.Priority == *parent.Priority && *l.Priority != want {
		return nil
	}
	return l.Priority
}

// unlimited prints a count where 0 means none: "" for 0.
func unlimited(n int64) string {
	if n == 0 {
		return ""
	}
	return itoa(n)
}

func tresMap(l slurmrest.TRESList) compile.TRES {
	m := compile.TRES{}
	for _, t := range l {
		if t.Count >= 0 {
			m[t.Key()] = t.Count
		}
	}
	return m
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func dur(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
