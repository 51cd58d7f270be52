package rbac

import (
	"os"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/tenantmap"
)

func load(t *testing.T) *tenantmap.Map {
	t.Helper()
	m, err := tenantmap.Load("testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAllowed: every action for every role against a job of the user's
// own, one of another user of the same project, one of another project
// of the same tenant, and one of another tenant.
func TestAllowed(t *testing.T) {
	m := load(t)
	ownOf := func(u string) Target { return Target{Tenant: "acme", Project: "llm", User: u} }
	sameProject := Target{Tenant: "acme", Project: "llm", User: "mem2"}
	otherProject := Target{Tenant: "acme", Project: "vision", User: "vmem"}
	otherTenant := Target{Tenant: "globex", Project: "rl", User: "gmem"}
	node := Target{}
	type want struct{ own, sameProject, otherProject, otherTenant, node bool }
	tests := map[string]map[Action]want{
		"ops": {
			ReadJobs: {true, true, true, true, true}, Submit: {}, ControlOwn: {own: true},
			ControlTenant: {true, true, true, true, true}, OperatorViews: {true, true, true, true, true}, DrainNodes: {true, true, true, true, true},
			DeployModels: {true, true, true, true, true},
		},
		"tadmin": {
			ReadJobs: {true, true, true, false, false}, Submit: {}, ControlOwn: {own: true},
			ControlTenant: {true, true, true, false, false}, OperatorViews: {true, true, true, false, false}, DrainNodes: {},
			DeployModels: {true, true, true, false, false},
		},
		"mem": {
			ReadJobs: {true, true, false, false, false}, Submit: {true, true, false, false, false}, ControlOwn: {own: true},
			ControlTenant: {}, OperatorViews: {}, DrainNodes: {}, DeployModels: {true, true, false, false, false},
		},
		"view": {
			ReadJobs: {true, true, false, false, false}, Submit: {}, ControlOwn: {}, ControlTenant: {}, OperatorViews: {}, DrainNodes: {},
		},
		"nobody": {},
	}
	for user, actions := range tests {
		for _, row := range Table {
			w := actions[row.Action]
			for name, c := range map[string]struct {
				t    Target
				want bool
			}{
				"own": {ownOf(user), w.own}, "same project": {sameProject, w.sameProject}, "other project": {otherProject, w.otherProject},
				"other tenant": {otherTenant, w.otherTenant}, "node": {node, w.node},
			} {
				if got := Allowed(m, user, row.Action, c.t); got != c.want {
					t.Errorf("Allowed(%s, %q, %s) = %v, want %v", user, row.Action, name, got, c.want)
				}
			}
		}
	}
}

// TestCanControl: own jobs, or the tenant's as its admin; never a job a
// member only shares a project with.
func TestCanControl(t *testing.T) {
	m := load(t)
	for _, c := range []struct {
		user string
		t    Target
		want bool
	}{
		{"mem", Target{"acme", "llm", "mem"}, true},
		{"mem", Target{"acme", "llm", "mem2"}, false},
		{"view", Target{"acme", "llm", "view"}, false},
		{"tadmin", Target{"acme", "vision", "vmem"}, true},
		{"tadmin", Target{"globex", "rl", "gmem"}, false},
		{"ops", Target{"globex", "rl", "gmem"}, true},
		{"gmem", Target{"acme", "llm", "gmem"}, false}, // their name on a job in a project not theirs
	} {
		if got := CanControl(m, c.user, c.t); got != c.want {
			t.Errorf("CanControl(%s, %+v) = %v, want %v", c.user, c.t, got, c.want)
		}
	}
}

// TestREADME: portal-api/README.md prints the table as it is enforced.
func TestREADME(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), Markdown()) {
		t.Errorf("portal-api/README.md does not print the RBAC table as rbac.Table has it; put this there:\n%s", Markdown())
	}
}
