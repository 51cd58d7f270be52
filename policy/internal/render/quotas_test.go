package render

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/strata-hpc/strata/policy/internal/spec"
)

// servingObjects is what one tenant gets in resourcequotas.yaml.
type servingObjects struct {
	Tenant, Namespace string
	GPUs, Pods        int64
	// Tiers are the quotas of the other resources, by resource.
	Tiers map[string]int64
}

// decodeQuotas decodes resourcequotas.yaml with the Kubernetes API types,
// strictly (a field the types do not have, or one given twice, is an
// error), and returns each tenant's Namespace and ResourceQuota, checked
// against each other and against Kubernetes' own name rules.
func decodeQuotas(t *testing.T, data []byte) []servingObjects {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []servingObjects
	var ns *corev1.Namespace
	var priorityClasses []string
	defer func() {
		want := []string{"strata-serving-dedicated", "strata-serving-mig", "strata-serving-mps", "strata-serving-time-sliced"}
		if len(out) == 0 {
			want = nil
		}
		if diff := cmp.Diff(want, priorityClasses); diff != "" {
			t.Errorf("PriorityClasses (-want +got):\n%s", diff)
		}
	}()
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		switch {
		case tm.Kind == "" && tm.APIVersion == "":
			if len(derivedLines(doc)) > 0 {
				t.Fatalf("a document without kind:\n%s", doc)
			}
			continue // the comments at the top
		case tm.APIVersion != "v1" && tm.Kind != "PriorityClass":
			t.Fatalf("apiVersion %q, want v1", tm.APIVersion)
		case tm.Kind == "Namespace":
			ns = &corev1.Namespace{}
			if err := yaml.UnmarshalStrict(doc, ns); err != nil {
				t.Fatalf("Namespace: %v in\n%s", err, doc)
			}
			for _, msg := range validation.IsDNS1123Label(ns.Name) {
				t.Errorf("namespace %q: %s", ns.Name, msg)
			}
			checkLabels(t, ns.Labels)
		case tm.Kind == "ResourceQuota":
			var q corev1.ResourceQuota
			if err := yaml.UnmarshalStrict(doc, &q); err != nil {
				t.Fatalf("ResourceQuota: %v in\n%s", err, doc)
			}
			if ns == nil || q.Namespace != ns.Name || q.Labels[k8sLabelTenant] != ns.Labels[k8sLabelTenant] {
				t.Fatalf("ResourceQuota %s/%s does not follow the Namespace of its tenant", q.Namespace, q.Name)
			}
			gpus, hasGPUs := q.Spec.Hard["requests.nvidia.com/gpu"]
			pods, hasPods := q.Spec.Hard[corev1.ResourcePods]
			if q.Name != "strata-serving" || !hasGPUs || !hasPods {
				t.Errorf("quota %s/%s holds %v: want strata-serving with GPUs and pods", q.Namespace, q.Name, q.Spec.Hard)
			}
			checkLabels(t, q.Labels)
			so := servingObjects{Tenant: q.Labels[k8sLabelTenant], Namespace: q.Namespace, GPUs: gpus.Value(), Pods: pods.Value()}
			for r, v := range q.Spec.Hard {
				if r == "requests.nvidia.com/gpu" || r == corev1.ResourcePods {
					continue
				}
				if so.Tiers == nil {
					so.Tiers = map[string]int64{}
				}
				so.Tiers[string(r)] = v.Value()
			}
			out = append(out, so)
			ns = nil
		case tm.APIVersion == "scheduling.k8s.io/v1" && tm.Kind == "PriorityClass":
			var pc schedulingv1.PriorityClass
			if err := yaml.UnmarshalStrict(doc, &pc); err != nil {
				t.Fatalf("PriorityClass: %v in\n%s", err, doc)
			}
			if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever || pc.Labels[k8sLabelManagedBy] != k8sManagedBy {
				t.Errorf("PriorityClass %s: preemption %v, labels %v: want Never, managed by strata", pc.Name, pc.PreemptionPolicy, pc.Labels)
			}
			priorityClasses = append(priorityClasses, pc.Name)
		default:
			t.Fatalf("unexpected kind %q", tm.Kind)
		}
	}
	return out
}

func checkLabels(t *testing.T, labels map[string]string) {
	t.Helper()
	if labels["app.kubernetes.io/managed-by"] != "strata" || len(labels) != 2 {
		t.Errorf("labels %v: want managed-by strata and the tenant", labels)
	}
	for k, v := range labels {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("label %s=%s: %s", k, v, msg)
		}
	}
}

// TestResourceQuotas: one Namespace and ResourceQuota per tenant with a
// serving: block, its GPUs and replicas as the quota, in policy order.
func TestResourceQuotas(t *testing.T) {
	for name, want := range map[string][]servingObjects{
		// acme serves 8 GPUs in 4 replicas; globex has no serving block.
		"example": {{Tenant: "acme", Namespace: "strata-acme", GPUs: 8, Pods: 12, Tiers: map[string]int64{
			"requests.nvidia.com/mig-1g.10gb": 8, "requests.nvidia.com/mig-3g.40gb": 2, "requests.nvidia.com/gpu.mps": 4}}},
		// "no" gets the default namespace and a quota of nothing (0 and
		// 0 are a quota, not its absence); plain has no serving block;
		// named names its namespace.
		"quotas-edge": {
			{Tenant: "no", Namespace: "strata-no", GPUs: 0, Pods: 0},
			{Tenant: "named", Namespace: "models-named", GPUs: 16, Pods: 2},
		},
		"minimal": nil,
		// One tenant per tier: whole GPUs only; MIG slices of two
		// profiles and no whole GPUs (0 is a quota: the apiserver refuses
		// them); MPS shares, where a tier of 0 gets no line (a resource
		// the quota does not name is refused by limitedResources); time
		// slices.
		"tiers": {
			{Tenant: "whole", Namespace: "strata-whole", GPUs: 8, Pods: 4},
			{Tenant: "slices", Namespace: "strata-slices", GPUs: 0, Pods: 10,
				Tiers: map[string]int64{"requests.nvidia.com/mig-1g.10gb": 8, "requests.nvidia.com/mig-3g.40gb": 2}},
			{Tenant: "mps", Namespace: "strata-mps", GPUs: 2, Pods: 6, Tiers: map[string]int64{"requests.nvidia.com/gpu.mps": 4}},
			{Tenant: "shared", Namespace: "strata-shared", GPUs: 0, Pods: 16, Tiers: map[string]int64{"requests.nvidia.com/gpu.shared": 16}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := ResourceQuotasYAML(loadDerived(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, decodeQuotas(t, out)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResourceQuotasStrict: the decoding above does refuse what the API
// types do not have, so its passing means something.
func TestResourceQuotasStrict(t *testing.T) {
	var q corev1.ResourceQuota
	bad := "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: x}\nspec: {hard: {pods: \"1\"}, hardd: {}}\n"
	if err := yaml.UnmarshalStrict([]byte(bad), &q); err == nil {
		t.Error("an unknown field decoded")
	}
}

// TestResourceQuotasLabelValue: a tenant name that is no label value (a
// policy name may end with '_') is refused, not written.
func TestResourceQuotasLabelValue(t *testing.T) {
	p, err := spec.Parse("p.yaml", []byte(`apiVersion: strata/v1
kind: Policy
cluster: {name: c}
classes: [{name: serve, partition: serve}]
tenants: [{name: acme_, serving: {gpus: 1, replicas: 1, namespace: acme}, projects: []}]
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ResourceQuotasYAML(p)
	if err == nil || !strings.Contains(err.Error(), `tenant "acme_" cannot be the value of label strata.io/tenant`) {
		t.Errorf("error = %v", err)
	}
}

// TestDiskQuotaScriptSyntax: every rendered script is POSIX sh (sh is
// dash on Debian, which knows no bashisms).
func TestDiskQuotaScriptSyntax(t *testing.T) {
	for policy, pc := range derivedPolicies {
		for _, f := range pc.files {
			if f != "disk-quota.sh" {
				continue
			}
			out, err := exec.Command("sh", "-n", derivedGolden(policy, f)).CombinedOutput()
			if err != nil {
				t.Errorf("sh -n %s: %v\n%s", derivedGolden(policy, f), err, out)
			}
		}
	}
}

// The stubs of the quota tools: each appends its name and arguments, one
// per [], to $STUB_LOG. df answers as GNU df --output=target does, with
// the .../xfs or .../lustre above the path as its mount point; lfs fails
// when $STUB_FAIL is one of its arguments. They stand in for XFS and
// Lustre, which cannot run here (no XFS mounted with prjquota, no Lustre
// servers): the test checks the exact commands, not their effect.
const (
	stubLog = `#!/bin/sh
{ printf '%s' "${0##*/}"; for a in "$@"; do printf ' [%s]' "$a"; done; echo; } >>"$STUB_LOG"
`
	stubDf = stubLog + `case $2 in
*/xfs/*) echo "Mounted on"; echo "${2%%/xfs/*}/xfs" ;;
*/lustre/*) echo "Mounted on"; echo "${2%%/lustre/*}/lustre" ;;
*) echo "df: $2: No such file or directory" >&2; exit 1 ;;
esac
`
	stubLfs = stubLog + `for a in "$@"; do [ "$a" != "${STUB_FAIL:-}" ] || exit 1; done
`
)

// TestDiskQuotaScriptRuns runs a rendered script with the stubs: in a
// dry run it runs no quota tool and prints every command; with --apply it
// runs exactly those; a missing directory or a failing command is
// reported, the other projects go on, and the exit status is 1.
func TestDiskQuotaScriptRuns(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"xfs/t/x", "lustre/t/l", "xfs/t/y"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Explicit project ids keep the expected commands free of hashes
	// (TestDiskProjectID in spec pins the derived ones). t-missing's
	// directory does not exist; t-y comes after it, to show that the
	// script goes on.
	p, err := spec.Parse("p.yaml", []byte(fmt.Sprintf(`apiVersion: strata/v1
kind: Policy
cluster: {name: c}
classes: [{name: batch, partition: gpu}]
tenants:
  - name: t
    projects:
      - {name: x, members: [], disk: {path: %[1]s/xfs/t/x, filesystem: xfs, soft_gb: 4, hard_gb: 5, project_id: 1001}}
      - {name: missing, members: [], disk: {path: %[1]s/lustre/t/missing, filesystem: lustre, hard_gb: 1, project_id: 1002}}
      - {name: l, members: [], disk: {path: %[1]s/lustre/t/l, filesystem: lustre, hard_gb: 20, inodes: 1000, project_id: 2002}}
      - {name: y, members: [], disk: {path: %[1]s/xfs/t/y, filesystem: xfs, hard_gb: 1, project_id: 3003}}
`, root)))
	if err != nil {
		t.Fatal(err)
	}
	script, err := DiskQuotaScript(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "disk-quota.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"df": stubDf, "xfs_quota": stubLog, "lfs": stubLfs} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	commands := []string{ // what --apply runs, as the stubs log it
		"df [--output=target] [ROOT/xfs/t/x]",
		"xfs_quota [-x] [-c] [project -s -p ROOT/xfs/t/x 1001] [ROOT/xfs]",
		"xfs_quota [-x] [-c] [limit -p bsoft=4g bhard=5g ihard=0 1001] [ROOT/xfs]",
		"df [--output=target] [ROOT/lustre/t/l]",
		"lfs [project] [-p] [2002] [-s] [-r] [ROOT/lustre/t/l]",
		"lfs [setquota] [-p] [2002] [-b] [0G] [-B] [20G] [-I] [1000] [ROOT/lustre]",
		"df [--output=target] [ROOT/xfs/t/y]",
		"xfs_quota [-x] [-c] [project -s -p ROOT/xfs/t/y 3003] [ROOT/xfs]",
		"xfs_quota [-x] [-c] [limit -p bsoft=0g bhard=1g ihard=0 3003] [ROOT/xfs]",
	}
	printed := []string{ // what both modes print, as a shell would read it
		"+ xfs_quota -x -c 'project -s -p ROOT/xfs/t/x 1001' ROOT/xfs",
		"+ xfs_quota -x -c 'limit -p bsoft=4g bhard=5g ihard=0 1001' ROOT/xfs",
		"+ lfs project -p 2002 -s -r ROOT/lustre/t/l",
		"+ lfs setquota -p 2002 -b 0G -B 20G -I 1000 ROOT/lustre",
		"+ xfs_quota -x -c 'project -s -p ROOT/xfs/t/y 3003' ROOT/xfs",
		"+ xfs_quota -x -c 'limit -p bsoft=0g bhard=1g ihard=0 3003' ROOT/xfs",
	}
	missing := "disk-quota.sh: t-missing: directory ROOT/lustre/t/missing does not exist: create it, then run again"
	for name, tc := range map[string]struct {
		args       []string
		fail       string // $STUB_FAIL
		wantCode   int
		wantLog    []string
		wantStdout []string
		wantStderr []string // lines stderr must hold
		state      string   // the record of an earlier run (ROOT for root)
		wantState  []string // the record after, without its comment (nil: unchanged)
	}{
		"dry run by default: only df runs": {
			wantCode: 1, wantStdout: printed,
			wantLog:    []string{commands[0], commands[3], commands[6]},
			wantStderr: []string{"disk-quota.sh: dry run: the commands below are not run; run with --apply to set the quotas", missing, "disk-quota.sh: failed: t-missing"},
		},
		"--dry-run": {
			args: []string{"--dry-run"}, wantCode: 1, wantStdout: printed,
			wantLog:    []string{commands[0], commands[3], commands[6]},
			wantStderr: []string{missing},
		},
		"--apply runs the commands": {
			args: []string{"--apply"}, wantCode: 1, wantStdout: printed, wantLog: commands,
			wantStderr: []string{missing, "disk-quota.sh: failed: t-missing"},
		},
		"a failing command stops its project only": {
			args: []string{"--apply"}, fail: "setquota", wantCode: 1,
			// lfs setquota of t-l fails; t-y is still set.
			wantStdout: printed, wantLog: commands,
			wantStderr: []string{"disk-quota.sh: failed: t-missing t-l"},
		},
		"--apply records what it set, and clears what it no longer has": {
			args: []string{"--apply"}, wantCode: 1, wantStdout: append(slices.Clone(printed),
				"+ xfs_quota -x -c 'limit -p bsoft=0 bhard=0 isoft=0 ihard=0 4004' ROOT/xfs",
				"+ lfs setquota -p 2002 -b 0 -B 0 -i 0 -I 0 ROOT/old-lustre"),
			wantLog: append(slices.Clone(commands),
				"xfs_quota [-x] [-c] [limit -p bsoft=0 bhard=0 isoft=0 ihard=0 4004] [ROOT/xfs]",
				"lfs [setquota] [-p] [2002] [-b] [0] [-B] [0] [-i] [0] [-I] [0] [ROOT/old-lustre]"),
			// t-gone left the policy; t-l moved to another file system;
			// t-x is as before; t-missing failed, so its record stays.
			state:     "# comment\nxfs 4004 ROOT/xfs t-gone\nlustre 2002 ROOT/old-lustre t-l\nxfs 1001 ROOT/xfs t-x\nlustre 1002 ROOT/lustre t-missing\n",
			wantState: []string{"xfs 1001 ROOT/xfs t-x", "lustre 2002 ROOT/lustre t-l", "xfs 3003 ROOT/xfs t-y", "lustre 1002 ROOT/lustre t-missing"},
			wantStderr: []string{
				"disk-quota.sh: t-gone: project 4004 on ROOT/xfs is no longer in the policy: its limits are removed, its files kept",
				"disk-quota.sh: t-l: project 2002 on ROOT/old-lustre is no longer in the policy: its limits are removed, its files kept",
				"disk-quota.sh: failed: t-missing"},
		},
		"a dry run clears nothing and records nothing": {
			wantCode: 1, wantStdout: append(slices.Clone(printed), "+ xfs_quota -x -c 'limit -p bsoft=0 bhard=0 isoft=0 ihard=0 4004' ROOT/xfs"),
			wantLog: []string{commands[0], commands[3], commands[6]},
			state:   "xfs 4004 ROOT/xfs t-gone\n",
		},
		"unknown argument": {
			args: []string{"--aply"}, wantCode: 2,
			wantStderr: []string{"disk-quota.sh: unknown argument --aply (see --help)"},
		},
		"two arguments": {
			args: []string{"--apply", "--dry-run"}, wantCode: 2,
			wantStderr: []string{"disk-quota.sh: at most one argument, --dry-run or --apply (see --help)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			state := filepath.Join(t.TempDir(), "state")
			if tc.state != "" {
				if err := os.WriteFile(state, []byte(strings.ReplaceAll(tc.state, "ROOT", root)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", append([]string{path}, tc.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STUB_LOG="+log, "STUB_FAIL="+tc.fail,
				"STRATA_DISK_QUOTA_STATE="+state)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			logged, _ := os.ReadFile(log)
			rootless := func(s string) []string {
				s = strings.TrimSpace(strings.ReplaceAll(s, root, "ROOT"))
				if s == "" {
					return nil
				}
				return strings.Split(s, "\n")
			}
			if diff := cmp.Diff(tc.wantLog, rootless(string(logged))); diff != "" {
				t.Errorf("commands run (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStdout, rootless(stdout.String())); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tc.wantState != nil {
				after, err := os.ReadFile(state)
				if err != nil {
					t.Fatal(err)
				}
				lines := rootless(string(after))
				if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
					t.Errorf("record %q: want a comment first", lines)
				} else if diff := cmp.Diff(tc.wantState, lines[1:]); diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
			} else if tc.state != "" {
				if after, _ := os.ReadFile(state); string(after) != strings.ReplaceAll(tc.state, "ROOT", root) {
					t.Errorf("record changed to:\n%s", after)
				}
			}
			errLines := rootless(stderr.String())
			for _, want := range tc.wantStderr {
				if !slices.Contains(errLines, want) {
					t.Errorf("stderr lacks %q:\n%s", want, strings.Join(errLines, "\n"))
				}
			}
		})
	}
}

// TestDiskQuotaScriptHelp: --help prints the usage from the script's own
// comments.
func TestDiskQuotaScriptHelp(t *testing.T) {
	out, err := exec.Command("sh", derivedGolden("example", "disk-quota.sh"), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Usage: disk-quota.sh [--dry-run | --apply]", "lfs setquota -p ID -b SG -B HG -I N MOUNT"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "set -eu") || strings.Contains(string(out), "#!/bin/sh") {
		t.Errorf("--help shows code:\n%s", out)
	}
}

// TestDiskQuotaScriptRefuses: a policy built in code with a path the
// shell would read as syntax renders no script.
func TestDiskQuotaScriptRefuses(t *testing.T) {
	p := &spec.Policy{Cluster: spec.Cluster{Name: "c"}, Tenants: []spec.Tenant{{Name: "t", Projects: []spec.Project{{
		Name: "x", Disk: &spec.Disk{Path: "/srv/x; rm -rf /", Filesystem: spec.FilesystemXFS, HardGB: 1, ProjectID: 5},
	}}}}}
	if _, err := DiskQuotaScript(p); err == nil || !strings.Contains(err.Error(), `disk path "/srv/x; rm -rf /"`) {
		t.Errorf("error = %v", err)
	}
}
