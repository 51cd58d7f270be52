package core

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
)

// TestCoreAsASecondCaller: the core answers a caller without HTTP (as the
// pages call it): a job of theirs as the API's type, and another tenant's
// job as exactly the problem of a job that does not exist; a list holds
// only what rbac lets them read; an operator's view is refused as a
// problem with its stable code and hint.
func TestCoreAsASecondCaller(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	mem := auth.Identity{User: "mem", Via: "page"}
	j, p := h.server.Job(ctx, mem, "gpu1", 910101)
	if p != nil || j.Id != 910101 || j.Project != "llm" || j.User != "mem" {
		t.Fatalf("own job = %+v, %v", j, p)
	}
	_, foreign := h.server.Job(ctx, mem, "gpu1", 910104)
	_, missing := h.server.Job(ctx, mem, "gpu1", 999999)
	if foreign == nil || missing == nil || foreign.Status != http.StatusNotFound || foreign.Code != api.NotFound {
		t.Fatalf("foreign = %+v, missing = %+v", foreign, missing)
	}
	if foreign.Hint != missing.Hint || foreign.Code != missing.Code {
		t.Errorf("a foreign job's problem differs from a missing one's: %+v, %+v", foreign, missing)
	}
	page, p := h.server.Jobs(ctx, mem, api.ListJobsParams{})
	if p != nil {
		t.Fatal(p)
	}
	var got []int64
	for _, j := range page.Jobs {
		got = append(got, j.Id)
	}
	// mem, a member of acme's llm, reads llm's jobs on both clusters and
	// nothing of vision or globex: newest first, then by id.
	if diff := cmp.Diff([]int64{920201, 910102, 910101}, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	for _, j := range page.Jobs {
		if j.Tenant != "acme" {
			t.Errorf("mem reads job %d of tenant %q", j.Id, j.Tenant)
		}
	}
	_, p = h.server.Overview(ctx, mem)
	if p == nil || p.Status != http.StatusForbidden || p.Code != api.Forbidden || p.Hint == "" || p.API().Hint == nil {
		t.Errorf("a member's overview = %+v", p)
	}
}
