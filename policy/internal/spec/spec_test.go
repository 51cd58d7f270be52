package spec_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func TestDiagnosticError(t *testing.T) {
	for name, tc := range map[string]struct {
		d    spec.Diagnostic
		want string
	}{
		"everything": {
			d:    spec.Diagnostic{File: "policy.yaml", Line: 3, Col: 7, Path: "tenants[0].shares", Msg: "shares -1 is negative", Hint: "give 1 or more"},
			want: "policy.yaml:3:7: shares -1 is negative (hint: give 1 or more)",
		},
		"no hint": {
			d:    spec.Diagnostic{File: "policy.yaml", Line: 3, Col: 7, Msg: "bad"},
			want: "policy.yaml:3:7: bad",
		},
		"no position: the path instead": {
			d:    spec.Diagnostic{File: "policy.yaml", Path: "tenants[0].shares", Msg: "bad", Hint: "fix it"},
			want: "policy.yaml: tenants[0].shares: bad (hint: fix it)",
		},
		"no file": {
			d:    spec.Diagnostic{Line: 1, Col: 1, Msg: "bad"},
			want: "1:1: bad",
		},
		"nothing but a message": {
			d:    spec.Diagnostic{Msg: "bad"},
			want: "bad",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.d.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	ds := spec.Diagnostics{{File: "f", Line: 1, Col: 1, Msg: "a"}, {File: "f", Line: 2, Col: 1, Msg: "b"}}
	if got, want := ds.Error(), "f:1:1: a\nf:2:1: b"; got != want {
		t.Errorf("Diagnostics.Error() = %q, want %q", got, want)
	}
}

// inCode is a valid policy as the compiler's tests might build it.
func inCode() *spec.Policy {
	return &spec.Policy{
		APIVersion: spec.APIVersion,
		Kind:       spec.Kind,
		Cluster:    spec.Cluster{Name: "gpu", GPUTypes: []string{"h100"}},
		Classes: []spec.Class{
			{Name: "train", Partition: "gpu", Reclaim: &reclaimrules.Rule{Action: reclaimrules.ActionRequeue}},
			{Name: "batch", Partition: "gpu"},
			{Name: "interactive", Partition: "gpu"},
		},
		Tenants: []spec.Tenant{{
			Name:    "acme",
			Classes: []string{"train", "batch"},
			Serving: &spec.Serving{GPUs: 1, Replicas: 1},
			Projects: []spec.Project{
				{Name: "llm", Members: []spec.Member{{User: "alice"}, {User: "dave", Role: spec.RoleViewer}, {User: "bob", Default: true}}},
				{Name: "vision", Classes: []string{"batch"}, Members: []spec.Member{{User: "dave"}, {User: "alice"}, {User: "bob"}}},
			},
		}},
	}
}

// TestValidateInCode: a policy built in code has no positions, so its
// diagnostics name the path.
func TestValidateInCode(t *testing.T) {
	if ds := inCode().Validate("p.yaml"); ds != nil {
		t.Fatalf("valid policy: %v", ds)
	}
	for name, tc := range map[string]struct {
		change   func(p *spec.Policy)
		wantErrs []string
	}{
		"missing names": {
			change: func(p *spec.Policy) {
				p.APIVersion, p.Kind, p.Cluster.Name = "", "", ""
				p.Tenants[0].Projects[0].Name = ""
				p.Tenants[0].Projects[0].Members[0].User = ""
			},
			wantErrs: []string{
				"p.yaml: apiVersion: missing apiVersion (hint: start the file with apiVersion: strata/v1)",
				"p.yaml: kind: missing kind (hint: add kind: Policy)",
				"p.yaml: cluster.name: cluster has no name (hint: set cluster.name to the ClusterName of slurm.conf)",
				"p.yaml: tenants[0].projects[0].name: project has no name (hint: give it a name: lowercase letters, digits, '_' and '-', starting with a letter)",
				"p.yaml: tenants[0].projects[0].members[0].user: member with no user name (hint: give the Unix user name)",
			},
		},
		"no classes, no tenants": {
			change: func(p *spec.Policy) { p.Classes, p.Tenants = nil, nil },
			wantErrs: []string{
				"p.yaml: classes: no workload classes (hint: define at least one class (train, batch, interactive, serve): every job runs in one)",
				"p.yaml: tenants: no tenants (hint: define at least one tenant with a project: jobs run in project accounts)",
			},
		},
		"reclaim name and match": {
			change: func(p *spec.Policy) {
				p.Classes[0].Reclaim.Name = "idle"
				p.Classes[0].Reclaim.Match.Users = []string{"alice"}
			},
			wantErrs: []string{
				"p.yaml: classes[0].reclaim.name: name is not allowed in a reclaim rule (hint: remove it: strata-policy names the rule after its class)",
				"p.yaml: classes[0].reclaim.match: match is not allowed in a reclaim rule (hint: remove it: strata-policy matches the rule to the jobs of its class)",
			},
		},
		"requeue off under a requeueing rule": {
			change: func(p *spec.Policy) { p.Classes[0].Requeue = new(bool) },
			wantErrs: []string{
				`p.yaml: classes[0].reclaim.action: reclaim requeues, but jobs of class "train" are not requeueable (hint: set requeue: true on the class, or use action: cancel)`,
			},
		},
		"duplicate positions are paths": {
			change: func(p *spec.Policy) { p.Classes[2].Name = "train" },
			wantErrs: []string{
				`p.yaml: classes[2].name: class "train" is defined twice (first at classes[0].name) (hint: rename or remove one of them)`,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := inCode()
			tc.change(p)
			var got []string
			for _, d := range p.Validate("p.yaml") {
				got = append(got, d.Error())
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyDefaults(t *testing.T) {
	p := inCode()
	p.ApplyDefaults()
	if ds := p.Validate("p.yaml"); ds != nil {
		t.Errorf("does not validate after ApplyDefaults: %v", ds)
	}
	again := inCode()
	again.ApplyDefaults()
	again.ApplyDefaults()
	if diff := cmp.Diff(p, again); diff != "" {
		t.Errorf("ApplyDefaults twice differs from once (-once +twice):\n%s", diff)
	}
	if p.Cluster.DefaultClass != "batch" {
		t.Errorf("default class = %q, want batch", p.Cluster.DefaultClass)
	}
	for i, want := range []bool{true, true, false} {
		if c := p.Classes[i]; c.Requeue == nil || *c.Requeue != want {
			t.Errorf("class %s: requeue = %v, want %v", c.Name, c.Requeue, want)
		}
	}
	if r := p.Classes[0].Reclaim; r.Warn.Std() != reclaimrules.DefaultWarn || r.Idle.Window.Std() != reclaimrules.DefaultWindow {
		t.Errorf("reclaim rule defaults not filled: %+v", r)
	}
	ten := p.Tenants[0]
	if ten.Shares != 1 || ten.Serving.Namespace != "strata-acme" {
		t.Errorf("tenant shares %d, namespace %q: want 1, strata-acme", ten.Shares, ten.Serving.Namespace)
	}
	if diff := cmp.Diff([]string{"train", "batch"}, ten.Projects[0].Classes); diff != "" {
		t.Errorf("project without classes: want the tenant's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"batch"}, ten.Projects[1].Classes); diff != "" {
		t.Errorf("project with classes (-want +got):\n%s", diff)
	}
	// alice: first project; dave: a viewer in llm, so vision; bob: the
	// one marked.
	wantMembers := [][]spec.Member{
		{{User: "alice", Role: "member", Default: true}, {User: "dave", Role: "viewer"}, {User: "bob", Role: "member", Default: true}},
		{{User: "dave", Role: "member", Default: true}, {User: "alice", Role: "member"}, {User: "bob", Role: "member"}},
	}
	for i, want := range wantMembers {
		if diff := cmp.Diff(want, ten.Projects[i].Members); diff != "" {
			t.Errorf("members of %s (-want +got):\n%s", ten.Projects[i].Name, diff)
		}
	}
}

func TestAccount(t *testing.T) {
	var p spec.Policy
	if got := p.Account("acme", "llm"); got != "acme-llm" {
		t.Errorf("Account = %q, want acme-llm", got)
	}
}

func TestRequeueable(t *testing.T) {
	yes, no := true, false
	for name, tc := range map[string]struct {
		c    spec.Class
		want bool
	}{
		"train":            {c: spec.Class{Name: "train"}, want: true},
		"batch":            {c: spec.Class{Name: "batch"}, want: true},
		"interactive":      {c: spec.Class{Name: "interactive"}, want: false},
		"site-defined":     {c: spec.Class{Name: "long"}, want: false},
		"train, set false": {c: spec.Class{Name: "train", Requeue: &no}, want: false},
		"serve, set true":  {c: spec.Class{Name: "serve", Requeue: &yes}, want: true},
	} {
		if got := tc.c.Requeueable(); got != tc.want {
			t.Errorf("%s: Requeueable = %v, want %v", name, got, tc.want)
		}
	}
}

// TestDiskProjectID: the derived id is 2^30 plus the 32-bit FNV-1a hash
// of the account modulo 2^30. The hashes are the published FNV-1a test
// vectors: "" 0x811c9dc5, "a" 0xe40c292c, "foobar" 0xbf9cf968.
func TestDiskProjectID(t *testing.T) {
	for account, want := range map[string]int{
		"":       1<<30 + 0x811c9dc5%(1<<30), // 1092394437
		"a":      1<<30 + 0xe40c292c%(1<<30), // 1678518572
		"foobar": 1<<30 + 0xbf9cf968%(1<<30), // 2140993896
	} {
		got := spec.DiskProjectID(account)
		if got != want {
			t.Errorf("DiskProjectID(%q) = %d, want %d", account, got, want)
		}
		if got < spec.MinDerivedProjectID || got > spec.MaxDerivedProjectID {
			t.Errorf("DiskProjectID(%q) = %d, outside [%d, %d]", account, got, spec.MinDerivedProjectID, spec.MaxDerivedProjectID)
		}
	}
}
