// Package explain answers a user's "why" about the policy: which limits
// apply to a user, an account or a job, the line of the policy file each
// comes from and the value Slurm holds (a difference is drift), what is in
// use now, the GPU-hour budget used, the fair-share standing at every
// level from root down, and, for a pending job, Slurm's reason in plain
// words with the numbers behind it ("project acme-llm uses 60 of its 64
// GPUs; this job asks for 8").
//
// It is pure: [User], [Account] and [Job] take the policy as the tenant
// contract holds it (a [tenantmap.Map]: strata-policy builds it in memory
// from policy.yaml, the portal API reads the tenants.json that
// strata-policy render writes, so both explain alike) and a [Snapshot] of
// Slurm the caller read, and return a report; [Text] renders one for
// people, and every report marshals to JSON for the portal.
//
// What Slurm enforces is the live value, so the numbers of an explanation
// are Slurm's limits and the usage of its running jobs; the policy value
// and its line say where a limit is meant to come from.
package explain

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
)

// Input is what an explanation is made of.
type Input struct {
	// Tenants is the policy: its tenants, projects, members, classes and
	// limits with their sources; its Policy names the file in sources
	// ("policy.yaml:57"). Nil is an empty policy.
	Tenants *tenantmap.Map
	Live    Snapshot
}

// Snapshot is Slurm's state as the caller read it.
type Snapshot struct {
	Associations []slurmrest.Association
	Users        []slurmrest.User
	QOS          []slurmrest.QOS
	// Jobs are the jobs slurmctld knows; running ones are the usage.
	Jobs       []slurmrest.Job
	Partitions []slurmrest.Partition
	Nodes      []slurmrest.Node
	// Shares is the fair-share tree (sshare).
	Shares []slurmrest.Share
	// SharesUnavailable says why Shares is missing ("" when it is there):
	// fair-share and GPU-hour usage are then reported as unavailable.
	SharesUnavailable string
}

// NotFoundError is a user, account or job neither the policy nor Slurm has.
type NotFoundError struct {
	Kind, Name string
}

func (e *NotFoundError) Error() string {
	if e.Kind == "job" {
		return fmt.Sprintf("no job %s in Slurm (a finished job leaves slurmctld after MinJobAge; sacct -j %s shows its record)", e.Name, e.Name)
	}
	return fmt.Sprintf("no %s %s in the policy or in Slurm", e.Kind, e.Name)
}

// Source is where a value is in the policy file.
type Source struct {
	File string `json:"file"`
	Line int    `json:"line"`
	// Path is the value's path in the file ("tenants[0].limits.gpus").
	Path string `json:"path"`
}

func (s Source) String() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

// Limit is one limit of an association: what the policy says and where,
// what Slurm holds, and what is used.
type Limit struct {
	// Name is the policy key (gpus, gpus_by_type.h100, cpus, memory_gb,
	// running_jobs, gpu_hours, gpus_per_user), or Slurm's name for a limit
	// the policy has no key for.
	Name string `json:"name"`
	// Slurm is the Slurm limit: "GrpTRES gres/gpu", "GrpTRESMins gres/gpu",
	// "GrpJobs".
	Slurm string `json:"slurm"`
	// Unit of Policy, Live and Used: GPUs, CPUs, GiB, jobs, GPU-hours.
	Unit string `json:"unit"`
	// Policy is the policy's value; null when the policy sets none.
	Policy *float64 `json:"policy"`
	Source *Source  `json:"source,omitempty"`
	// Live is Slurm's value, the one enforced; null when Slurm has none.
	Live *float64 `json:"live"`
	// Drift is set when the policy owns the association and Slurm differs.
	Drift bool `json:"drift,omitempty"`
	// Used is what the running jobs hold now; for gpu_hours, the decayed
	// GPU-hours used. Null when unknown.
	Used *float64 `json:"used"`
}

// Level is one association on the way from a user up to the root, with
// the limits it holds.
type Level struct {
	// Kind is user (a user's association under a project), project,
	// tenant, or account (one the policy does not declare).
	Kind    string `json:"kind"`
	Account string `json:"account"`
	User    string `json:"user,omitempty"`
	// InPolicy and InSlurm say who has the association.
	InPolicy bool `json:"in_policy"`
	InSlurm  bool `json:"in_slurm"`
	// Source is the tenant, project or member entry of the policy.
	Source *Source `json:"source,omitempty"`
	Limits []Limit `json:"limits"`
}

// Name is how the level reads in a sentence: "project acme-llm",
// "user alice in acme-llm".
func (l Level) Name() string {
	if l.Kind == kindUser {
		return "user " + l.User + " in " + l.Account
	}
	return l.Kind + " " + l.Account
}

// ShareLevel is one row of the fair-share tree.
type ShareLevel struct {
	Account string `json:"account"`
	User    string `json:"user,omitempty"`
	// Shares is the raw share (the policy's shares); SharesNorm its part
	// of its parent's.
	Shares     int64   `json:"shares"`
	SharesNorm float64 `json:"shares_norm"`
	RawUsage   int64   `json:"raw_usage"`
	// EffectiveUsage is the decayed usage as a part of the parent's.
	EffectiveUsage float64 `json:"effective_usage"`
	// LevelFS is shares over usage at this level (above 1: under-served);
	// null when Slurm gives none or it is infinite (nothing used yet).
	LevelFS *float64 `json:"level_fs"`
	// FairShareFactor is the factor that enters the job priority; Slurm
	// computes it for users only, null elsewhere, and null while
	// FactorNotComputed.
	FairShareFactor *float64 `json:"fair_share_factor"`
	// FactorNotComputed says slurmctld has not computed the user's factor
	// yet: it shows 0 for an association made since its priority thread
	// last ran (every PriorityCalcPeriod, 5 minutes by default), a value
	// that would read as the lowest priority of all.
	FactorNotComputed bool `json:"fair_share_factor_not_computed,omitempty"`
}

// factorNotComputed tells a factor slurmctld has not computed from a
// computed one. A computed factor of a user with shares and no usage is 1
// under the classic algorithm (2^-(usage/shares)) and above 0 under Fair
// Tree (the user's rank over the number of users), so 0 there is the
// value slurmdbd gives a new association before slurmctld's priority
// thread has run.
func factorNotComputed(s *slurmrest.Share) bool {
	return s.User != "" && s.FairShareFactor == 0 && s.Shares > 0 && s.RawUsage == 0
}

// Usage is what running jobs hold now, and how many jobs wait.
type Usage struct {
	GPUs       int64            `json:"gpus"`
	GPUsByType map[string]int64 `json:"gpus_by_type,omitempty"`
	CPUs       int64            `json:"cpus"`
	MemoryGiB  float64          `json:"memory_gib"`
	Running    int              `json:"running_jobs"`
	Pending    int              `json:"pending_jobs"`
}

// Budget is the GPU-hour budget of an account (GrpTRESMins gres/gpu).
type Budget struct {
	// Hours is Slurm's budget (the policy's when Slurm has none).
	Hours  float64 `json:"hours"`
	Source *Source `json:"source,omitempty"`
	// Used is the decayed GPU-hours used so far; Running what running jobs
	// may still use if they run to their time limit. Null when unknown.
	Used    *float64 `json:"used"`
	Running *float64 `json:"running"`
	// Unavailable says why Used is unknown.
	Unavailable string `json:"unavailable,omitempty"`
}

// The kinds of levels.
const (
	kindUser    = "user"
	kindProject = "project"
	kindTenant  = "tenant"
	kindAccount = "account"
)

// lim names one Slurm limit of an association.
type lim struct {
	kind string // grpTRES, grpMins or grpJobs
	key  string // the TRES key for grpTRES and grpMins
}

const (
	grpTRES = "GrpTRES"
	grpMins = "GrpTRESMins"
	grpJobs = "GrpJobs"
)

func (l lim) slurm() string {
	if l.kind == grpJobs {
		return grpJobs
	}
	return l.kind + " " + l.key
}

// name is the policy key of the limit.
func (l lim) name() string {
	switch {
	case l.kind == grpJobs:
		return "running_jobs"
	case l.kind == grpMins && l.key == "gres/gpu":
		return "gpu_hours"
	case l.kind == grpMins:
		return l.slurm()
	case l.key == "gres/gpu":
		return "gpus"
	case strings.HasPrefix(l.key, "gres/gpu:"):
		return "gpus_by_type." + strings.TrimPrefix(l.key, "gres/gpu:")
	case l.key == "cpu":
		return "cpus"
	case l.key == "mem":
		return "memory_gb"
	}
	return l.slurm()
}

func (l lim) unit() string {
	switch {
	case l.kind == grpJobs:
		return "jobs"
	case l.kind == grpMins && l.key == "gres/gpu":
		return "GPU-hours"
	case l.kind == grpMins:
		return l.key + "-minutes"
	}
	return tresUnit(l.key)
}

// tresUnit is the unit a TRES count reads in.
func tresUnit(key string) string {
	switch {
	case key == "gres/gpu":
		return "GPUs"
	case strings.HasPrefix(key, "gres/gpu:"):
		return strings.TrimPrefix(key, "gres/gpu:") + " GPUs"
	case key == "cpu":
		return "CPUs"
	case key == "mem":
		return "GiB"
	case key == "node":
		return "nodes"
	}
	return key
}

// scale converts a count as Slurm holds it to the limit's unit.
func (l lim) scale(raw int64) float64 {
	switch {
	case l.kind == grpMins && l.key == "gres/gpu":
		return float64(raw) / 60 // minutes to hours
	case l.kind == grpTRES:
		return tresScale(l.key, raw)
	}
	return float64(raw)
}

// tresScale converts a TRES count to its unit: memory from MiB to GiB.
func tresScale(key string, raw int64) float64 {
	if key == "mem" {
		return float64(raw) / 1024
	}
	return float64(raw)
}

// order sorts limits as a reader expects them: GPUs, GPUs by type, CPUs,
// memory, other TRES, running jobs, budgets.
func (l lim) order() string {
	rank := map[string]string{grpTRES: "1", grpJobs: "2", grpMins: "3"}[l.kind]
	switch {
	case l.key == "gres/gpu":
		return rank + "0"
	case strings.HasPrefix(l.key, "gres/gpu:"):
		return rank + "1" + l.key
	case l.key == "cpu":
		return rank + "2"
	case l.key == "mem":
		return rank + "3"
	}
	return rank + "4" + l.key
}

type key struct{ account, user string }

// account is an account the policy declares: a tenant's (project nil) or
// a project's, with its association limits in Slurm's units.
type account struct {
	tenant  *tenantmap.Tenant
	project *tenantmap.Project
	limits  map[lim]policyValue
}

// policyValue is a limit of the policy in Slurm's units (memory in MiB,
// budgets in minutes), as apply sets it, and where it comes from.
type policyValue struct {
	raw int64
	src *tenantmap.Source
}

// user is a user with associations the policy declares: the projects the
// user is a member of (not a viewer), and the default one.
type user struct {
	accounts       map[string]bool
	defaultAccount string
}

// index is an Input looked up by name.
type index struct {
	in       Input
	accounts map[string]*account
	users    map[string]*user
	classes  map[string]*tenantmap.Class // by QOS name
	assoc    map[key]*slurmrest.Association
	parent   map[string]string
	shares   map[key]*slurmrest.Share
	qos      map[string]*slurmrest.QOS
	liveUser map[string]*slurmrest.User
	// noLimits: the map holds no limits (written before tenants.json
	// carried them), so no policy value is known and none is drift.
	noLimits bool
}

func newIndex(in Input) *index {
	x := &index{in: in, accounts: map[string]*account{}, users: map[string]*user{},
		classes: map[string]*tenantmap.Class{}, assoc: map[key]*slurmrest.Association{}, parent: map[string]string{},
		shares: map[key]*slurmrest.Share{}, qos: map[string]*slurmrest.QOS{}, liveUser: map[string]*slurmrest.User{}}
	if in.Tenants == nil {
		x.in.Tenants = &tenantmap.Map{}
	}
	m := x.in.Tenants
	for ti := range m.Tenants {
		t := &m.Tenants[ti]
		x.accounts[t.Account] = &account{tenant: t, limits: accountLimits(t.Limits)}
		x.parent[t.Account] = "root"
		for pi := range t.Projects {
			pr := &t.Projects[pi]
			x.accounts[pr.Account] = &account{tenant: t, project: pr, limits: accountLimits(pr.Limits)}
			x.parent[pr.Account] = t.Account
			for _, mb := range pr.Members {
				if mb.Role == tenantmap.RoleViewer {
					continue // viewers see, they do not submit
				}
				u := x.users[mb.User]
				if u == nil {
					u = &user{accounts: map[string]bool{}, defaultAccount: pr.Account} // the first project, unless one is the default
					x.users[mb.User] = u
				}
				u.accounts[pr.Account] = true
			}
		}
	}
	for _, t := range m.Tenants {
		for _, pr := range t.Projects {
			for _, mb := range pr.Members {
				if mb.Default && mb.Role != tenantmap.RoleViewer {
					x.users[mb.User].defaultAccount = pr.Account
				}
			}
		}
	}
	for i := range m.Classes {
		x.classes[m.Classes[i].Name] = &m.Classes[i]
	}
	x.noLimits = len(m.Tenants) > 0 && !slices.ContainsFunc(m.Tenants, func(t tenantmap.Tenant) bool { return t.Limits != nil })
	for i := range in.Live.Associations {
		a := &in.Live.Associations[i]
		if a.Partition != "" || (m.Cluster != "" && a.Cluster != "" && a.Cluster != m.Cluster) {
			continue // partition rows and other clusters are not what the policy manages
		}
		x.assoc[key{a.Account, a.User}] = a
		if a.User == "" && a.Parent != "" {
			x.parent[a.Account] = a.Parent // Slurm's tree is the one enforced
		}
	}
	for i := range in.Live.Shares {
		s := &in.Live.Shares[i]
		if _, dup := x.shares[key{s.Account, s.User}]; !dup {
			x.shares[key{s.Account, s.User}] = s
		}
	}
	for i := range in.Live.QOS {
		x.qos[in.Live.QOS[i].Name] = &in.Live.QOS[i]
	}
	for i := range in.Live.Users {
		x.liveUser[in.Live.Users[i].Name] = &in.Live.Users[i]
	}
	return x
}

// accountLimits are an account's limits as apply sets them on its
// association.
func accountLimits(l *tenantmap.Limits) map[lim]policyValue {
	out := map[lim]policyValue{}
	if l == nil {
		return out
	}
	set := func(k lim, v *tenantmap.Limit, scale int64) {
		if v != nil && v.Value > 0 {
			out[k] = policyValue{v.Value * scale, v.Source}
		}
	}
	set(lim{grpTRES, "gres/gpu"}, l.GPUs, 1)
	for typ, v := range l.GPUsByType {
		out[lim{grpTRES, "gres/gpu:" + typ}] = policyValue{v.Value, v.Source} // 0 forbids the type
	}
	set(lim{grpTRES, "cpu"}, l.CPUs, 1)
	set(lim{grpTRES, "mem"}, l.MemoryGB, 1024)
	set(lim{grpMins, "gres/gpu"}, l.GPUHours, 60)
	set(lim{grpJobs, ""}, l.RunningJobs, 1)
	return out
}

// source is where a value of the policy is, in the file the map names.
func (x *index) source(s *tenantmap.Source) *Source {
	if s == nil {
		return nil
	}
	return &Source{File: x.in.Tenants.Policy, Line: s.Line, Path: s.Path}
}

// entrySource is where an account's tenant or project is declared.
func (x *index) entrySource(acct string) *Source {
	a, ok := x.accounts[acct]
	switch {
	case !ok:
		return nil
	case a.project != nil:
		return x.source(a.project.Source)
	}
	return x.source(a.tenant.Source)
}

// kind says whether an account is a tenant, a project or neither.
func (x *index) kind(acct string) string {
	a, ok := x.accounts[acct]
	switch {
	case !ok:
		return kindAccount
	case a.project == nil:
		return kindTenant
	}
	return kindProject
}

// tenantProject names the tenant and project of an account ("" when the
// policy does not declare it).
func (x *index) tenantProject(acct string) (string, string) {
	a, ok := x.accounts[acct]
	switch {
	case !ok:
		return "", ""
	case a.project == nil:
		return a.tenant.Name, ""
	}
	return a.tenant.Name, a.project.Name
}

// perUser is the GPU limit of each member's association in acct (the
// project's gpus_per_user, else its tenant's), nil for none.
func (x *index) perUser(acct string) *tenantmap.Limit {
	a, ok := x.accounts[acct]
	if !ok || a.project == nil || a.project.Limits == nil {
		return nil
	}
	if l := a.project.Limits.GPUsPerUser; l != nil && l.Value > 0 {
		return l
	}
	return nil
}

// member finds a user's entry in a project of the policy.
func (x *index) member(acct, user string) (tenantmap.Member, bool) {
	a, ok := x.accounts[acct]
	if !ok || a.project == nil {
		return tenantmap.Member{}, false
	}
	for _, m := range a.project.Members {
		if m.User == user {
			return m, true
		}
	}
	return tenantmap.Member{}, false
}

// inSubtree reports whether acct is top or lies below it.
func (x *index) inSubtree(acct, top string) bool {
	for range 64 { // a tree deeper than this is a loop
		if acct == top {
			return true
		}
		p, ok := x.parent[acct]
		if !ok || p == "" || p == acct {
			return false
		}
		acct = p
	}
	return false
}

// usage is what the running jobs of an association hold: jobs of acct's
// subtree, or of user in acct when user is set.
type usage struct {
	tres    map[string]int64
	running int
	pending int
}

func (x *index) usage(acct, user string) usage {
	u := usage{tres: map[string]int64{}}
	for _, j := range x.in.Live.Jobs {
		if user != "" && (j.User != user || j.Account != acct) || user == "" && !x.inSubtree(j.Account, acct) {
			continue
		}
		switch {
		case j.Running():
			u.running++
			for _, t := range j.TRESAlloc {
				u.tres[t.Key()] += t.Count
			}
		case j.State.Has("PENDING"):
			u.pending++
		}
	}
	return u
}

// limits lists the limits of an association (user "" for the account's
// own), policy and live, with what is used.
func (x *index) limits(acct, user string) []Limit {
	pol, liv := map[lim]policyValue{}, map[lim]int64{}
	owned := x.accounts[acct] != nil && !x.noLimits
	if user == "" {
		if a := x.accounts[acct]; a != nil {
			pol = a.limits
		}
	} else {
		u := x.users[user]
		owned = owned && u != nil && u.accounts[acct]
		if n := x.perUser(acct); owned && n != nil {
			pol[lim{grpTRES, "gres/gpu"}] = policyValue{n.Value, n.Source}
		}
	}
	if a := x.assoc[key{acct, user}]; a != nil {
		for _, t := range a.GrpTRES {
			liv[lim{grpTRES, t.Key()}] = t.Count
		}
		for _, t := range a.GrpTRESMin {
			liv[lim{grpMins, t.Key()}] = t.Count
		}
		if a.MaxJobs != nil {
			liv[lim{grpJobs, ""}] = *a.MaxJobs
		}
	}
	var all []lim
	for l := range pol {
		all = append(all, l)
	}
	for l := range liv {
		if _, ok := pol[l]; !ok {
			all = append(all, l)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].order() < all[j].order() })
	use := x.usage(acct, user)
	out := make([]Limit, 0, len(all))
	for _, l := range all {
		out = append(out, x.limit(acct, user, l, pol, liv, owned, use))
	}
	return out
}

func (x *index) limit(acct, user string, l lim, pol map[lim]policyValue, liv map[lim]int64, owned bool, use usage) Limit {
	out := Limit{Name: l.name(), Slurm: l.slurm(), Unit: l.unit()}
	if user != "" && l == (lim{grpTRES, "gres/gpu"}) {
		out.Name, out.Slurm = "gpus_per_user", out.Slurm+" (user association)"
	}
	p, inPol := pol[l]
	v, inLive := liv[l]
	if inPol {
		out.Policy = ptr(l.scale(p.raw))
		out.Source = x.source(p.src)
	}
	if inLive {
		out.Live = ptr(l.scale(v))
	}
	out.Drift = owned && (inPol != inLive || p.raw != v)
	switch l.kind {
	case grpTRES:
		out.Used = ptr(tresScale(l.key, use.tres[l.key]))
	case grpJobs:
		out.Used = ptr(float64(use.running))
	case grpMins:
		if s := x.shares[key{acct, user}]; s != nil {
			out.Used = ptr(s.TRESUsage[l.key] / 60 / l.minutesPer())
		}
	}
	return out
}

// minutesPer is how many minutes one unit of a GrpTRESMins limit is.
func (l lim) minutesPer() float64 {
	if l.key == "gres/gpu" {
		return 60 // GPU-hours
	}
	return 1
}

// level describes one association on the way up.
func (x *index) level(acct, user string) Level {
	lv := Level{Kind: x.kind(acct), Account: acct, User: user, InPolicy: x.accounts[acct] != nil}
	_, lv.InSlurm = x.assoc[key{acct, user}]
	if user != "" {
		lv.Kind = kindUser
		m, ok := x.member(acct, user)
		lv.InPolicy = ok && m.Role != tenantmap.RoleViewer
		if ok {
			lv.Source = x.source(m.Source)
		}
	} else {
		lv.Source = x.entrySource(acct)
	}
	lv.Limits = x.limits(acct, user)
	return lv
}

// chain lists the associations from user in acct (when user is set) up
// to, not including, root.
func (x *index) chain(acct, user string) []Level {
	var out []Level
	if user != "" {
		out = append(out, x.level(acct, user))
	}
	for range 64 {
		if acct == "" || acct == "root" {
			break
		}
		out = append(out, x.level(acct, ""))
		acct = x.parent[acct]
	}
	return out
}

// fairShare lists the fair-share rows from root down to acct, and the
// user's row under acct when user is set.
func (x *index) fairShare(acct, user string) []ShareLevel {
	var rows []ShareLevel
	if user != "" {
		if s := x.shares[key{acct, user}]; s != nil {
			rows = append(rows, shareLevel(s))
		}
	}
	for range 64 {
		s := x.shares[key{acct, ""}]
		if s == nil {
			break
		}
		rows = append(rows, shareLevel(s))
		if s.Parent == "" || s.Parent == acct {
			break
		}
		acct = s.Parent
	}
	slices.Reverse(rows)
	return rows
}

func shareLevel(s *slurmrest.Share) ShareLevel {
	out := ShareLevel{Account: s.Account, User: s.User, Shares: s.Shares, SharesNorm: s.SharesNorm,
		RawUsage: s.RawUsage, EffectiveUsage: s.EffectiveUsage}
	if !math.IsInf(s.LevelFS, 0) && !math.IsNaN(s.LevelFS) && (s.Parent != "" || s.User != "") {
		out.LevelFS = ptr(s.LevelFS) // root has no level of its own
	}
	switch {
	case factorNotComputed(s):
		out.FactorNotComputed = true
	case s.User != "":
		out.FairShareFactor = ptr(s.FairShareFactor)
	}
	return out
}

// budget is the GPU-hour budget of an account, nil when it has none.
func (x *index) budget(acct string) *Budget {
	l := lim{grpMins, "gres/gpu"}
	var b *Budget
	if a := x.assoc[key{acct, ""}]; a != nil {
		if n, ok := a.GrpTRESMin.Get("gres/gpu"); ok {
			b = &Budget{Hours: l.scale(n)}
		}
	}
	if a := x.accounts[acct]; a != nil {
		if n, ok := a.limits[l]; ok {
			if b == nil {
				b = &Budget{Hours: l.scale(n.raw)}
			}
			b.Source = x.source(n.src)
		}
	}
	if b == nil {
		return nil
	}
	s := x.shares[key{acct, ""}]
	switch {
	case x.in.Live.SharesUnavailable != "":
		b.Unavailable = "Slurm's fair-share tree could not be read: " + x.in.Live.SharesUnavailable
	case s == nil:
		b.Unavailable = "Slurm's fair-share tree has no row for " + acct
	default:
		b.Used = ptr(s.TRESUsage["gres/gpu"] / 3600)
		b.Running = ptr(float64(s.TRESRunSecs["gres/gpu"]) / 3600)
	}
	return b
}

func usageOf(u usage) Usage {
	out := Usage{GPUs: u.tres["gres/gpu"], CPUs: u.tres["cpu"], MemoryGiB: tresScale("mem", u.tres["mem"]),
		Running: u.running, Pending: u.pending}
	for k, v := range u.tres {
		if t, ok := strings.CutPrefix(k, "gres/gpu:"); ok {
			if out.GPUsByType == nil {
				out.GPUsByType = map[string]int64{}
			}
			out.GPUsByType[t] = v
		}
	}
	return out
}

// mapNote is what a report says of a tenant map without limits.
func (x *index) mapNote() []string {
	if !x.noLimits {
		return nil
	}
	return []string{"the tenant map holds no limits or policy lines (an older strata-policy wrote it): " +
		"Slurm's values are shown alone until `strata-policy render` writes it again"}
}

func ptr[T any](v T) *T { return &v }
