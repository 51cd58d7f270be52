// Package tenantmap is the tenant contract: tenants.json, which
// strata-policy render writes from the policy and every part that needs to
// know whose a Slurm account is reads directly: reclaimd (the tenant of a
// job, its metrics' only label), the portal API (who may see and do what)
// and any later part. No part keeps a hand copy of the map.
//
// The file holds, for one cluster, its admins and its tenants; for each
// tenant its Slurm account, its admins and its projects; for each project
// its Slurm account, its workload classes and its members with their
// roles. Parse is strict and reports every problem at once, each with its
// line, column and JSON path.
//
// It also holds what explains a limit in the policy's own words, so that a
// part that never reads policy.yaml (the portal API) explains a pending job
// exactly as strata-policy explain does: the policy file it was rendered
// from, the workload classes with their per-job limits, each tenant's and
// project's limits in the policy's units (for a project, gpus_per_user is
// the one its members get: its own, else its tenant's), and the source of
// every entry and limit (line and path in the policy file). These fields
// are optional: a map written before them still parses, and then says
// nothing of limits. Decoding is strict, so a reader built before them
// refuses a map that has them: update reclaimd and the portal API before
// strata-policy renders with them.
//
//	{
//	  "apiVersion": "strata/v1",
//	  "kind": "TenantMap",
//	  "cluster": "gpu1",
//	  "admins": ["root-ops"],
//	  "policy": "/etc/strata/policy.yaml",
//	  "classes": [{"name": "train", "source": {"line": 12, "path": "classes[0]"},
//	    "max_time": {"value": "7d", "source": {"line": 15, "path": "classes[0].max_time"}}}],
//	  "tenants": [{
//	    "name": "acme", "account": "acme", "admins": ["alice"],
//	    "source": {"line": 40, "path": "tenants[0]"},
//	    "limits": {"gpus": {"value": 64, "source": {"line": 44, "path": "tenants[0].limits.gpus"}}},
//	    "projects": [{
//	      "name": "llm", "account": "acme-llm", "classes": ["train", "batch"],
//	      "members": [{"user": "alice", "role": "tenant-admin", "default": true}]
//	    }]
//	  }]
//	}
package tenantmap

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/duration"
	"github.com/strata-hpc/strata/internal/strictjson"
)

// APIVersion and Kind head every tenant map.
const (
	APIVersion = "strata/v1"
	Kind       = "TenantMap"
)

// Map is tenants.json.
type Map struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Cluster is the Slurm ClusterName the map describes.
	Cluster string `json:"cluster"`
	// Admins are the cluster-admin users.
	Admins []string `json:"admins"`
	// Policy names the policy file the map was rendered from, as the
	// sources' lines refer to it ("" in a map that holds no sources).
	Policy string `json:"policy,omitempty"`
	// Classes are the policy's workload classes, each a Slurm QOS.
	Classes []Class  `json:"classes,omitempty"`
	Tenants []Tenant `json:"tenants"`

	owners map[string]Owner // account → owner; built by Parse
}

// Tenant is an organisation and its Slurm account, the parent of its
// projects' accounts.
type Tenant struct {
	Name string `json:"name"`
	// Account is the tenant's own Slurm account.
	Account string `json:"account"`
	// Admins are the tenant-admin users (Slurm coordinators of Account).
	Admins []string `json:"admins"`
	// Source is the tenant's entry in the policy; Limits are the limits of
	// its account (GrpTRES, GrpTRESMins, GrpJobs). gpus_per_user here is
	// the tenant's default for its projects.
	Source   *Source   `json:"source,omitempty"`
	Limits   *Limits   `json:"limits,omitempty"`
	Projects []Project `json:"projects"`
}

// Project is a Slurm account under its tenant's.
type Project struct {
	Name    string `json:"name"`
	Account string `json:"account"`
	// Classes are the workload classes the project's jobs may use.
	Classes []string `json:"classes"`
	// Source is the project's entry in the policy; Limits are the limits of
	// its account, and gpus_per_user the one on each member's association
	// (the project's own, else its tenant's: Source says which).
	Source  *Source  `json:"source,omitempty"`
	Limits  *Limits  `json:"limits,omitempty"`
	Members []Member `json:"members"`
}

// Member is a user of a project.
type Member struct {
	User string `json:"user"`
	Role Role   `json:"role"`
	// Default: this project's account is the user's default account.
	Default bool `json:"default,omitempty"`
	// Source is the member's entry in the policy; DefaultSource, of a
	// default member, is what makes the project the default.
	Source        *Source `json:"source,omitempty"`
	DefaultSource *Source `json:"default_source,omitempty"`
}

// Source is where an entry or a value is in the policy file ([Map.Policy]).
type Source struct {
	// Line is 0 when unknown (a policy built in code).
	Line int `json:"line"`
	// Path is the value's path in the file ("tenants[0].limits.gpus").
	Path string `json:"path"`
}

// Limits are the limits of an association in the policy's units, each
// with its source; a limit left out is no limit.
type Limits struct {
	// GPUs is GrpTRES gres/gpu.
	GPUs *Limit `json:"gpus,omitempty"`
	// GPUsByType is GrpTRES gres/gpu:<type>; 0 forbids the type.
	GPUsByType map[string]Limit `json:"gpus_by_type,omitempty"`
	// CPUs is GrpTRES cpu.
	CPUs *Limit `json:"cpus,omitempty"`
	// MemoryGB is GrpTRES mem, in GiB.
	MemoryGB *Limit `json:"memory_gb,omitempty"`
	// RunningJobs is GrpJobs.
	RunningJobs *Limit `json:"running_jobs,omitempty"`
	// GPUHours is the GPU-hour budget, GrpTRESMins gres/gpu.
	GPUHours *Limit `json:"gpu_hours,omitempty"`
	// GPUsPerUser is GrpTRES gres/gpu on a user's association.
	GPUsPerUser *Limit `json:"gpus_per_user,omitempty"`
}

// Limit is one limit's value and where the policy sets it.
type Limit struct {
	Value  int64   `json:"value"`
	Source *Source `json:"source,omitempty"`
}

// Class is a workload class: its Slurm QOS and its per-job limits.
type Class struct {
	Name   string  `json:"name"`
	Source *Source `json:"source,omitempty"`
	// MaxGPUsPerJob is the QOS's MaxTRESPerJob gres/gpu.
	MaxGPUsPerJob *Limit `json:"max_gpus_per_job,omitempty"`
	// MaxTime is the QOS's MaxWall.
	MaxTime *TimeLimit `json:"max_time,omitempty"`
}

// TimeLimit is a time limit and where the policy sets it.
type TimeLimit struct {
	Value  duration.Duration `json:"value"`
	Source *Source           `json:"source,omitempty"`
}

// Role is what a member may do in a project.
type Role string

// The roles of a project member. Cluster admins are [Map.Admins].
const (
	// RoleMember submits jobs in the project.
	RoleMember Role = "member"
	// RoleViewer sees the project's jobs and cannot submit (no Slurm
	// association).
	RoleViewer Role = "viewer"
	// RoleTenantAdmin is a member who also administers the tenant.
	RoleTenantAdmin Role = "tenant-admin"
)

// Roles lists the member roles, for messages and checks.
var Roles = []Role{RoleMember, RoleViewer, RoleTenantAdmin}

// UnmarshalText accepts a role of [Roles].
func (r *Role) UnmarshalText(b []byte) error {
	if !slices.Contains(Roles, Role(b)) {
		return fmt.Errorf("%q is not a role: use %s", b, roleList())
	}
	*r = Role(b)
	return nil
}

func roleList() string {
	s := make([]string, len(Roles))
	for i, r := range Roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// Owner is whose an account is.
type Owner struct {
	Tenant string
	// Project is "" for the tenant's own account.
	Project string
}

// Lookup finds the tenant and project of a Slurm account.
func (m *Map) Lookup(account string) (Owner, bool) {
	if m == nil {
		return Owner{}, false
	}
	if m.owners != nil {
		o, ok := m.owners[account]
		return o, ok
	}
	for _, t := range m.Tenants {
		if t.Account == account {
			return Owner{Tenant: t.Name}, true
		}
		for _, p := range t.Projects {
			if p.Account == account {
				return Owner{Tenant: t.Name, Project: p.Name}, true
			}
		}
	}
	return Owner{}, false
}

// TenantOf returns the tenant of an account; an account the map does not
// list (or a nil map) is its own tenant, so that a job outside the policy
// is still told apart from the others.
func (m *Map) TenantOf(account string) string {
	if o, ok := m.Lookup(account); ok {
		return o.Tenant
	}
	return account
}

// Tenant returns the tenant named name.
func (m *Map) Tenant(name string) (*Tenant, bool) {
	if m == nil {
		return nil, false
	}
	for i := range m.Tenants {
		if m.Tenants[i].Name == name {
			return &m.Tenants[i], true
		}
	}
	return nil, false
}

// Parse decodes a tenant map strictly and validates it. The error is an
// errors.Join of *strictjson.FieldError, one per line when printed, each
// "line:col: path: message".
func Parse(data []byte) (*Map, error) {
	var m Map
	doc, err := strictjson.Decode(data, &m, `want a JSON object with "apiVersion": "`+APIVersion+`" and "kind": "`+Kind+`"`)
	if err != nil {
		return nil, err
	}
	if errs := m.Validate(); len(errs) > 0 {
		return nil, doc.Locate(errs)
	}
	m.index()
	return &m, nil
}

// Load reads and parses a tenant map; every problem is prefixed with the
// file's name.
func Load(path string) (*Map, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenant map: %w (strata-policy render writes it)", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, strictjson.InFile(path, err)
	}
	return m, nil
}

func (m *Map) index() {
	m.owners = map[string]Owner{}
	for _, t := range m.Tenants {
		m.owners[t.Account] = Owner{Tenant: t.Name}
		for _, p := range t.Projects {
			m.owners[p.Account] = Owner{Tenant: t.Name, Project: p.Name}
		}
	}
}

// Marshal writes m as indented JSON, in its order (strata-policy keeps the
// policy's order, so that a diff of two renders reads like a diff of the
// policy), with empty lists written as [] rather than null.
func (m *Map) Marshal() ([]byte, error) {
	c := *m
	c.Admins = nonNil(c.Admins)
	c.Tenants = nonNil(slices.Clone(c.Tenants))
	for i := range c.Tenants {
		t := &c.Tenants[i]
		t.Admins = nonNil(t.Admins)
		t.Projects = nonNil(slices.Clone(t.Projects))
		for j := range t.Projects {
			p := &t.Projects[j]
			p.Classes, p.Members = nonNil(p.Classes), nonNil(p.Members)
		}
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
