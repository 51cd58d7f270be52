// Package compile turns a policy into the Slurm state it asks for: the
// QOS of every workload class, one account per tenant with one child
// account per project, their fair-share and limits, users with their
// default accounts and per-user GPU limits. It is pure: the same policy
// gives the same state, sorted, so plans and renders are deterministic.
package compile

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-hpc/strata/policy/internal/spec"
)

// Marker is Strata's ownership mark: the organization of every account it
// creates, and the start of every QOS description. Prune and drift touch
// only marked objects.
const Marker = "strata"

// TRES is a set of limits by TRES name ("gres/gpu", "gres/gpu:h100",
// "cpu", "mem" in MiB).
type TRES map[string]int64

// String is the sacctmgr spelling, sorted: "cpu=64,gres/gpu=8".
func (t TRES) String() string {
	parts := make([]string, 0, len(t))
	for k, v := range t {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// QOS is one class's QOS.
type QOS struct {
	Name          string
	Description   string
	Priority      int64
	MaxWall       time.Duration
	MaxTRESPerJob TRES
	Preempt       []string
	PreemptMode   string
	Line          int // policy line it comes from
}

// Account is a tenant account (Parent "root") or a project account.
//
// A tenant's limits and priority sit on its account's association, not on
// a tenant QOS: a job has exactly one QOS, its class's, which carries the
// class priority, preemption and MaxWall. So a job over a tenant's (or a
// project's) GPU limit pends with reason AssocGrpGRES, never QOSGrpGRES.
type Account struct {
	Name        string
	Parent      string
	Description string
	Fairshare   int64
	// Priority is the association's priority (the tenant's priority;
	// 0: none). Slurm weighs it by PriorityWeightAssoc.
	Priority    int64
	QOS         []string
	DefaultQOS  string
	GrpTRES     TRES
	GrpTRESMins TRES
	GrpJobs     int64 // 0: no limit
	// Coordinators are the tenant admins (the tenant's admins and its
	// projects' members with role tenant-admin), sorted; they coordinate
	// the tenant account and, through it, its projects. Project accounts
	// have none of their own.
	Coordinators []string
	Tenant       string
	Line         int
}

// User is a user with associations under project accounts.
type User struct {
	Name           string
	DefaultAccount string
	// Accounts lists the project accounts the user is a member of, with
	// the user association's GPU limit (0: none).
	Accounts map[string]int64
}

// State is the desired Slurm state.
type State struct {
	Cluster  string
	QOS      []QOS
	Accounts []Account // parents before children
	Users    []User
}

// Compile computes the state of a policy that spec.Parse accepted.
func Compile(p *spec.Policy) (*State, error) {
	st := &State{Cluster: p.Cluster.Name}
	classes := map[string]spec.Class{}
	for _, c := range p.Classes {
		classes[c.Name] = c
		q := QOS{Name: c.Name, Description: Marker + ": class " + c.Name, Priority: int64(c.Priority),
			MaxWall: c.MaxTime.Std(), PreemptMode: c.PreemptMode, Line: c.Line}
		if c.MaxGPUsPerJob > 0 {
			q.MaxTRESPerJob = TRES{"gres/gpu": int64(c.MaxGPUsPerJob)}
		}
		q.Preempt = append(q.Preempt, c.Preempt...)
		sort.Strings(q.Preempt)
		st.QOS = append(st.QOS, q)
	}
	sort.Slice(st.QOS, func(i, j int) bool { return st.QOS[i].Name < st.QOS[j].Name })
	allClasses := make([]string, 0, len(classes))
	for n := range classes {
		allClasses = append(allClasses, n)
	}
	sort.Strings(allClasses)
	defaultClass := p.Cluster.DefaultClass
	if defaultClass == "" {
		if _, ok := classes["batch"]; ok {
			defaultClass = "batch"
		} else if len(allClasses) > 0 {
			defaultClass = allClasses[0]
		}
	}
	users := map[string]*User{}
	var tenants, projects []Account
	for _, t := range p.Tenants {
		tc := t.Classes
		if len(tc) == 0 {
			tc = allClasses
		}
		ta := Account{Name: t.Name, Parent: "root", Description: descr(t.Description, "tenant "+t.Name), Fairshare: shares(t.Shares),
			QOS: sorted(tc), DefaultQOS: pickDefault(defaultClass, tc), Tenant: t.Name, Line: t.Line}
		ta.GrpTRES, ta.GrpTRESMins, ta.GrpJobs = limits(t.Limits)
		ta.Priority = int64(t.Priority)
		ta.Coordinators = tenantAdmins(t)
		tenants = append(tenants, ta)
		for _, pr := range t.Projects {
			pc := pr.Classes
			if len(pc) == 0 {
				pc = tc
			}
			pa := Account{Name: p.Account(t.Name, pr.Name), Parent: t.Name, Description: descr(pr.Description, "project "+pr.Name+" of "+t.Name),
				Fairshare: shares(pr.Shares), QOS: sorted(pc), DefaultQOS: pickDefault(defaultClass, pc), Tenant: t.Name, Line: pr.Line}
			pa.GrpTRES, pa.GrpTRESMins, pa.GrpJobs = limits(pr.Limits)
			projects = append(projects, pa)
			perUser := int64(pr.Limits.GPUsPerUser)
			if perUser == 0 {
				perUser = int64(t.Limits.GPUsPerUser)
			}
			for _, m := range pr.Members {
				if m.Role == "viewer" {
					continue // viewers see, they do not submit
				}
				u := users[m.User]
				if u == nil {
					u = &User{Name: m.User, Accounts: map[string]int64{}}
					users[m.User] = u
				}
				u.Accounts[pa.Name] = perUser
				if u.DefaultAccount == "" {
					u.DefaultAccount = pa.Name // the first project, unless one says default: true
				}
			}
		}
	}
	// An explicit default wins over "first project seen".
	for _, t := range p.Tenants {
		for _, pr := range t.Projects {
			for _, m := range pr.Members {
				if m.Default && m.Role != "viewer" {
					users[m.User].DefaultAccount = p.Account(t.Name, pr.Name)
				}
			}
		}
	}
	sort.Slice(tenants, func(i, j int) bool { return tenants[i].Name < tenants[j].Name })
	sort.Slice(projects, func(i, j int) bool { return projects[i].Name < projects[j].Name })
	st.Accounts = append(tenants, projects...)
	names := make([]string, 0, len(users))
	for n := range users {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st.Users = append(st.Users, *users[n])
	}
	return st, nil
}

// tenantAdmins are the users who coordinate a tenant's account.
func tenantAdmins(t spec.Tenant) []string {
	set := map[string]bool{}
	for _, a := range t.Admins {
		set[a] = true
	}
	for _, pr := range t.Projects {
		for _, m := range pr.Members {
			if m.Role == spec.RoleTenantAdmin {
				set[m.User] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for u := range set {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

func descr(d, def string) string {
	if d == "" {
		d = def
	}
	return strings.ToLower(d) // sacctmgr lowercases descriptions; keep REST and sacctmgr alike
}

func shares(n int) int64 {
	if n <= 0 {
		return 1
	}
	return int64(n)
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func pickDefault(def string, allowed []string) string {
	for _, a := range allowed {
		if a == def {
			return def
		}
	}
	if len(allowed) == 0 {
		return ""
	}
	return sorted(allowed)[0]
}

// limits maps a policy's limits to association limits.
func limits(l spec.Limits) (grp TRES, mins TRES, jobs int64) {
	grp = TRES{}
	if l.GPUs > 0 {
		grp["gres/gpu"] = int64(l.GPUs)
	}
	for typ, n := range l.GPUsByType {
		grp["gres/gpu:"+typ] = int64(n) // 0 forbids the type (spec: gpus_by_type)
	}
	if l.CPUs > 0 {
		grp["cpu"] = int64(l.CPUs)
	}
	if l.MemoryGB > 0 {
		grp["mem"] = int64(l.MemoryGB) * 1024
	}
	mins = TRES{}
	if l.GPUHours > 0 {
		mins["gres/gpu"] = int64(l.GPUHours) * 60
	}
	return grp, mins, int64(l.RunningJobs)
}
