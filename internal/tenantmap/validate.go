package tenantmap

import (
	"fmt"

	"github.com/strata-hpc/strata/internal/strictjson"
)

// Validate returns every problem of m, each a *strictjson.FieldError with
// its JSON path, in document order: the header; names and accounts set,
// made of the characters Slurm accepts, and unique (an account belongs to
// one tenant or project); users listed once per list; roles known.
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
