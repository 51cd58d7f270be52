package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
)

// roleClusterAdmin is how a cluster admin's role reads in a report.
const roleClusterAdmin = "cluster-admin"

// AccountReport explains one account.
type AccountReport struct {
	Account string `json:"account"`
	// Kind is tenant, project, or account (one the policy does not
	// declare).
	Kind     string  `json:"kind"`
	Tenant   string  `json:"tenant,omitempty"`
	Project  string  `json:"project,omitempty"`
	Parent   string  `json:"parent"`
	InPolicy bool    `json:"in_policy"`
	InSlurm  bool    `json:"in_slurm"`
	Source   *Source `json:"source,omitempty"`
	Limits   []Limit `json:"limits"`
	// Above are the accounts above it up to root, with their limits: a job
	// of this account must fit under each of them too.
	Above []Level `json:"above"`
	// Users have an association under the account (policy or Slurm).
	Users []string `json:"users"`
	// Usage is what the running jobs of the account and the accounts below
	// it hold.
	Usage  Usage   `json:"usage"`
	Budget *Budget `json:"gpu_hour_budget,omitempty"`
	// FairShare runs from root down to the account.
	FairShare []ShareLevel `json:"fair_share"`
	Notes     []string     `json:"notes,omitempty"`
}

// UserReport explains one user.
type UserReport struct {
	User     string `json:"user"`
	InPolicy bool   `json:"in_policy"`
	InSlurm  bool   `json:"in_slurm"`
	// Roles are cluster-admin and "tenant-admin of <tenant>".
	Roles []string `json:"roles,omitempty"`
	// DefaultAccount is the policy's, LiveDefault Slurm's.
	DefaultAccount string   `json:"default_account"`
	DefaultSource  *Source  `json:"default_source,omitempty"`
	LiveDefault    string   `json:"live_default_account"`
	DefaultDrift   bool     `json:"default_drift,omitempty"`
	Accounts       []Member `json:"accounts"`
	// Jobs are the user's running and pending jobs.
	Jobs  []JobSummary `json:"jobs"`
	Notes []string     `json:"notes,omitempty"`
}

// Member is a user's place in one account.
type Member struct {
	Account string `json:"account"`
	Tenant  string `json:"tenant,omitempty"`
	Project string `json:"project,omitempty"`
	// Role is member, tenant-admin or viewer (a viewer has no association
	// and cannot submit); "" for an association the policy does not have.
	Role     string  `json:"role,omitempty"`
	Default  bool    `json:"default"`
	InPolicy bool    `json:"in_policy"`
	InSlurm  bool    `json:"in_slurm"`
	Source   *Source `json:"source,omitempty"`
	// Levels run from the user's association up to the tenant: the
	// per-user limit, then the account limits above it.
	Levels []Level `json:"levels"`
	// FairShare runs from root down to the user's row.
	FairShare []ShareLevel `json:"fair_share"`
}

// JobSummary is one line about a job.
type JobSummary struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Account string `json:"account"`
	QOS     string `json:"qos"`
	State   string `json:"state"`
	GPUs    int64  `json:"gpus"`
	// Reason and Why say why a pending job waits.
	Reason string `json:"reason,omitempty"`
	Why    string `json:"why,omitempty"`
}

// JobReport explains one job.
type JobReport struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	User      string `json:"user"`
	Account   string `json:"account"`
	Tenant    string `json:"tenant,omitempty"`
	Project   string `json:"project,omitempty"`
	QOS       string `json:"qos"`
	Partition string `json:"partition"`
	// Class is the policy class of its QOS, with where it is declared.
	Class       string  `json:"class,omitempty"`
	ClassSource *Source `json:"class_source,omitempty"`
	State       string  `json:"state"`
	Nodes       string  `json:"nodes,omitempty"`
	Ask         Ask     `json:"ask"`
	// Why says why a pending job waits; nil for other jobs.
	Why *Why `json:"why,omitempty"`
	// Levels run from the user's association up to the tenant.
	Levels    []Level      `json:"levels"`
	FairShare []ShareLevel `json:"fair_share"`
	Notes     []string     `json:"notes,omitempty"`
}

// Ask is what a job asks for in all.
type Ask struct {
	GPUs             int64            `json:"gpus"`
	GPUsByType       map[string]int64 `json:"gpus_by_type,omitempty"`
	CPUs             int64            `json:"cpus"`
	MemoryGiB        float64          `json:"memory_gib"`
	Nodes            int64            `json:"nodes"`
	TimeLimitMinutes int64            `json:"time_limit_minutes"` // 0: none
}

// Account explains an account.
func Account(in Input, name string) (*AccountReport, error) {
	x := newIndex(in)
	_, inSlurm := x.assoc[key{name, ""}]
	if x.accounts[name] == nil && !inSlurm {
		return nil, &NotFoundError{Kind: "account", Name: name}
	}
	r := &AccountReport{Account: name, Kind: x.kind(name), Parent: x.parent[name], InPolicy: x.accounts[name] != nil,
		InSlurm: inSlurm, Source: x.entrySource(name), Limits: x.limits(name, ""), Usage: usageOf(x.usage(name, "")),
		Budget: x.budget(name), FairShare: x.fairShare(name, ""), Users: []string{}}
	r.Tenant, r.Project = x.tenantProject(name)
	r.Above = x.chain(r.Parent, "")
	if r.Above == nil {
		r.Above = []Level{}
	}
	users := map[string]bool{}
	for k := range x.assoc {
		if k.account == name && k.user != "" {
			users[k.user] = true
		}
	}
	for n, u := range x.users {
		if u.accounts[name] {
			users[n] = true
		}
	}
	for u := range users {
		r.Users = append(r.Users, u)
	}
	sort.Strings(r.Users)
	r.Notes = x.notes(r.InPolicy, r.InSlurm, name, r.Limits)
	return r, nil
}

// notes says what a reader should know about an account before its numbers.
func (x *index) notes(inPolicy, inSlurm bool, name string, limits []Limit) []string {
	out := x.mapNote()
	switch {
	case !inSlurm:
		out = append(out, fmt.Sprintf("%s is in the policy but not in Slurm yet: `strata-policy apply --apply` creates it", name))
	case !inPolicy:
		out = append(out, fmt.Sprintf("%s is not in the policy: Strata does not manage it, and its limits are Slurm's alone", name))
	}
	drift := 0
	for _, l := range limits {
		if l.Drift {
			drift++
		}
	}
	if drift > 0 && inSlurm {
		out = append(out, fmt.Sprintf("%s differs from the policy in %s (drift): `strata-policy plan` lists the changes", name, plural(int64(drift), "limit")))
	}
	if x.in.Live.SharesUnavailable != "" {
		out = append(out, "fair-share and GPU-hour usage are unavailable: "+x.in.Live.SharesUnavailable)
	}
	return out
}

// User explains a user.
func User(in Input, name string) (*UserReport, error) {
	x := newIndex(in)
	p := x.in.Tenants
	r := &UserReport{User: name, Accounts: []Member{}, Jobs: []JobSummary{}}
	if slices.Contains(p.Admins, name) {
		r.Roles = append(r.Roles, roleClusterAdmin)
	}
	for _, t := range p.Tenants {
		if slices.Contains(t.Admins, name) {
			r.Roles = append(r.Roles, "tenant-admin of "+t.Name)
		}
	}
	r.InPolicy = len(r.Roles) > 0
	seen := map[string]bool{}
	for _, t := range p.Tenants {
		for _, pr := range t.Projects {
			acct := pr.Account
			m, ok := x.member(acct, name)
			if !ok {
				continue
			}
			r.InPolicy = true
			seen[acct] = true
			role := m.Role
			if role == "" {
				role = tenantmap.RoleMember
			}
			_, inSlurm := x.assoc[key{acct, name}]
			mem := Member{Account: acct, Tenant: t.Name, Project: pr.Name, Role: string(role), InPolicy: true, InSlurm: inSlurm,
				Source: x.source(m.Source)}
			if role != tenantmap.RoleViewer {
				mem.Levels, mem.FairShare = x.chain(acct, name), x.fairShare(acct, name)
			}
			r.Accounts = append(r.Accounts, mem)
		}
	}
	var liveOnly []string
	for k := range x.assoc {
		if k.user == name && !seen[k.account] {
			liveOnly = append(liveOnly, k.account)
		}
	}
	sort.Strings(liveOnly)
	for _, acct := range liveOnly {
		t, pr := x.tenantProject(acct)
		r.Accounts = append(r.Accounts, Member{Account: acct, Tenant: t, Project: pr, InSlurm: true,
			Levels: x.chain(acct, name), FairShare: x.fairShare(acct, name)})
	}
	lu := x.liveUser[name]
	r.InSlurm = lu != nil || len(liveOnly) > 0 || slices.ContainsFunc(r.Accounts, func(m Member) bool { return m.InSlurm })
	if !r.InPolicy && !r.InSlurm {
		return nil, &NotFoundError{Kind: "user", Name: name}
	}
	if u := x.users[name]; u != nil {
		r.DefaultAccount = u.defaultAccount
		if m, ok := x.member(u.defaultAccount, name); ok {
			r.DefaultSource = x.source(m.Source)
			if m.Default && m.DefaultSource != nil {
				r.DefaultSource = x.source(m.DefaultSource)
			}
		}
	}
	if lu != nil {
		r.LiveDefault = lu.DefaultAccount
	}
	r.DefaultDrift = r.DefaultAccount != "" && r.LiveDefault != r.DefaultAccount
	def := r.LiveDefault
	if def == "" {
		def = r.DefaultAccount
	}
	for i := range r.Accounts {
		r.Accounts[i].Default = r.Accounts[i].Account == def
	}
	for _, j := range x.in.Live.Jobs {
		if j.User != name || !j.Running() && !j.State.Has("PENDING") {
			continue
		}
		s := JobSummary{ID: j.ID, Name: j.Name, Account: j.Account, QOS: j.QOS, State: j.State.Base(), GPUs: jobGPUs(j)}
		if j.State.Has("PENDING") {
			w := x.why(j)
			s.Reason, s.Why = w.Reason, w.Detail
		}
		r.Jobs = append(r.Jobs, s)
	}
	sort.Slice(r.Jobs, func(i, j int) bool { return r.Jobs[i].ID < r.Jobs[j].ID })
	r.Notes = x.mapNote()
	switch {
	case !r.InSlurm:
		r.Notes = append(r.Notes, name+" is in the policy but not in Slurm yet: `strata-policy apply --apply` adds the user")
	case !r.InPolicy:
		r.Notes = append(r.Notes, name+" is not in the policy: Strata does not manage the user's associations")
	}
	if r.DefaultDrift && r.InSlurm {
		r.Notes = append(r.Notes, fmt.Sprintf("Slurm's default account %q differs from the policy's %q (drift): `strata-policy plan` lists the change",
			r.LiveDefault, r.DefaultAccount))
	}
	if x.in.Live.SharesUnavailable != "" {
		r.Notes = append(r.Notes, "fair-share is unavailable: "+x.in.Live.SharesUnavailable)
	}
	return r, nil
}

// Job explains the job with this id.
func Job(in Input, id int64) (*JobReport, error) {
	x := newIndex(in)
	i := slices.IndexFunc(in.Live.Jobs, func(j slurmrest.Job) bool { return j.ID == id })
	if i < 0 {
		return nil, &NotFoundError{Kind: "job", Name: fmt.Sprint(id)}
	}
	j := in.Live.Jobs[i]
	r := &JobReport{ID: j.ID, Name: j.Name, User: j.User, Account: j.Account, QOS: j.QOS, Partition: j.Partition,
		State: j.State.Base(), Nodes: j.NodeList, Ask: askOf(j), Levels: x.chain(j.Account, j.User),
		FairShare: x.fairShare(j.Account, j.User)}
	r.Tenant, r.Project = x.tenantProject(j.Account)
	if c, ok := x.classes[j.QOS]; ok {
		r.Class, r.ClassSource = c.Name, x.source(c.Source)
	}
	if j.State.Has("PENDING") {
		r.Why = x.why(j)
	}
	r.Notes = x.mapNote()
	if _, ok := x.accounts[j.Account]; !ok {
		r.Notes = append(r.Notes, "account "+j.Account+" is not in the policy: its limits are Slurm's alone")
	}
	if x.in.Live.SharesUnavailable != "" {
		r.Notes = append(r.Notes, "fair-share and GPU-hour usage are unavailable: "+x.in.Live.SharesUnavailable)
	}
	return r, nil
}

// req is what a job asks for by TRES key: its request, or what it holds
// when Slurm gives no request.
func req(j slurmrest.Job) slurmrest.TRESList {
	if len(j.TRESReq) > 0 {
		return j.TRESReq
	}
	return j.TRESAlloc
}

func jobGPUs(j slurmrest.Job) int64 {
	n, _ := req(j).Get("gres/gpu")
	return n
}

func askOf(j slurmrest.Job) Ask {
	r := req(j)
	get := func(k string) int64 { n, _ := r.Get(k); return n }
	a := Ask{GPUs: get("gres/gpu"), CPUs: get("cpu"), MemoryGiB: tresScale("mem", get("mem")), Nodes: get("node"),
		TimeLimitMinutes: int64(j.TimeLimit.Minutes())}
	for _, t := range r {
		if typ, ok := strings.CutPrefix(t.Key(), "gres/gpu:"); ok {
			if a.GPUsByType == nil {
				a.GPUsByType = map[string]int64{}
			}
			a.GPUsByType[typ] = t.Count
		}
	}
	return a
}

// Prepared is an Input looked up once, for explaining many of its jobs:
// Job reads the whole Input for each job, Prepared.Why only the job's own
// limits. It is safe for concurrent use; the Input must not change.
type Prepared struct{ x *index }

// Prepare looks up an Input for Prepared.Why.
func Prepare(in Input) *Prepared { return &Prepared{x: newIndex(in)} }

// Why is why a pending job of the Input waits, as Job(in, j.ID).Why says
// it; nil for a job that is not pending.
func (p *Prepared) Why(j *slurmrest.Job) *Why {
	if !j.State.Has("PENDING") {
		return nil
	}
	return p.x.why(*j)
}
