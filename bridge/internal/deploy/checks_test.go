package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// wantRefusal checks that err is a *Refusal of check whose reason holds
// every part of want; check "" wants no error.
func wantRefusal(t *testing.T, err error, check string, want ...string) {
	t.Helper()
	if check == "" {
		if err != nil {
			t.Fatalf("err = %v, want none", err)
		}
		return
	}
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal of the %s check", err, check)
	}
	if r.Check != check {
		t.Errorf("refused by the %s check (%s), want the %s check", r.Check, r.Reason, check)
	}
	for _, w := range want {
		if !strings.Contains(r.Reason, w) {
			t.Errorf("reason %q lacks %q", r.Reason, w)
		}
	}
	if r.Fix == "" {
		t.Errorf("refusal %q says no fix", r.Reason)
	}
}

func TestCheckFinished(t *testing.T) {
	tests := map[string]struct {
		state     slurmrest.JobState
		exit      int
		wantCheck string
		want      string
	}{
		"completed, exit 0":    {state: slurmrest.JobState{"COMPLETED"}, exit: 0},
		"failed, exit 1":       {state: slurmrest.JobState{"FAILED"}, exit: 1, wantCheck: CheckJob, want: "job 7 is FAILED with exit code 1"},
		"still running":        {state: slurmrest.JobState{"RUNNING"}, wantCheck: CheckJob, want: "RUNNING"},
		"cancelled":            {state: slurmrest.JobState{"CANCELLED"}, wantCheck: CheckJob, want: "CANCELLED"},
		"completed, exit 3":    {state: slurmrest.JobState{"COMPLETED"}, exit: 3, wantCheck: CheckJob, want: "exit code 3"},
		"no state from Slurm":  {wantCheck: CheckJob, want: "unknown state"},
		"completing, not done": {state: slurmrest.JobState{"COMPLETING"}, wantCheck: CheckJob, want: "COMPLETING"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantRefusal(t, CheckFinished(slurmrest.Job{ID: 7, State: tc.state, ExitCode: tc.exit}), tc.wantCheck, tc.want)
		})
	}
}

var serving = &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{
	{Name: "acme", Namespace: "strata-acme", GPUs: 8, Replicas: 4, Projects: []servingquota.Project{{Name: "llm", Account: "acme-llm"}}},
	{Name: "globex", Namespace: "strata-globex", Projects: []servingquota.Project{{Name: "cv", Account: "globex-cv"}}},
}}

func TestCheckAccount(t *testing.T) {
	tests := map[string]struct {
		account              string
		wantTenant, wantProj string
		wantCheck            string
		want                 string
	}{
		"a project's account":     {account: "acme-llm", wantTenant: "acme", wantProj: "llm"},
		"the tenant's own":        {account: "acme", wantTenant: "acme"},
		"not in the policy":       {account: "testbed", wantCheck: CheckTenant, want: `account "testbed" is not in serving.json`},
		"tenant without quota":    {account: "globex-cv", wantCheck: CheckTenant, want: "tenant globex may not serve"},
		"job without any account": {account: "", wantCheck: CheckTenant, want: "no account"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := CheckAccount(serving, tc.account)
			wantRefusal(t, err, tc.wantCheck, tc.want)
			if tc.wantCheck == "" && (o.Tenant.Name != tc.wantTenant || o.Project != tc.wantProj) {
				t.Errorf("owner = %s/%s, want %s/%s", o.Tenant.Name, o.Project, tc.wantTenant, tc.wantProj)
			}
		})
	}
}

// The model path checks on a real tree: the Slurm side's /shared is
// <tmp>/shared on this host (local), the allowed root is /shared/proj.
func TestCheckModelPath(t *testing.T) {
	host := t.TempDir()
	local := func(p string) string { return filepath.Join(host, p) }
	mk := func(p string, data string) {
		if err := os.MkdirAll(filepath.Dir(local(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local(p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("/shared/proj/model.bin", "weights")
	mk("/shared/proj/dir/config.json", "{}")
	mk("/shared/projx/model.bin", "weights")
	mk("/shared/other/secret.bin", "secret")
	if err := os.MkdirAll(local("/shared/proj/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(local("/shared/other"), local("/shared/proj/escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dir", local("/shared/proj/inside")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(local("/shared/proj/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots := []string{"/shared/proj"}

	tests := map[string]struct {
		path      string
		wantCheck string
		want      string
	}{
		"a file":                     {path: "/shared/proj/model.bin"},
		"a folder":                   {path: "/shared/proj/dir"},
		"an empty folder":            {path: "/shared/proj/empty"},
		"a link inside the root":     {path: "/shared/proj/inside"},
		"no path":                    {path: "", wantCheck: CheckModel, want: "no model path"},
		"relative":                   {path: "shared/proj/model.bin", wantCheck: CheckModel, want: "not absolute"},
		"not clean":                  {path: "/shared/proj/../other/secret.bin", wantCheck: CheckModel, want: "not clean"},
		"outside every root":         {path: "/shared/other/secret.bin", wantCheck: CheckModel, want: "not under an allowed root (/shared/proj)"},
		"a sibling with the prefix":  {path: "/shared/projx/model.bin", wantCheck: CheckModel, want: "not under an allowed root"},
		"missing":                    {path: "/shared/proj/nope", wantCheck: CheckModel, want: "does not exist"},
		"a link out of the root":     {path: "/shared/proj/escape/secret.bin", wantCheck: CheckModel, want: "outside /shared/proj by a symbolic link"},
		"neither file nor folder":    {path: "/shared/proj/fifo", wantCheck: CheckModel, want: "neither a file nor a folder"},
		"the allowed root itself ok": {path: "/shared/proj"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantRefusal(t, CheckModelPath(tc.path, roots, local), tc.wantCheck, tc.want)
		})
	}

	t.Run("unreadable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads every file: run the unit tests as another user to check this case")
		}
		mk("/shared/proj/locked.bin", "x")
		if err := os.Chmod(local("/shared/proj/locked.bin"), 0); err != nil {
			t.Fatal(err)
		}
		wantRefusal(t, CheckModelPath("/shared/proj/locked.bin", roots, local), CheckModel, "not readable")
	})
}

// Quota: 8 GPUs and 4 replicas. Other deployments of the tenant count
// with GPUs x max replicas; the deployment being replaced (same name) and
// other tenants' do not.
func TestCheckServingQuota(t *testing.T) {
	acme := serving.Tenants[0]
	others := []store.Usage{
		{Name: "a", Tenant: "acme", GPUs: 2, MaxReplicas: 2}, // 4 GPUs, 2 replicas
		{Name: "x", Tenant: "globex", GPUs: 8, MaxReplicas: 8},
	}
	tests := map[string]struct {
		name      string
		ask       Ask
		wantCheck string
		want      []string
	}{
		"fits exactly":                {name: "b", ask: Ask{GPUs: 2, MaxReplicas: 2}},
		"one GPU too many":            {name: "b", ask: Ask{GPUs: 5, MaxReplicas: 1}, wantCheck: CheckQuota, want: []string{"serving quota is 8 GPUs", "a (2 GPUs x 2 replicas) hold 4 GPUs", "b asks for 5 (5 per replica x 1 replicas): 9 > 8"}},
		"replicas over, GPUs fit":     {name: "b", ask: Ask{GPUs: 0, MaxReplicas: 3}, wantCheck: CheckQuota, want: []string{"serving quota is 4 replicas", "5 > 4"}},
		"a new version replaces a's":  {name: "a", ask: Ask{GPUs: 4, MaxReplicas: 2}},
		"a new version that is more":  {name: "a", ask: Ask{GPUs: 3, MaxReplicas: 3}, wantCheck: CheckQuota, want: []string{"no other deployment holds any", "9 > 8"}},
		"autoscaling counts its max":  {name: "b", ask: Ask{GPUs: 1, MaxReplicas: 3}, wantCheck: CheckQuota, want: []string{"replicas", "5 > 4"}},
		"CPU-only replicas fit a GPU": {name: "b", ask: Ask{GPUs: 0, MaxReplicas: 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantRefusal(t, CheckServingQuota(acme, others, tc.name, tc.ask), tc.wantCheck, tc.want...)
		})
	}
}

// tiered is a tenant with whole GPUs, MIG slices of one profile and MPS
// shares, which asks for isolation, with its serving: block at line 40.
var tiered = servingquota.Tenant{Name: "acme", Namespace: "strata-acme", GPUs: 2, Replicas: 6, Isolation: true, ServingLine: 40,
	Tiers: []servingquota.Tier{
		{Name: "mig-1g.10gb", Resource: "nvidia.com/mig-1g.10gb", Quota: 4, Line: 44},
		{Name: "mps", Resource: "nvidia.com/gpu.mps", Quota: 2, Line: 45},
	}}

// Each tier is counted on its own; a tier the tenant may not use is
// refused by the tier check with the policy line; CPU-only replicas use
// no tier.
func TestCheckServingQuotaTiers(t *testing.T) {
	others := []store.Usage{
		{Name: "a", Tenant: "acme", GPUs: 1, Tier: "mig-1g.10gb", MaxReplicas: 3}, // 3 of 4 MIG slices
		{Name: "b", Tenant: "acme", GPUs: 1, Tier: "dedicated", MaxReplicas: 1},   // 1 of 2 GPUs
	}
	tests := map[string]struct {
		name      string
		ask       Ask
		wantCheck string
		want      []string
	}{
		"the last MIG slice":        {name: "c", ask: Ask{GPUs: 1, Tier: "mig-1g.10gb", MaxReplicas: 1}},
		"one MIG slice too many":    {name: "c", ask: Ask{GPUs: 1, Tier: "mig-1g.10gb", MaxReplicas: 2}, wantCheck: CheckQuota, want: []string{"serving quota is 4 nvidia.com/mig-1g.10gb (tier mig-1g.10gb, at line 44 of the policy)", "a (1 nvidia.com/mig-1g.10gb x 3 replicas), b (1 replicas) hold 3 nvidia.com/mig-1g.10gb", "5 > 4"}},
		"MIG does not count as GPU": {name: "c", ask: Ask{GPUs: 1, MaxReplicas: 1}},
		"dedicated over":            {name: "c", ask: Ask{GPUs: 2, Tier: "dedicated", MaxReplicas: 1}, wantCheck: CheckQuota, want: []string{"serving quota is 2 GPUs", "3 > 2"}},
		"mps":                       {name: "c", ask: Ask{GPUs: 2, Tier: "mps", MaxReplicas: 1}},
		"another MIG profile":       {name: "c", ask: Ask{GPUs: 1, Tier: "mig-3g.40gb", MaxReplicas: 1}, wantCheck: CheckTier, want: []string{"tenant acme may not use GPU tier mig-3g.40gb (its serving: block, at line 40 of the policy, allows dedicated, mig-1g.10gb, mps)"}},
		"time-sliced and isolation": {name: "c", ask: Ask{GPUs: 1, Tier: "time-sliced", MaxReplicas: 1}, wantCheck: CheckTier, want: []string{"may not use GPU tier time-sliced", "the tenant asks for isolation"}},
		"CPU only, any tier":        {name: "c", ask: Ask{GPUs: 0, Tier: "time-sliced", MaxReplicas: 2}},
		"replicas over":             {name: "c", ask: Ask{GPUs: 0, MaxReplicas: 3}, wantCheck: CheckQuota, want: []string{"7 > 6"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantRefusal(t, CheckServingQuota(tiered, others, tc.name, tc.ask), tc.wantCheck, tc.want...)
		})
	}
	noGPUs := servingquota.Tenant{Name: "globex", Replicas: 2, Tiers: []servingquota.Tier{{Name: "time-sliced", Resource: "nvidia.com/gpu.shared", Quota: 4}}}
	wantRefusal(t, CheckServingQuota(noGPUs, nil, "c", Ask{GPUs: 1, MaxReplicas: 1}), CheckTier,
		"may not use GPU tier dedicated (its serving: block, in the policy, allows time-sliced)")
}

// A surge replica needs one more replica of the tier's GPUs and of the
// tenant's replicas than the deployment holds.
func TestSurgeRoom(t *testing.T) {
	others := []store.Usage{{Name: "a", Tenant: "acme", GPUs: 1, Tier: "mig-1g.10gb", MaxReplicas: 2}}
	tests := map[string]struct {
		ask       Ask
		wantSurge bool
		want      string
	}{
		"room":                  {ask: Ask{GPUs: 1, Tier: "mig-1g.10gb", MaxReplicas: 1}, wantSurge: true, want: "rolls out with one surge replica"},
		"the tier is full":      {ask: Ask{GPUs: 1, Tier: "mig-1g.10gb", MaxReplicas: 2}, want: "no room in tenant acme's serving quota for a surge replica (tier mig-1g.10gb would need 5 of its 4 nvidia.com/mig-1g.10gb)"},
		"the replicas are full": {ask: Ask{GPUs: 0, MaxReplicas: 4}, want: "(replicas would need 7 of 6)"},
		"whole GPUs":            {ask: Ask{GPUs: 2, MaxReplicas: 1}, want: "tier dedicated would need 4 of its 2 GPUs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			surge, msg := SurgeRoom(tiered, others, "c", tc.ask)
			if surge != tc.wantSurge || !strings.Contains(msg, tc.want) {
				t.Errorf("SurgeRoom = %v, %q; want %v, %q", surge, msg, tc.wantSurge, tc.want)
			}
		})
	}
}

func TestCheckNameFree(t *testing.T) {
	tests := map[string]struct {
		existing  *store.Deployment
		wantCheck string
	}{
		"new name":                   {existing: nil},
		"the tenant's own":           {existing: &store.Deployment{Tenant: "acme", Namespace: "strata-acme", State: store.StateActive}},
		"another tenant's":           {existing: &store.Deployment{Tenant: "globex", Namespace: "strata-globex", State: store.StateActive}, wantCheck: CheckName},
		"another tenant's, deleted":  {existing: &store.Deployment{Tenant: "globex", Namespace: "strata-globex", State: store.StateDeleted}},
		"same tenant, new namespace": {existing: &store.Deployment{Tenant: "acme", Namespace: "old-acme", State: store.StateActive}, wantCheck: CheckName},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantRefusal(t, CheckNameFree(tc.existing, "llama", "acme", "strata-acme"), tc.wantCheck, `"llama" is in use`)
		})
	}
}
