package core

import (
	"slices"
	"testing"

	"github.com/strata-hpc/strata/internal/tenantmap"
)

// TestReadableAccounts: slurmdbd is asked for the accounts whose jobs the
// caller may read by rbac's "read project jobs", as live jobs are read:
// a cluster admin every account (all), a tenant's admin the tenant's, a
// member or viewer their project's, no role nothing; a project narrows it.
func TestReadableAccounts(t *testing.T) {
	m, err := tenantmap.Load("../service/testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, project string
		want          []string
		all           bool
	}{
		{user: "ops", want: []string{"acme", "acme-llm", "acme-vision", "globex", "globex-rl"}, all: true},
		{user: "ops", project: "llm", want: []string{"acme-llm"}},
		{user: "tadmin", want: []string{"acme", "acme-llm", "acme-vision"}},
		{user: "tadmin", project: "vision", want: []string{"acme-vision"}},
		{user: "tadmin", project: "rl"},
		{user: "mem", want: []string{"acme-llm"}},
		{user: "view", want: []string{"acme-llm"}},
		{user: "vmem", want: []string{"acme-vision"}},
		{user: "mem", project: "vision"},
		{user: "gmem", want: []string{"globex-rl"}},
		{user: "nobody"},
		{user: ""},
	} {
		got, all := readableAccounts(m, tc.user, tc.project)
		if !slices.Equal(got, tc.want) || all != tc.all {
			t.Errorf("readableAccounts(%q, project %q) = %v, all %t; want %v, all %t", tc.user, tc.project, got, all, tc.want, tc.all)
		}
	}
	if got, all := readableAccounts(nil, "ops", ""); got != nil || all {
		t.Errorf("no tenant map: %v, %t", got, all)
	}
}
