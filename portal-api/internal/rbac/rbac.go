// Package rbac is who may do what in the portal: one table (Table) maps
// each role of the tenant map to the scope of each action, and Allowed is
// the one place it is enforced. A user holds a role per grant: cluster-admin
// from the map's admins, tenant-admin from a tenant's admins or a project
// role, member or viewer from a project role; what one grant allows,
// another does not take away.
//
// The API answers 404 for an object the caller may not read, so that a
// foreign tenant's job looks like no job at all, and 403 for one the caller
// may read but not change.
package rbac

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/tenantmap"
)

// Role is a role of the tenant map.
type Role string

// The roles, from the most to the least.
const (
	ClusterAdmin Role = "cluster-admin"
	TenantAdmin  Role = "tenant-admin"
	Member       Role = "member"
	Viewer       Role = "viewer"
)

// Roles in the table's column order.
var Roles = []Role{ClusterAdmin, TenantAdmin, Member, Viewer}

// Action is what a caller asks to do.
type Action string

// The actions.
const (
	ReadJobs      Action = "read project jobs"
	Submit        Action = "submit"
	ControlOwn    Action = "control own jobs"
	ControlTenant Action = "control the tenant's jobs"
	OperatorViews Action = "operator views"
	DrainNodes    Action = "drain/resume nodes"
	// DeployModels is deploying a finished job's model through the
	// cluster's bridge, and rolling back or deleting a deployment.
	DeployModels Action = "deploy models"
)

// Scope is how far a grant reaches.
type Scope int

// Scopes, narrowest first.
const (
	None    Scope = iota
	Own           // the user's own jobs, in a project of the grant
	Project       // the grant's project
	Tenant        // every project of the grant's tenant
	Cluster       // everything on the cluster
)

func (s Scope) String() string {
	return [...]string{"—", "own", "project", "tenant", "cluster"}[s]
}

// Row is one action's scope for each role.
type Row struct {
	Action Action
	Scopes map[Role]Scope
}

// Table is the one written table of who may do what.
var Table = []Row{
	{ReadJobs, map[Role]Scope{ClusterAdmin: Cluster, TenantAdmin: Tenant, Member: Project, Viewer: Project}},
	{Submit, map[Role]Scope{ClusterAdmin: None, TenantAdmin: Project, Member: Project, Viewer: None}},
	{ControlOwn, map[Role]Scope{ClusterAdmin: Own, TenantAdmin: Own, Member: Own, Viewer: None}},
	{ControlTenant, map[Role]Scope{ClusterAdmin: Cluster, TenantAdmin: Tenant, Member: None, Viewer: None}},
	{OperatorViews, map[Role]Scope{ClusterAdmin: Cluster, TenantAdmin: Tenant, Member: None, Viewer: None}},
	{DrainNodes, map[Role]Scope{ClusterAdmin: Cluster, TenantAdmin: None, Member: None, Viewer: None}},
	{DeployModels, map[Role]Scope{ClusterAdmin: Cluster, TenantAdmin: Tenant, Member: Project, Viewer: None}},
}

func scope(a Action, r Role) Scope {
	for _, row := range Table {
		if row.Action == a {
			return row.Scopes[r]
		}
	}
	return None
}

// Target is what an action reaches: a job (tenant, project, its user), a
// project (no user), or the cluster itself (a node: all empty).
type Target struct {
	Tenant, Project, User string
}

// Grant is one role a user holds, where.
type Grant struct {
	Role    Role
	Tenant  string // "" for cluster-admin
	Project string // "" for cluster-admin and a tenant's admins
}

// Grants are the roles user holds on the cluster of m.
func Grants(m *tenantmap.Map, user string) []Grant {
	if m == nil || user == "" {
		return nil
	}
	var gs []Grant
	if slices.Contains(m.Admins, user) {
		gs = append(gs, Grant{Role: ClusterAdmin})
	}
	for _, t := range m.Tenants {
		if slices.Contains(t.Admins, user) {
			gs = append(gs, Grant{Role: TenantAdmin, Tenant: t.Name})
		}
		for _, p := range t.Projects {
			for _, mb := range p.Members {
				if mb.User != user {
					continue
				}
				r := Role(mb.Role)
				gs = append(gs, Grant{Role: r, Tenant: t.Name, Project: p.Name})
				if r == TenantAdmin {
					// A project's tenant-admin administers its tenant.
					gs = append(gs, Grant{Role: TenantAdmin, Tenant: t.Name})
				}
			}
		}
	}
	return gs
}

// Allowed reports whether user may do a to target on the cluster of m:
// the one check every route makes.
func Allowed(m *tenantmap.Map, user string, a Action, target Target) bool {
	return AllowedBy(Grants(m, user), user, a, target)
}

// AllowedBy is Allowed with the user's grants already found (Grants), for
// a request that checks many objects: the one check under Allowed.
func AllowedBy(grants []Grant, user string, a Action, target Target) bool {
	for _, g := range grants {
		if covers(g, scope(a, g.Role), user, target) {
			return true
		}
	}
	return false
}

func covers(g Grant, s Scope, user string, t Target) bool {
	switch s {
	case Cluster:
		return true
	case Tenant:
		return t.Tenant != "" && t.Tenant == g.Tenant
	case Project:
		// A grant of a tenant's admins names no project, and reaches none
		// as a project: Slurm lets only a project's members submit to it.
		return t.Tenant != "" && t.Tenant == g.Tenant && g.Project != "" && t.Project == g.Project
	case Own:
		// Own jobs in a project of the grant (in the tenant, for its
		// admins); a cluster admin's own jobs anywhere.
		if t.User != user {
			return false
		}
		return g.Role == ClusterAdmin || (t.Tenant == g.Tenant && (g.Project == "" || t.Project == g.Project))
	}
	return false
}

// CanControl reports whether user may cancel, hold, release or requeue
// the job at target: their own, or the tenant's as its admin.
func CanControl(m *tenantmap.Map, user string, target Target) bool {
	return Allowed(m, user, ControlOwn, target) || Allowed(m, user, ControlTenant, target)
}

// Markdown is the table as README.md prints it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| action |")
	for _, r := range Roles {
		fmt.Fprintf(&b, " %s |", r)
	}
	b.WriteString("\n|---|")
	for range Roles {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range Table {
		fmt.Fprintf(&b, "| %s |", row.Action)
		for _, r := range Roles {
			fmt.Fprintf(&b, " %s |", row.Scopes[r])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ReachesOwn reports whether some role's scope of a is Own: only then
// does a job's user change the answer for a job of a project, so a caller
// that checks a project once need not check each of its jobs otherwise.
func ReachesOwn(a Action) bool {
	for _, row := range Table {
		if row.Action != a {
			continue
		}
		for _, s := range row.Scopes {
			if s == Own {
				return true
			}
		}
	}
	return false
}
