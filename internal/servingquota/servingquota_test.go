package servingquota

import (
	"strings"
	"testing"
)

const good = `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[
 {"name":"acme","namespace":"strata-acme","gpus":8,"replicas":4,"projects":[{"name":"llm","account":"acme-llm"}]},
 {"name":"globex","namespace":"strata-globex","gpus":0,"replicas":0,"projects":[{"name":"rl","account":"globex-rl"}]}]}`

func TestParseLookup(t *testing.T) {
	f, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Lookup("acme-llm")
	if !ok || o.Tenant.Name != "acme" || o.Project != "llm" || o.Tenant.GPUs != 8 {
		t.Errorf("Lookup(acme-llm) = %+v, %v", o, ok)
	}
	if o, ok := f.Lookup("acme"); !ok || o.Project != "" {
		t.Errorf("Lookup(acme) = %+v, %v", o, ok)
	}
	if _, ok := f.Lookup("initech-x"); ok {
		t.Error("Lookup of an unknown account succeeded")
	}
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Errorf("Marshal output does not parse: %v", err)
	}
}

const goodV2 = `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[
 {"name":"acme","namespace":"strata-acme","gpus":2,"replicas":6,"isolation":true,"servingLine":9,
  "tiers":[{"name":"mig-1g.10gb","resource":"nvidia.com/mig-1g.10gb","quota":4,"line":11},{"name":"mps","resource":"nvidia.com/gpu.mps","quota":2}],
  "projects":[{"name":"llm","account":"acme-llm"}]},
 {"name":"globex","namespace":"strata-globex","gpus":0,"replicas":2,"tiers":[{"name":"time-sliced","resource":"nvidia.com/gpu.shared","quota":8}],"projects":[]}]}`

// TestAllowed: the dedicated tier is the tenant's GPUs, the others its
// tiers; a v1 file reads as whole GPUs only.
func TestAllowed(t *testing.T) {
	f, err := Parse([]byte(goodV2))
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := f.Tenant("acme")
	globex, _ := f.Tenant("globex")
	for name, tc := range map[string]struct {
		tenant    *Tenant
		tier      string
		wantOK    bool
		wantQuota int
		wantLine  int
		wantRes   string
	}{
		"dedicated":               {acme, TierDedicated, true, 2, 9, ResourceGPU},
		"mig":                     {acme, "mig-1g.10gb", true, 4, 11, "nvidia.com/mig-1g.10gb"},
		"other mig profile":       {acme, "mig-3g.40gb", false, 0, 0, ""},
		"mps":                     {acme, TierMPS, true, 2, 0, ResourceMPS},
		"time-sliced not granted": {acme, TierTimeSliced, false, 0, 0, ""},
		"no whole GPUs":           {globex, TierDedicated, false, 0, 0, ResourceGPU},
		"time-sliced":             {globex, TierTimeSliced, true, 8, 0, ResourceTimeSliced},
	} {
		t.Run(name, func(t *testing.T) {
			tr, ok := tc.tenant.Allowed(tc.tier)
			if ok != tc.wantOK || tr.Quota != tc.wantQuota || tr.Line != tc.wantLine || tr.Resource != tc.wantRes {
				t.Errorf("Allowed(%s) = %+v, %v; want quota %d, line %d, resource %q, %v", tc.tier, tr, ok, tc.wantQuota, tc.wantLine, tc.wantRes, tc.wantOK)
			}
		})
	}
	if got := strings.Join(acme.TierNames(), ","); got != "dedicated,mig-1g.10gb,mps" {
		t.Errorf("TierNames = %s", got)
	}
	v1, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := v1.Tenant("acme")
	if tr, ok := a.Allowed(TierDedicated); !ok || tr.Quota != 8 {
		t.Errorf("v1 Allowed(dedicated) = %+v, %v", tr, ok)
	}
}

func TestTierNames(t *testing.T) {
	for name, tc := range map[string]struct {
		resource, family, priorityClass string
		wantErr                         string
	}{
		"dedicated":    {ResourceGPU, "dedicated", "strata-serving-dedicated", ""},
		"mig-1g.10gb":  {"nvidia.com/mig-1g.10gb", "mig", "strata-serving-mig", ""},
		"mig-7g.141gb": {"nvidia.com/mig-7g.141gb", "mig", "strata-serving-mig", ""},
		"mps":          {ResourceMPS, "mps", "strata-serving-mps", ""},
		"time-sliced":  {ResourceTimeSliced, "time-sliced", "strata-serving-time-sliced", ""},
		"mig-9g.10gb":  {"", "mig", "", "not a MIG profile"},
		"mig-1g.10GB":  {"", "mig", "", "not a MIG profile"},
		"shared":       {"", "shared", "", "is not one of"},
		"":             {"", "", "", "is not one of"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckTier(name)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("CheckTier = %v, want %q", err, tc.wantErr)
			}
			if got := Resource(name); got != tc.resource {
				t.Errorf("Resource = %q, want %q", got, tc.resource)
			}
			if got := Family(name); got != tc.family {
				t.Errorf("Family = %q, want %q", got, tc.family)
			}
			pc, ok := PriorityClassOf(name)
			if pc.Name != tc.priorityClass || ok != (tc.priorityClass != "") {
				t.Errorf("PriorityClassOf = %+v, %v; want %q", pc, ok, tc.priorityClass)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"header", `{"apiVersion":"strata/v3","kind":"ServingQuotas"}`, "not a strata/v2"},
		{"tiers in v1", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"mps","resource":"nvidia.com/gpu.mps","quota":1}]}]}`, "need apiVersion strata/v2"},
		{"unknown tier", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"fast","resource":"nvidia.com/fast","quota":1}]}]}`, `tier "fast" is not one of`},
		{"bad profile", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"mig-big","resource":"nvidia.com/mig-big","quota":1}]}]}`, "is not a MIG profile"},
		{"dedicated tier", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"dedicated","resource":"nvidia.com/gpu","quota":1}]}]}`, "the tenant's gpus"},
		{"wrong resource", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"mps","resource":"nvidia.com/gpu","quota":1}]}]}`, `want "nvidia.com/gpu.mps"`},
		{"zero quota", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"mps","resource":"nvidia.com/gpu.mps","quota":0}]}]}`, "want 1 or more"},
		{"twice", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","tiers":[{"name":"mps","resource":"nvidia.com/gpu.mps","quota":1},{"name":"mps","resource":"nvidia.com/gpu.mps","quota":2}]}]}`, "listed twice"},
		{"time-sliced with isolation", `{"apiVersion":"strata/v2","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","isolation":true,"tiers":[{"name":"time-sliced","resource":"nvidia.com/gpu.shared","quota":4}]}]}`, "asks for isolation"},
		{"unknown field", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenant":[]}`, "unknown field"},
		{"dup namespace", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"n"},{"name":"b","namespace":"n"}]}`, "also tenant a's"},
		{"dup account", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","projects":[{"name":"p","account":"a-p"}]},{"name":"b","namespace":"y","projects":[{"name":"q","account":"a-p"}]}]}`, "also a/p's"},
		{"negative", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","gpus":-1}]}`, "negative"},
		{"a project account that is a tenant's", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","projects":[{"name":"p","account":"b"}]},{"name":"b","namespace":"y"}]}`,
			`tenant b: its account "b" is also a/p's`},
		{"two values", good + `{"apiVersion":"strata/v1"}`, "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
