package render

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/fuzzseed"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// The package's golden files are rewritten with -update (defined once,
// by whichever test file of the package comes first).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata (review the diff)")
	}
}

func derivedUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// derivedPolicies are the policies the golden files of this file come
// from, with the files each is rendered to: the shipped example and small
// edge cases (their comments, and the table tests below, say why each
// value is what it is).
var derivedPolicies = map[string]struct {
	path  string
	files []string
}{
	"example":         {"../../../etc/strata/policy.yaml", []string{"partitions.conf", "resourcequotas.yaml", "disk-quota.sh", "tenants.json", "jobpolicy.json"}},
	"minimal":         {"testdata/derived/minimal.yaml", []string{"partitions.conf", "resourcequotas.yaml", "disk-quota.sh", "tenants.json", "jobpolicy.json"}},
	"partitions-edge": {"testdata/derived/partitions-edge.yaml", []string{"partitions.conf"}},
	"quotas-edge":     {"testdata/derived/quotas-edge.yaml", []string{"resourcequotas.yaml", "disk-quota.sh"}},
	"bed-partitions":  {"testdata/derived/bed-partitions.yaml", []string{"partitions.conf"}},
	"tiers":           {"testdata/derived/tiers.yaml", []string{"resourcequotas.yaml", "serving.json"}},
}

// derivedFiles are the renderers with golden files here, by the name of
// the file they render.
var derivedFiles = map[string]func(*spec.Policy) ([]byte, error){
	"partitions.conf":     PartitionsConf,
	"resourcequotas.yaml": ResourceQuotasYAML,
	"disk-quota.sh":       DiskQuotaScript,
	"tenants.json":        TenantsJSON,
	"jobpolicy.json":      JobPolicyJSON,
	"serving.json":        ServingJSON,
}

func loadDerived(t *testing.T, name string) *spec.Policy {
	t.Helper()
	p, err := spec.Load(derivedPolicies[name].path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// derivedGolden is the golden file of one policy and file.
func derivedGolden(policy, file string) string {
	return filepath.Join("testdata", "derived", policy+"."+file+".golden")
}

// TestDerivedGolden renders every policy of derivedPolicies to its files,
// twice (the same bytes both times), and compares with the golden file;
// go test -run TestDerivedGolden -update rewrites them. No golden file is
// left without a case.
func TestDerivedGolden(t *testing.T) {
	for policy, pc := range derivedPolicies {
		for _, file := range pc.files {
			render := derivedFiles[file]
			t.Run(policy+"/"+file, func(t *testing.T) {
				p := loadDerived(t, policy)
				got, err := render(p)
				if err != nil {
					t.Fatal(err)
				}
				if again, _ := render(p); !bytes.Equal(got, again) {
					t.Fatal("two renders of one policy differ")
				}
				golden := derivedGolden(policy, file)
				if derivedUpdating() {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -run TestDerivedGolden -update)", err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("%s differs (-golden +got; run with -update and review):\n%s", golden, diff)
				}
			})
		}
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "derived", "*.golden"))
	cases := map[string]bool{}
	for policy, pc := range derivedPolicies {
		for _, file := range pc.files {
			cases[derivedGolden(policy, file)] = true
		}
	}
	for _, g := range goldens {
		if !cases[g] {
			t.Errorf("%s has no case in derivedPolicies", g)
		}
	}
}

// TestDerivedFilesRegistered: render writes the three files where the
// readers look, the script executable.
func TestDerivedFilesRegistered(t *testing.T) {
	want := map[string]File{
		"strata/partitions.conf":  {Dir: DirSlurm, Mode: 0o644},
		"k8s/resourcequotas.yaml": {Dir: DirStrata, Mode: 0o644},
		"disk-quota.sh":           {Dir: DirStrata, Mode: 0o755},
	}
	for _, f := range Files() {
		w, ok := want[f.Name]
		if !ok {
			continue
		}
		delete(want, f.Name)
		if f.Dir != w.Dir || f.Mode != w.Mode || f.Doc == "" || f.Render == nil {
			t.Errorf("%s: dir %s, mode %o, doc %q: want dir %s, mode %o, a doc and a renderer", f.Name, f.Dir, f.Mode, f.Doc, w.Dir, w.Mode)
		}
	}
	for name := range want {
		t.Errorf("%s is not registered", name)
	}
}

func durHours(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

// TestPartitions: the values of each partition, and why.
func TestPartitions(t *testing.T) {
	for name, tc := range map[string]struct {
		policy string // a file of derivedPolicies, or inline YAML
		want   []Partition
	}{
		"example": {policy: "example", want: []Partition{{
			// train and batch run in gpu; batch is the default class.
			Name: "gpu", Nodes: "gpu[001-056]", Classes: []string{"batch", "train"}, Default: true,
			// Every project may use batch (acme-vision has batch and
			// interactive, globex everything but serve).
			Accounts: []string{"acme-llm", "acme-vision", "globex-rl"},
			// batch's 4h is shorter than train's 24h; train's 7d is
			// longer than batch's 2d.
			DefaultTime: durHours(4), DefaultFrom: "batch", MaxTime: durHours(7 * 24), MaxFrom: "train",
		}, {
			Name: "interactive", Nodes: "gpu[057-060]", Classes: []string{"interactive"},
			Accounts:    []string{"acme-llm", "acme-vision", "globex-rl"},
			DefaultTime: durHours(2), DefaultFrom: "interactive", MaxTime: durHours(12), MaxFrom: "interactive",
			Options: []string{"PriorityTier=2"},
		}, {
			// Only acme-llm lists serve: vision does not, and globex may not.
			Name: "serve", Nodes: "gpu[061-064]", Classes: []string{"serve"}, Accounts: []string{"acme-llm"},
			DefaultTime: durHours(24), DefaultFrom: "serve", MaxTime: durHours(14 * 24), MaxFrom: "serve",
		}}},
		"edge cases": {policy: "partitions-edge", want: []Partition{{
			// batch gives no default_time: its max_time 2d counts, and
			// train's 24h is shorter.
			Name: "long", Nodes: "n[01-04]", Classes: []string{"batch", "train"},
			// vision may use quick only, and rl free only.
			Accounts:    []string{"acme-llm", "globex-sim"},
			DefaultTime: durHours(24), DefaultFrom: "train", MaxTime: durHours(7 * 24), MaxFrom: "train",
		}, {
			// free gives no time at all: no DefaultTime, MaxTime
			// UNLIMITED (0).
			Name: "open", Nodes: "n07", Classes: []string{"free"}, Accounts: []string{"globex-rl", "globex-sim"},
			MaxFrom: "free",
		}, {
			// debug is the default class. quick's max_time 1h is shorter
			// than debug's default_time 2h: a job of quick without --time
			// must fit its 1h.
			Name: "short", Nodes: "n[05-06],n09", Classes: []string{"debug", "quick"}, Default: true,
			Accounts:    []string{"acme-llm", "acme-vision", "globex-sim"},
			DefaultTime: durHours(1), DefaultFrom: "quick", DefaultFromMax: true, MaxTime: durHours(4), MaxFrom: "debug",
			Options: []string{"PriorityTier=3", "OverSubscribe=NO"},
		}}},
		"a class without max_time makes the partition UNLIMITED": {policy: `
cluster: {name: c, partitions: {p: {nodes: n1}}}
classes:
  - {name: a, partition: p, default_time: 1h, max_time: 2h}
  - {name: b, partition: p, default_time: 30m}
tenants: [{name: t, projects: [{name: x, members: []}]}]
`, want: []Partition{{
			Name: "p", Nodes: "n1", Classes: []string{"a", "b"}, Accounts: []string{"t-x"},
			DefaultTime: durHours(0.5), DefaultFrom: "b", MaxFrom: "b",
		}}},
		"no partitions: none written": {policy: "minimal"},
	} {
		t.Run(name, func(t *testing.T) {
			var p *spec.Policy
			if _, ok := derivedPolicies[tc.policy]; ok {
				p = loadDerived(t, tc.policy)
			} else {
				var err error
				if p, err = spec.Parse("p.yaml", []byte("apiVersion: strata/v1\nkind: Policy\n"+tc.policy)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Partitions(p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("partitions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPartitionsRefuses: a policy built in code that Parse would refuse
// renders no partitions.conf rather than a partition open to all.
func TestPartitionsRefuses(t *testing.T) {
	base := func() *spec.Policy {
		return &spec.Policy{
			Cluster: spec.Cluster{Name: "c", Partitions: map[string]spec.Partition{"p": {Nodes: "n1"}}},
			Classes: []spec.Class{{Name: "a", Partition: "p"}},
			Tenants: []spec.Tenant{{Name: "t", Projects: []spec.Project{{Name: "x", Classes: []string{"a"}}}}},
		}
	}
	for name, tc := range map[string]struct {
		change  func(*spec.Policy)
		wantErr string
	}{
		"undeclared partition": {
			change:  func(p *spec.Policy) { p.Classes = append(p.Classes, spec.Class{Name: "b", Partition: "q"}) },
			wantErr: "class b runs in partition q, which cluster.partitions does not declare",
		},
		"partition of no class": {
			change:  func(p *spec.Policy) { p.Cluster.Partitions["idle"] = spec.Partition{Nodes: "n2"} },
			wantErr: "partition idle is the partition of no class",
		},
		"no project may use it": {
			change:  func(p *spec.Policy) { p.Tenants[0].Projects[0].Classes = nil },
			wantErr: "no project may use the classes of partition p (a)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := base()
			if _, err := PartitionsConf(p); err != nil {
				t.Fatalf("the base policy: %v", err)
			}
			tc.change(p)
			_, err := PartitionsConf(p)
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSlurmTimeLimit(t *testing.T) {
	for in, want := range map[time.Duration]string{
		30 * time.Minute:                "00:30:00",
		4 * time.Hour:                   "04:00:00",
		24 * time.Hour:                  "1-00:00:00",
		7*24*time.Hour + 90*time.Minute: "7-01:30:00",
		90 * time.Second:                "00:02:00", // a part of a minute counts whole, as in Slurm
	} {
		if got := slurmTimeLimit(in); got != want {
			t.Errorf("slurmTimeLimit(%v) = %q, want %q", in, got, want)
		}
	}
}

// derivedLines returns the lines of a rendered file that are not
// comments or blank.
func derivedLines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestPartitionsConfLines: the example's lines are exactly the
// partitions of TestPartitions, in slurm.conf's syntax and scontrol's
// time format.
func TestPartitionsConfLines(t *testing.T) {
	got, err := PartitionsConf(loadDerived(t, "example"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PartitionName=gpu Nodes=gpu[001-056] Default=YES AllowAccounts=acme-llm,acme-vision,globex-rl AllowQos=batch,train DefaultTime=04:00:00 MaxTime=7-00:00:00",
		"PartitionName=interactive Nodes=gpu[057-060] AllowAccounts=acme-llm,acme-vision,globex-rl AllowQos=interactive DefaultTime=02:00:00 MaxTime=12:00:00 PriorityTier=2",
		"PartitionName=serve Nodes=gpu[061-064] AllowAccounts=acme-llm AllowQos=serve DefaultTime=1-00:00:00 MaxTime=14-00:00:00",
	}
	if diff := cmp.Diff(want, derivedLines(got)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	edge, err := PartitionsConf(loadDerived(t, "partitions-edge"))
	if err != nil {
		t.Fatal(err)
	}
	if l := derivedLines(edge); len(l) != 3 || !strings.HasSuffix(l[1], " AllowQos=free MaxTime=UNLIMITED") {
		t.Errorf("open: want no DefaultTime and MaxTime=UNLIMITED, got %q", l)
	}
}

// FuzzDerived: every policy that Parse accepts renders partitions.conf
// and disk-quota.sh (Parse's validation is what they rely on), and
// resourcequotas.yaml unless a tenant name is no label value.
//
// The seeds are the minimal policy of the golden files without its
// comments (fuzzseed) and one small policy per part a renderer reads, in
// flow style so that a mutation stays YAML, each under 300 bytes. Most
// mutations make a policy Parse refuses, which takes about 300 ms for a
// broken copy of the example (5 KB without comments) and 5 to 15 ms for
// the edge cases' 600 to 800 bytes; seeded with those, the fuzzer spent
// its time minimizing what it found (9 runs in 10 s).
func FuzzDerived(f *testing.F) {
	if data, err := os.ReadFile(derivedPolicies["minimal"].path); err == nil {
		f.Add(fuzzseed.YAML(data))
	}
	const head = "apiVersion: strata/v1\nkind: Policy\ncluster: {name: c}\n"
	for _, s := range []string{
		"classes: [{name: b, partition: gpu}]\ntenants: [{name: a, projects: [{name: p, members: [{user: u}]}]}]\n",
		"classes: [{name: b, partition: gpu, max_time: 1h, default_time: 10m}, {name: i, partition: gpu, max_time: 4h}]\n" +
			"tenants: [{name: a, projects: [{name: p, members: []}]}]\n",
		"classes: [{name: s, partition: serve}]\ntenants: [{name: a, serving: {gpus: 2, replicas: 3, tiers: {mps: 4}}, projects: [{name: p, members: []}]}]\n",
		"classes: [{name: s, partition: serve}]\ntenants: [{name: A_b, serving: {gpus: 1, replicas: 1}, projects: [{name: p, members: []}]}]\n",
		"classes: [{name: b, partition: gpu}]\ntenants: [{name: a, projects: [{name: p, members: [], disk: {path: /srv/a/p, filesystem: xfs, hard_gb: 1, soft_gb: 1, inodes: 9}}]}]\n",
		"classes: [{name: b, partition: gpu}]\ntenants: [{name: a, projects: [{name: p, members: [], disk: {path: \"/l/a p'\", filesystem: lustre, hard_gb: 2, project_id: 7}}]}]\n",
	} {
		f.Add([]byte(head + s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := spec.Parse("p.yaml", data)
		if err != nil {
			return
		}
		if _, err := PartitionsConf(p); err != nil {
			t.Errorf("partitions.conf of a valid policy: %v", err)
		}
		if _, err := DiskQuotaScript(p); err != nil {
			t.Errorf("disk-quota.sh of a valid policy: %v", err)
		}
		if _, err := ResourceQuotasYAML(p); err != nil && !strings.Contains(err.Error(), "cannot be the value of label") {
			t.Errorf("resourcequotas.yaml of a valid policy: %v", err)
		}
	})
}
