package service

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// TestProjects: GET /v1/projects lists the projects whose jobs the caller
// may read, on each cluster, with their role; a project's limits carry
// the policy line of tenants.json and its use the snapshot's (acme-llm's
// GPU limit of 4, with 910101's GPUs in use on gpu1); nobody has none.
func TestProjects(t *testing.T) {
	h := newHarness(t)
	for user, want := range map[string][]string{
		"mem":    {"gpu1/acme/llm member", "gpu2/acme/llm member"},
		"view":   {"gpu1/acme/llm viewer", "gpu2/acme/llm viewer"},
		"tadmin": {"gpu1/acme/llm tenant-admin", "gpu1/acme/vision tenant-admin", "gpu2/acme/llm tenant-admin", "gpu2/acme/vision tenant-admin"},
		"gmem":   {"gpu1/globex/rl member", "gpu2/globex/rl member"},
		"ops": {"gpu1/acme/llm cluster-admin", "gpu1/acme/vision cluster-admin", "gpu1/globex/rl cluster-admin",
			"gpu2/acme/llm cluster-admin", "gpu2/acme/vision cluster-admin", "gpu2/globex/rl cluster-admin"},
		"nobody": nil,
	} {
		code, body := h.do(user, "GET", "/v1/projects", nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", user, code, body)
		}
		var out api.ProjectList
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range out.Projects {
			got = append(got, fmt.Sprintf("%s/%s/%s %s", p.Cluster, p.Tenant, p.Project, deref(p.Role)))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: projects (-want +got):\n%s", user, diff)
		}
		if user != "mem" {
			continue
		}
		llm := out.Projects[slices.IndexFunc(out.Projects, func(p api.Project) bool { return p.Cluster == "gpu1" })]
		i := slices.IndexFunc(llm.Limits, func(l api.ProjectLimit) bool { return l.Name == "gpus" })
		if i < 0 {
			t.Fatalf("acme-llm has no gpus limit: %s", body)
		}
		gpus := llm.Limits[i]
		if gpus.Policy == nil || *gpus.Policy != 4 || deref(gpus.PolicyLine) != "policy.yaml:52" || gpus.Unit != "GPUs" ||
			!strings.Contains(gpus.Slurm, "gres/gpu") {
			t.Errorf("acme-llm's gpus limit = %+v", gpus)
		}
		if llm.Usage.RunningJobs != 1 || llm.Usage.PendingJobs != 1 || llm.Usage.Gpus < 1 || gpus.Used == nil || *gpus.Used != float64(llm.Usage.Gpus) {
			t.Errorf("acme-llm's use = %+v, gpus used %v", llm.Usage, gpus.Used)
		}
	}
	if code, body := h.do("mem", "GET", "/v1/projects?cluster=nowhere", nil); code != 404 || !strings.Contains(string(body), "not_found") {
		t.Errorf("an unknown cluster = %d %s", code, body)
	}
	if code, body := h.do("mem", "GET", "/v1/projects?cluster=gpu2", nil); code != 200 || strings.Contains(string(body), `"gpu1"`) {
		t.Errorf("one cluster = %d %s", code, body)
	}
}
