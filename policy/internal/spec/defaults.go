package spec

import (
	"slices"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// DefaultNamespace is the Kubernetes namespace of a tenant whose serving
// quota names none.
func DefaultNamespace(tenant string) string { return "strata-" + tenant }

// The range of derived disk project ids: [MinDerivedProjectID,
// MaxDerivedProjectID], 2^30 to 2^31-1, far from the small ids sites give
// by hand, and within 31 bits so that every tool reads them alike.
const (
	MinDerivedProjectID = 1 << 30
	MaxDerivedProjectID = 1<<31 - 1
)

// DiskProjectID is the project id of a project's disk quota that names
// none: MinDerivedProjectID plus the 32-bit FNV-1a hash of its Slurm
// account, modulo 2^30. It depends on the account name alone, so a
// project keeps its id when other projects come and go; two accounts
// with the same id (about one chance in 2000 among 1000 projects) are a
// validation error, resolved by giving one of them project_id.
func DiskProjectID(account string) int {
	h := uint32(2166136261) // FNV-1a, 32 bits: offset basis and prime
	for i := 0; i < len(account); i++ {
		h ^= uint32(account[i])
		h *= 16777619
	}
	return MinDerivedProjectID + int(h%(1<<30))
}

// ApplyDefaults fills in the documented defaults, so that the compiler
// reads every value from the policy instead of knowing them:
//
//   - cluster.default_class: batch, when that class is defined;
//   - a class's requeue: true for train and batch, false for the others;
//   - a class's reclaim rule: reclaimrules' defaults (window, coverage,
//     warn, signal wait, action), signal names in canonical form;
//   - shares of tenants and projects: 1;
//   - a tenant's classes: all classes; a project's: its tenant's;
//   - a member's role: member;
//   - a serving quota's namespace: DefaultNamespace(tenant);
//   - a disk quota's project id: DiskProjectID(account);
//   - a user's default account: when none of their memberships is marked
//     default, the first project of the file in which they are not a
//     viewer (viewers get no Slurm association).
//
// Parse calls it; call it on a policy built in code. Applying it twice
// changes nothing, and a policy that validates still does after it.
func (p *Policy) ApplyDefaults() {
	all := make([]string, len(p.Classes))
	for i := range p.Classes {
		c := &p.Classes[i]
		all[i] = c.Name
		if c.Requeue == nil {
			r := c.Requeueable()
			c.Requeue = &r
		}
		if c.Reclaim != nil {
			filled := reclaimrules.Rules{Rules: []reclaimrules.Rule{*c.Reclaim}}.WithDefaults().Rules[0]
			c.Reclaim = &filled
		}
	}
	if p.Cluster.DefaultClass == "" && slices.Contains(all, "batch") {
		p.Cluster.DefaultClass = "batch"
	}
	hasDefault := map[string]bool{}
	for _, t := range p.Tenants {
		for _, pr := range t.Projects {
			for _, m := range pr.Members {
				if m.Default && m.Role != RoleViewer {
					hasDefault[m.User] = true
				}
			}
		}
	}
	for i := range p.Tenants {
		t := &p.Tenants[i]
		if t.Shares == 0 {
			t.Shares = 1
		}
		if len(t.Classes) == 0 {
			t.Classes = slices.Clone(all)
		}
		if t.Serving != nil && t.Serving.Namespace == "" {
			t.Serving.Namespace = DefaultNamespace(t.Name)
		}
		for j := range t.Projects {
			pr := &t.Projects[j]
			if pr.Shares == 0 {
				pr.Shares = 1
			}
			if len(pr.Classes) == 0 {
				pr.Classes = slices.Clone(t.Classes)
			}
			if pr.Disk != nil && pr.Disk.ProjectID == 0 {
				pr.Disk.ProjectID = DiskProjectID(p.Account(t.Name, pr.Name))
			}
			for k := range pr.Members {
				m := &pr.Members[k]
				if m.Role == "" {
					m.Role = RoleMember
				}
				if m.Role != RoleViewer && !hasDefault[m.User] {
					m.Default = true
					hasDefault[m.User] = true
				}
			}
		}
	}
}
