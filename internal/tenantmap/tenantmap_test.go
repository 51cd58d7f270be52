package tenantmap_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/duration"
	"github.com/strata-hpc/strata/internal/strictjson"
	"github.com/strata-hpc/strata/internal/tenantmap"
)

func full() *tenantmap.Map {
	return &tenantmap.Map{
		APIVersion: "strata/v1", Kind: "TenantMap", Cluster: "gpu1", Admins: []string{"ops"},
		Tenants: []tenantmap.Tenant{{
			Name: "acme", Account: "acme", Admins: []string{"alice"},
			Projects: []tenantmap.Project{{
				Name: "llm", Account: "acme-llm", Classes: []string{"train", "batch"},
				Members: []tenantmap.Member{
					{User: "alice", Role: tenantmap.RoleTenantAdmin, Default: true},
					{User: "bob", Role: tenantmap.RoleMember, Default: true},
					{User: "dave", Role: tenantmap.RoleViewer},
				},
			}, {
				Name: "vision", Account: "acme-vision", Classes: []string{"batch"},
				Members: []tenantmap.Member{{User: "bob", Role: tenantmap.RoleMember}},
			}},
		}, {
			Name: "globex", Account: "globex", Admins: []string{},
			Projects: []tenantmap.Project{{Name: "rl", Account: "globex-rl", Classes: []string{}, Members: []tenantmap.Member{}}},
		}},
	}
}

// withLimits is testdata/limits.good.json: a map with the policy's
// classes, limits and sources.
func withLimits() *tenantmap.Map {
	src := func(line int, path string) *tenantmap.Source { return &tenantmap.Source{Line: line, Path: path} }
	lim := func(v int64, s *tenantmap.Source) *tenantmap.Limit { return &tenantmap.Limit{Value: v, Source: s} }
	perUser := lim(16, src(21, "tenants[0].limits.gpus_per_user"))
	return &tenantmap.Map{
		APIVersion: "strata/v1", Kind: "TenantMap", Cluster: "gpu1", Admins: []string{"ops"}, Policy: "/etc/strata/policy.yaml",
		Classes: []tenantmap.Class{{Name: "train", Source: src(6, "classes[0]"),
			MaxGPUsPerJob: lim(256, src(9, "classes[0].max_gpus_per_job")),
			MaxTime:       &tenantmap.TimeLimit{Value: duration.Duration(7 * 24 * time.Hour), Source: src(8, "classes[0].max_time")}},
			{Name: "batch"}},
		Tenants: []tenantmap.Tenant{{
			Name: "acme", Account: "acme", Admins: []string{}, Source: src(12, "tenants[0]"),
			Limits: &tenantmap.Limits{
				GPUs: lim(64, src(15, "tenants[0].limits.gpus")),
				GPUsByType: map[string]tenantmap.Limit{"h100": *lim(48, src(17, "tenants[0].limits.gpus_by_type.h100")),
					"v100": {Value: 0}},
				CPUs: lim(2048, nil), MemoryGB: lim(16384, nil), RunningJobs: lim(200, nil),
				GPUHours: lim(50000, src(22, "tenants[0].limits.gpu_hours")), GPUsPerUser: perUser,
			},
			Projects: []tenantmap.Project{{
				Name: "llm", Account: "acme-llm", Classes: []string{"train"}, Source: src(24, "tenants[0].projects[0]"),
				Limits: &tenantmap.Limits{GPUsPerUser: perUser},
				Members: []tenantmap.Member{
					{User: "alice", Role: tenantmap.RoleMember, Default: true, Source: src(28, "tenants[0].projects[0].members[0]"),
						DefaultSource: src(29, "tenants[0].projects[0].members[0].default")},
					{User: "dave", Role: tenantmap.RoleViewer, Source: src(30, "tenants[0].projects[0].members[1]")},
				},
			}},
		}},
	}
}

var cmpMap = cmpopts.IgnoreUnexported(tenantmap.Map{})

// fileTests covers every file in testdata (TestFiles fails on a file
// missing here). A .good file parses to want; a .bad file fails with
// exactly the error lines listed, each "line:col: path: message".
var fileTests = map[string]struct {
	want     func() *tenantmap.Map
	wantErrs []string
}{
	"minimal.good.json": {want: func() *tenantmap.Map {
		return &tenantmap.Map{APIVersion: "strata/v1", Kind: "TenantMap", Cluster: "gpu1", Admins: []string{}, Tenants: []tenantmap.Tenant{}}
	}},
	"full.good.json":   {want: full},
	"limits.good.json": {want: withLimits},
	"limits-types.bad.json": {wantErrs: []string{
		`3:55: classes[0].max_time.value: want a string, got 1800: "1800" is not a duration: add a unit, such as "1800m" (Slurm reads a bare number as minutes) or "1800s"`,
		`6:55: tenants[0].limits.gpus_by_type.a100: given twice (first at 6:33)`,
		`6:96: tenants[0].limits.cpus.value: want a whole number, got "8"`,
		`6:125: tenants[0].limits.memory_gb.value: want a whole number, got 1.5`,
		"6:131: tenants[0].limits.gpu: unknown field; the fields here are gpus, gpus_by_type, cpus, memory_gb, running_jobs, gpu_hours, gpus_per_user",
	}},
	"limits.bad.json": {wantErrs: []string{
		"3:55: classes[0].max_time.value: 0s: want a positive time limit (leave max_time out for none)",
		`3:72: classes[1].name: "train" is also classes[0]: names must be unique`,
		"3:100: classes[1].source.line: -1: want a line number, or 0 for none",
		"3:112: classes[1].source.path: required: the value's path in the policy file",
		"3:127: classes[2].name: required",
		"6:34: tenants[0].limits.gpus.value: 0: want at least 1 (leave the limit out for none)",
		"6:73: tenants[0].limits.gpus_by_type.h100.value: -1: want 0 or more",
		"8:98: tenants[0].projects[0].limits.gpus_per_user.value: -4: want at least 1 (leave the limit out for none)",
		"9:71: tenants[0].projects[0].members[0].default_source: set on a member that is not the default",
	}},
	"every-problem-at-once.bad.json": {wantErrs: []string{
		`2:17: apiVersion: "strata/v2" is not supported: use strata/v1`,
		`3:11: kind: "Tenants": want TenantMap`,
		"4:14: cluster: required: the Slurm ClusterName the map describes",
		`5:21: admins[1]: "ops" is listed twice`,
		"5:28: admins[2]: empty user name",
		`12:69: tenants[0].projects[0].classes[1]: "train" is listed twice`,
		`14:20: tenants[0].projects[0].members[1].user: "alice" is listed twice in the project`,
		"15:20: tenants[0].projects[0].members[2].user: required",
		`17:18: tenants[0].projects[1].name: "llm" is also tenants[0].projects[0]: names must be unique in a tenant`,
		`17:36: tenants[0].projects[1].account: "acme" is also acme's: an account belongs to one tenant or project`,
		"17:56: tenants[0].projects[1].classes[0]: empty name",
		`20:14: tenants[1].name: "acme" is also tenants[0]: names must be unique`,
		`20:33: tenants[1].account: "Acme!": use lower-case letters, digits, '_' and '-' only (Slurm account names)`,
		"20:78: tenants[1].projects[0].name: required",
		"20:93: tenants[1].projects[0].account: required",
		"21:14: tenants[2].name: required",
		`21:29: tenants[2].account: "acme-llm" is also acme/llm's: an account belongs to one tenant or project`,
	}},
	"missing-role.bad.json": {wantErrs: []string{
		"3:71: tenants[0].projects[0].members[0].role: required: use member, viewer, tenant-admin",
	}},
	"unknown-role.bad.json": {wantErrs: []string{
		`3:97: tenants[0].projects[0].members[0].role: "owner" is not a role: use member, viewer, tenant-admin`,
		`3:131: tenants[0].projects[0].members[1].role: want a string, got 3: "3" is not a role: use member, viewer, tenant-admin`,
	}},
	"unknown-field.bad.json": {wantErrs: []string{
		"2:20: tenants[0].acount: unknown field; the fields here are name, account, admins, source, limits, projects",
		"2:68: tenants[0].serving: unknown field; the fields here are name, account, admins, source, limits, projects",
		"3:2: members: unknown field; the fields here are apiVersion, kind, cluster, admins, policy, classes, tenants",
	}},
	"duplicate-field.bad.json": {wantErrs: []string{
		"1:69: cluster: given twice (first at 1:50)",
	}},
	"wrong-types.bad.json": {wantErrs: []string{
		"1:61: cluster: want a string, got 7",
		`1:74: admins: want a list, got "ops"`,
		"2:31: tenants[0].account: null: give a value or leave the field out",
		"2:48: tenants[0].admins[0]: want a string, got 1",
		"2:64: tenants[0].projects: want a list, got an object",
		`3:3: tenants[1]: want an object, got "globex"`,
	}},
	"syntax.bad.json": {wantErrs: []string{
		"2:15: invalid JSON: invalid character '}' looking for beginning of value",
	}},
	"truncated.bad.json": {wantErrs: []string{
		"1:62: invalid JSON: the document ends too early (a missing } or ]?)",
	}},
	"trailing-data.bad.json": {wantErrs: []string{
		"2:1: unexpected data after the document: a file holds one JSON object",
	}},
	"empty.bad.json": {wantErrs: []string{
		`1:1: empty document: want a JSON object with "apiVersion": "strata/v1" and "kind": "TenantMap"`,
	}},
	"serving-quotas.bad.json": {wantErrs: []string{
		`1:37: kind: "ServingQuotas": want TenantMap`,
		"1:1: cluster: required: the Slurm ClusterName the map describes",
	}},
}

func TestFiles(t *testing.T) {
	names, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range names {
		if _, ok := fileTests[filepath.Base(path)]; !ok {
			t.Errorf("%s has no case in fileTests", path)
		}
	}
	for name, tc := range fileTests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := tenantmap.Parse(data)
			if tc.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want(), m, cmpMap); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff(tc.wantErrs, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *strictjson.FieldError
				if !errors.As(e, &fe) {
					t.Errorf("%v is not a *strictjson.FieldError", e)
				}
			}
			// Load says which file, on every line.
			_, err = tenantmap.Load(path)
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, path+":") {
					t.Errorf("Load: %q does not start with %s:", line, path)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	parsed, err := tenantmap.Parse(mustMarshal(t, full()))
	if err != nil {
		t.Fatal(err)
	}
	// Both a parsed map (indexed) and one built in code answer alike.
	for name, m := range map[string]*tenantmap.Map{"parsed": parsed, "built": full()} {
		t.Run(name, func(t *testing.T) {
			for account, want := range map[string]struct {
				owner  tenantmap.Owner
				ok     bool
				tenant string
			}{
				"acme-llm":    {tenantmap.Owner{Tenant: "acme", Project: "llm"}, true, "acme"},
				"acme-vision": {tenantmap.Owner{Tenant: "acme", Project: "vision"}, true, "acme"},
				"acme":        {tenantmap.Owner{Tenant: "acme"}, true, "acme"},
				"globex-rl":   {tenantmap.Owner{Tenant: "globex", Project: "rl"}, true, "globex"},
				"initech":     {tenantmap.Owner{}, false, "initech"},
				"":            {tenantmap.Owner{}, false, ""},
			} {
				o, ok := m.Lookup(account)
				if o != want.owner || ok != want.ok {
					t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", account, o, ok, want.owner, want.ok)
				}
				if got := m.TenantOf(account); got != want.tenant {
					t.Errorf("TenantOf(%q) = %q, want %q", account, got, want.tenant)
				}
			}
			if tn, ok := m.Tenant("globex"); !ok || tn.Account != "globex" {
				t.Errorf("Tenant(globex) = %+v, %v", tn, ok)
			}
		})
	}
	var none *tenantmap.Map
	if got := none.TenantOf("acme-llm"); got != "acme-llm" {
		t.Errorf("nil map: TenantOf = %q, want the account itself", got)
	}
}

// TestMarshal: Marshal writes what Parse reads back as the same map, with
// empty lists as [] (never null, which a reader in another language may
// not take for a list).
func TestMarshal(t *testing.T) {
	m := full()
	m.Tenants[1].Admins, m.Tenants[1].Projects[0].Members = nil, nil
	b := mustMarshal(t, m)
	if strings.Contains(string(b), "null") {
		t.Errorf("Marshal wrote null:\n%s", b)
	}
	back, err := tenantmap.Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if diff := cmp.Diff(full(), back, cmpMap); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestMarshalLimits: the limits, classes and sources come back as they
// were written, a GPU type's 0 and a time limit included.
func TestMarshalLimits(t *testing.T) {
	b := mustMarshal(t, withLimits())
	back, err := tenantmap.Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if diff := cmp.Diff(withLimits(), back, cmpMap); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestValidateBuilt: a map built in code is checked as a parsed one is.
func TestValidateBuilt(t *testing.T) {
	m := full()
	m.Tenants[0].Projects[0].Members[0].Role = "owner"
	m.Tenants[1].Projects[0].Account = "acme-llm"
	var got []string
	for _, err := range m.Validate() {
		got = append(got, err.Error())
	}
	want := []string{
		`tenants[0].projects[0].members[0].role: "owner" is not a role: use member, viewer, tenant-admin`,
		`tenants[1].projects[0].account: "acme-llm" is also acme/llm's: an account belongs to one tenant or project`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := tenantmap.Load(filepath.Join(t.TempDir(), "tenants.json"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "strata-policy render writes it") {
		t.Errorf("Load = %v, want a not-exist error that says where the file comes from", err)
	}
}

func mustMarshal(t testing.TB, m *tenantmap.Map) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse: no input panics; what Parse accepts, Marshal writes and
// Parse reads back as the same map.
func FuzzParse(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.json")
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := tenantmap.Parse(data)
		if err != nil {
			if m != nil {
				t.Error("a map and an error")
			}
			return
		}
		back, err := tenantmap.Parse(mustMarshal(t, m))
		if err != nil {
			t.Fatalf("Marshal's output does not parse: %v", err)
		}
		if diff := cmp.Diff(m, back, cmpMap, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("(-first +again):\n%s", diff)
		}
	})
}
