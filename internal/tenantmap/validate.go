package tenantmap

import (
	"fmt"
	"maps"
	"slices"

	"github.com/strata-hpc/strata/internal/strictjson"
)

// Validate returns every problem of m, each a *strictjson.FieldError with
// its JSON path, in document order: the header; names and accounts set,
// made of the characters Slurm accepts, and unique (an account belongs to
// one tenant or project); users listed once per list; roles known;
// classes named once; limits positive (gpus_by_type may be 0), sources
// with a path and no negative line.
func (m *Map) Validate() []error {
	v := &validator{accounts: map[string]string{}}
	switch m.APIVersion {
	case APIVersion:
	case "":
		v.bad("apiVersion", "missing: use %s", APIVersion)
	default:
		v.bad("apiVersion", "%q is not supported: use %s", m.APIVersion, APIVersion)
	}
	if m.Kind != Kind {
		v.bad("kind", "%q: want %s", m.Kind, Kind)
	}
	if m.Cluster == "" {
		v.bad("cluster", "required: the Slurm ClusterName the map describes")
	}
	v.users("admins", m.Admins)
	classes := map[string]int{}
	for i, c := range m.Classes {
		p := fmt.Sprintf("classes[%d]", i)
		if j, dup := classes[c.Name]; dup && c.Name != "" {
			v.bad(p+".name", "%q is also classes[%d]: names must be unique", c.Name, j)
		} else {
			classes[c.Name] = i
		}
		if c.Name == "" {
			v.bad(p+".name", "required")
		}
		v.source(p+".source", c.Source)
		v.limit(p+".max_gpus_per_job", c.MaxGPUsPerJob, 1)
		if c.MaxTime != nil {
			if c.MaxTime.Value <= 0 {
				v.bad(p+".max_time.value", "%s: want a positive time limit (leave max_time out for none)", c.MaxTime.Value)
			}
			v.source(p+".max_time.source", c.MaxTime.Source)
		}
	}
	tenants := map[string]int{}
	for i, t := range m.Tenants {
		p := fmt.Sprintf("tenants[%d]", i)
		if j, dup := tenants[t.Name]; dup && t.Name != "" {
			v.bad(p+".name", "%q is also tenants[%d]: names must be unique", t.Name, j)
		} else {
			tenants[t.Name] = i
		}
		v.name(p+".name", t.Name)
		v.account(p+".account", t.Account, t.Name)
		v.users(p+".admins", t.Admins)
		v.source(p+".source", t.Source)
		v.limits(p+".limits", t.Limits)
		projects := map[string]int{}
		for j, pr := range t.Projects {
			pp := fmt.Sprintf("%s.projects[%d]", p, j)
			if k, dup := projects[pr.Name]; dup && pr.Name != "" {
				v.bad(pp+".name", "%q is also %s.projects[%d]: names must be unique in a tenant", pr.Name, p, k)
			} else {
				projects[pr.Name] = j
			}
			v.name(pp+".name", pr.Name)
			v.account(pp+".account", pr.Account, t.Name+"/"+pr.Name)
			v.names(pp+".classes", pr.Classes)
			v.source(pp+".source", pr.Source)
			v.limits(pp+".limits", pr.Limits)
			seen := map[string]bool{}
			for k, mb := range pr.Members {
				mp := fmt.Sprintf("%s.members[%d]", pp, k)
				switch {
				case mb.User == "":
					v.bad(mp+".user", "required")
				case seen[mb.User]:
					v.bad(mp+".user", "%q is listed twice in the project", mb.User)
				}
				seen[mb.User] = true
				if mb.Role == "" {
					v.bad(mp+".role", "required: use %s", roleList())
				} else if err := new(Role).UnmarshalText([]byte(mb.Role)); err != nil {
					v.bad(mp+".role", "%s", err)
				}
				v.source(mp+".source", mb.Source)
				v.source(mp+".default_source", mb.DefaultSource)
				if mb.DefaultSource != nil && !mb.Default {
					v.bad(mp+".default_source", "set on a member that is not the default")
				}
			}
		}
	}
	return v.errs
}

type validator struct {
	errs     []error
	accounts map[string]string // account → whose
}

func (v *validator) bad(path, format string, args ...any) {
	v.errs = append(v.errs, &strictjson.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) name(path, s string) {
	switch {
	case s == "":
		v.bad(path, "required")
	case !validName(s):
		v.bad(path, "%q: use lower-case letters, digits, '_' and '-' only (Slurm account names)", s)
	}
}

func (v *validator) account(path, account, whose string) {
	v.name(path, account)
	if account == "" {
		return
	}
	if o, dup := v.accounts[account]; dup {
		v.bad(path, "%q is also %s's: an account belongs to one tenant or project", account, o)
		return
	}
	v.accounts[account] = whose
}

// source checks a source: a path, and no negative line.
func (v *validator) source(path string, s *Source) {
	if s == nil {
		return
	}
	if s.Line < 0 {
		v.bad(path+".line", "%d: want a line number, or 0 for none", s.Line)
	}
	if s.Path == "" {
		v.bad(path+".path", "required: the value's path in the policy file")
	}
}

// limits checks an association's limits: each at least 1 (a limit of 0
// is no limit, left out), but a GPU type's, where 0 forbids the type.
func (v *validator) limits(path string, l *Limits) {
	if l == nil {
		return
	}
	v.limit(path+".gpus", l.GPUs, 1)
	for _, typ := range slices.Sorted(maps.Keys(l.GPUsByType)) {
		lt := l.GPUsByType[typ]
		if typ == "" {
			v.bad(path+".gpus_by_type", "a GPU type is empty")
		}
		v.limit(path+".gpus_by_type."+typ, &lt, 0)
	}
	v.limit(path+".cpus", l.CPUs, 1)
	v.limit(path+".memory_gb", l.MemoryGB, 1)
	v.limit(path+".running_jobs", l.RunningJobs, 1)
	v.limit(path+".gpu_hours", l.GPUHours, 1)
	v.limit(path+".gpus_per_user", l.GPUsPerUser, 1)
}

func (v *validator) limit(path string, l *Limit, least int64) {
	if l == nil {
		return
	}
	if l.Value < least {
		if least > 0 {
			v.bad(path+".value", "%d: want at least %d (leave the limit out for none)", l.Value, least)
		} else {
			v.bad(path+".value", "%d: want 0 or more", l.Value)
		}
	}
	v.source(path+".source", l.Source)
}

// users checks a list of user names: none empty, none twice.
func (v *validator) users(path string, list []string) {
	v.errs = append(v.errs, strictjson.Unique(path, list, "user name")...)
}

// names checks a list of names: none empty, none twice.
func (v *validator) names(path string, list []string) {
	v.errs = append(v.errs, strictjson.Unique(path, list, "name")...)
}

// validName: Slurm lower-cases account names, so the map holds them as
// Slurm does.
func validName(s string) bool {
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return s != ""
}
