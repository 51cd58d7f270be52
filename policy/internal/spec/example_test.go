package spec_test

import (
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// exampleFile is the shipped example, installed as
// /etc/strata/policy.yaml.
const exampleFile = "../../../etc/strata/policy.yaml"

// TestExample loads the shipped example and checks what it teaches.
func TestExample(t *testing.T) {
	p, err := spec.Load(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cluster.Name != "gpu" || !slices.Equal(p.Cluster.GPUTypes, []string{"h100", "a100"}) || p.Cluster.DefaultClass != "batch" {
		t.Errorf("cluster = %+v: want gpu with h100, a100, default class batch", p.Cluster)
	}
	if !slices.Equal(p.Admins, []string{"hpcadmin"}) {
		t.Errorf("admins = %v", p.Admins)
	}

	var names []string
	for _, c := range p.Classes {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"train", "batch", "interactive", "serve"}, names); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
	train, _ := p.Class("train")
	if !train.WholeNodes || train.Switches != 1 || !train.Requeueable() || train.MaxTime.Std() != 7*24*time.Hour {
		t.Errorf("train = %+v: want whole nodes, --switches=1, requeueable, 7d", train)
	}
	for class, want := range map[string]struct {
		action reclaimrules.Action
		window time.Duration
		signal string
	}{
		"train":       {reclaimrules.ActionRequeue, 30 * time.Minute, "SIGUSR1"},
		"interactive": {reclaimrules.ActionCancel, 2 * time.Hour, ""},
		"batch":       {reclaimrules.ActionNotify, time.Hour, ""},
	} {
		c, _ := p.Class(class)
		if r := c.Reclaim; r == nil || r.Action != want.action || r.Idle.Window.Std() != want.window || r.Signal.Name != want.signal {
			t.Errorf("%s reclaim = %+v: want %s after %v idle, signal %q", class, r, want.action, want.window, want.signal)
		}
	}
	if serve, _ := p.Class("serve"); serve.Reclaim != nil {
		t.Errorf("serve has a reclaim rule: a server waits for requests by design")
	}

	if len(p.Tenants) != 2 || p.Tenants[0].Name != "acme" || p.Tenants[1].Name != "globex" {
		t.Fatalf("tenants: want acme and globex")
	}
	acme, globex := p.Tenants[0], p.Tenants[1]
	if acme.Limits.GPUsByType["h100"] != 48 || acme.Limits.GPUHours != 50000 || acme.Serving == nil || acme.Serving.GPUs != 8 {
		t.Errorf("acme limits %+v, serving %+v", acme.Limits, acme.Serving)
	}
	if n, ok := globex.Limits.GPUsByType["h100"]; !ok || n != 0 {
		t.Errorf("globex: want h100 forbidden (0), got %v, %v", n, ok)
	}
	if globex.Serving != nil || slices.Contains(globex.Classes, "serve") {
		t.Errorf("globex: want no serving")
	}
	var projects []string
	for _, tn := range p.Tenants {
		for _, pr := range tn.Projects {
			projects = append(projects, p.Account(tn.Name, pr.Name)+" "+pr.Disk.Filesystem)
		}
	}
	if diff := cmp.Diff([]string{"acme-llm lustre", "acme-vision xfs", "globex-rl lustre"}, projects); diff != "" {
		t.Errorf("projects and disk quotas (-want +got):\n%s", diff)
	}
	defaults := map[string]string{} // user → default account
	roles := map[string]string{}
	for _, tn := range p.Tenants {
		for _, pr := range tn.Projects {
			for _, m := range pr.Members {
				roles[m.User+"@"+p.Account(tn.Name, pr.Name)] = m.Role
				if m.Default {
					defaults[m.User] = p.Account(tn.Name, pr.Name)
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]string{
		"alice": "acme-llm", "bob": "acme-llm", "carol": "acme-vision", "erin": "globex-rl", "frank": "globex-rl",
	}, defaults); diff != "" {
		t.Errorf("default accounts (-want +got):\n%s", diff)
	}
	if roles["alice@acme-llm"] != spec.RoleTenantAdmin || roles["dave@acme-llm"] != spec.RoleViewer || roles["carol@acme-vision"] != spec.RoleMember {
		t.Errorf("roles = %v", roles)
	}
}

// TestExampleIsComplete: the example shows every key of the file, so
// that an admin can learn the format from it (in a comment, for a key it
// does not use).
func TestExampleIsComplete(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	s := loadSchema(t)
	objects := []map[string]any{s}
	for _, d := range s["$defs"].(map[string]any) {
		objects = append(objects, d.(map[string]any))
	}
	for _, o := range objects {
		props, _ := o["properties"].(map[string]any)
		for key := range props {
			if !regexp.MustCompile(`(?m)^[ #-]*` + regexp.QuoteMeta(key) + `:`).Match(data) {
				t.Errorf("the example does not show key %s", key)
			}
		}
	}
}
