package compile

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/policy/internal/spec"
	"github.com/strata-hpc/strata/test/policygen"
)

// TestGeneratedPolicies: what test/policygen writes is a valid policy, and
// compiles to exactly the objects its Stats count: one account per tenant
// and per project, one user association per membership, each user in one
// or two projects of one tenant. The benchmark's object counts rest on it.
func TestGeneratedPolicies(t *testing.T) {
	for name, s := range map[string]policygen.Spec{
		"smallest":         {Cluster: "c1", Tenants: 1, Projects: 1, Members: 1},
		"few members":      {Cluster: "c1", Tenants: 2, Projects: 3, Members: 3, Seed: 7},
		"integration size": {Cluster: "c1", Tenants: 5, Projects: 4, Members: 5, Seed: 1, Prefix: "pi"},
		"ci bench size":    {Cluster: "c1", Tenants: 20, Projects: 10, Members: 20, Seed: 1},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			st, err := policygen.Write(&buf, s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := spec.Parse("generated.yaml", buf.Bytes())
			if err != nil {
				t.Fatalf("spec.Parse refuses the generated policy: %v", err)
			}
			state, err := Compile(p)
			if err != nil {
				t.Fatal(err)
			}
			assocs := 0
			for _, u := range state.Users {
				assocs += len(u.Accounts)
				if len(u.Accounts) < 1 || len(u.Accounts) > 2 {
					t.Errorf("user %s is in %d projects, want 1 or 2", u.Name, len(u.Accounts))
				}
				tenant := u.Name[:strings.Index(u.Name, "u")]
				for a, gpus := range u.Accounts {
					if !strings.HasPrefix(a, tenant+"-") || gpus != 8 {
						t.Errorf("user %s: association under %s with %d GPUs, want one of tenant %s's projects with gpus_per_user 8", u.Name, a, gpus, tenant)
					}
				}
			}
			got := policygen.Stats{Tenants: 0, Projects: 0, Users: len(state.Users), Associations: assocs, Classes: len(state.QOS)}
			for _, a := range state.Accounts {
				if a.Parent == "root" {
					got.Tenants++
				} else {
					got.Projects++
				}
			}
			if got != st {
				t.Errorf("compiled %+v, policygen says %+v", got, st)
			}
			if st.Tenants != s.Tenants || st.Projects != s.Tenants*s.Projects || st.Associations != s.Tenants*s.Projects*s.Members {
				t.Errorf("stats %+v do not match the spec %+v", st, s)
			}
			var again bytes.Buffer
			if _, err := policygen.Write(&again, s); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
				t.Errorf("a second run with seed %d wrote another policy", s.Seed)
			}
		})
	}
}

// TestGeneratedSeed: the seed changes which members projects share, and
// nothing else about the size.
func TestGeneratedSeed(t *testing.T) {
	var a, b bytes.Buffer
	sa, _ := policygen.Write(&a, policygen.Spec{Cluster: "c1", Tenants: 3, Projects: 5, Members: 12, Seed: 1})
	sb, _ := policygen.Write(&b, policygen.Spec{Cluster: "c1", Tenants: 3, Projects: 5, Members: 12, Seed: 2})
	if bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("seeds 1 and 2 wrote the same policy")
	}
	if sa.Associations != sb.Associations || sa.Projects != sb.Projects || sa.Users == sa.Associations {
		t.Errorf("seed 1: %+v, seed 2: %+v: want the same associations and projects, and some users in two projects", sa, sb)
	}
}

// TestGeneratedBadSpec: a spec that cannot make a policy is an error.
func TestGeneratedBadSpec(t *testing.T) {
	for name, s := range map[string]policygen.Spec{
		"no cluster":  {Tenants: 1, Projects: 1, Members: 1},
		"no tenants":  {Cluster: "c1", Projects: 1, Members: 1},
		"no projects": {Cluster: "c1", Tenants: 1, Members: 1},
		"no members":  {Cluster: "c1", Tenants: 1, Projects: 1},
	} {
		if _, err := policygen.Write(&bytes.Buffer{}, s); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
