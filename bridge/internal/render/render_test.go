package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/servingquota"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the renderer's output")

// runtimesDir is the runtime templates the packages ship.
const runtimesDir = "../../../etc/strata/bridge/runtimes"

// The mounts of the golden cases. The node and server paths differ from
// the Slurm-side root, so the goldens show the mapping.
var (
	hostPathMount = config.Mount{Kind: config.MountHostPath, Path: "/mnt/shared", Root: "/shared"}
	nfsMount      = config.Mount{Kind: config.MountNFS, Server: "nfs1.example.org", Path: "/export/shared", Root: "/shared"}
	pvcMount      = config.Mount{Kind: config.MountPVC, ClaimName: "shared-fs", Root: "/shared"}
)

// goldenCase is one golden file: testdata/<name>.yaml is what Render makes
// of testdata/specs/<name>.serve.yaml with the shipped runtime templates.
type goldenCase struct {
	mount     config.Mount
	kserve    bool
	mode      string
	spreadKey string
	surge     bool
}

// goldenCases cover every runtime template, with and without an
// autoscaler, each mount kind, and KServe in both deployment modes.
var goldenCases = map[string]goldenCase{
	"vllm-hostpath":                    {mount: hostPathMount, spreadKey: "kubernetes.io/hostname"},
	"vllm-hostpath-autoscale":          {mount: hostPathMount, spreadKey: "kubernetes.io/hostname"},
	"triton-nfs":                       {mount: nfsMount, spreadKey: "topology.kubernetes.io/zone"},
	"triton-nfs-autoscale":             {mount: nfsMount, spreadKey: "topology.kubernetes.io/zone"},
	"generic-pvc":                      {mount: pvcMount},
	"generic-pvc-autoscale":            {mount: pvcMount, spreadKey: "kubernetes.io/hostname"},
	"kserve-vllm-pvc":                  {mount: pvcMount, kserve: true, spreadKey: "kubernetes.io/hostname"},
	"kserve-triton-hostpath-autoscale": {mount: hostPathMount, kserve: true, mode: config.KServeStandard, spreadKey: "kubernetes.io/hostname"},
	"kserve-generic-nfs-rawdeployment": {mount: nfsMount, kserve: true, mode: config.KServeRawDeployment},
	// One case per GPU sharing tier (dedicated is vllm-hostpath): the
	// tier's resource, its PriorityClass; and a rollout with a surge
	// replica.
	"vllm-mig":         {mount: hostPathMount, spreadKey: "kubernetes.io/hostname"},
	"vllm-mps":         {mount: hostPathMount},
	"vllm-time-sliced": {mount: hostPathMount},
	"vllm-surge":       {mount: hostPathMount, surge: true},
}

// acmeQuota is the serving quota of the example policy's tenant acme
// (etc/strata/policy.yaml: serving gpus 8, replicas 12, MIG and MPS
// tiers).
var acmeQuota = servingquota.Tenant{Name: "acme", Namespace: "strata-acme", GPUs: 8, Replicas: 12, Isolation: true,
	Tiers: []servingquota.Tier{
		{Name: "mig-1g.10gb", Resource: "nvidia.com/mig-1g.10gb", Quota: 8},
		{Name: "mig-3g.40gb", Resource: "nvidia.com/mig-3g.40gb", Quota: 2},
		{Name: "mps", Resource: "nvidia.com/gpu.mps", Quota: 4},
	},
	Projects: []servingquota.Project{{Name: "llm", Account: "acme-llm"}}}

// input builds the Input of a golden case the way the bridge does: the
// spec file parsed, the bridge's default defaults applied, the runtime
// loaded from the shipped templates.
func input(t testing.TB, name string, c goldenCase) Input {
	t.Helper()
	spec, err := servespec.Load(filepath.Join("testdata/specs", name+".serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec.ApplyDefaults(config.Default().Defaults)
	rt, err := LoadRuntime(runtimesDir, spec.Runtime)
	if err != nil {
		t.Fatal(err)
	}
	return Input{
		Spec: *spec, JobID: 4242, User: "alice", Account: "acme-llm", Tenant: "acme", Project: "llm",
		Namespace: "strata-acme", Quota: acmeQuota, Runtime: rt, Mount: c.mount,
		KServe: c.kserve, KServeDeploymentMode: c.mode, SpreadKey: c.spreadKey, Surge: c.surge,
	}
}

// marshal writes objects as YAML documents, in order.
func marshal(t testing.TB, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, o := range objs {
		if err := enc.Encode(o.Object); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGolden renders every case and compares it with its golden file
// (go test -update rewrites them; review the diff).
func TestGolden(t *testing.T) {
	for name, c := range goldenCases {
		t.Run(name, func(t *testing.T) {
			objs, err := Render(input(t, name, c))
			if err != nil {
				t.Fatal(err)
			}
			got := marshal(t, objs)
			path := filepath.Join("testdata", name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-golden +rendered):\n%s", path, diff)
			}
		})
	}
}

// TestEveryGoldenFileHasACase: no golden file is left over from a case
// that was removed, and every spec file is used.
func TestEveryGoldenFileHasACase(t *testing.T) {
	for _, pattern := range []string{"testdata/*.yaml", "testdata/specs/*.serve.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".yaml"), ".serve")
			if _, ok := goldenCases[name]; !ok {
				t.Errorf("%s has no golden case", f)
			}
		}
	}
}

// goldenObjects reads the documents of a golden file.
func goldenObjects(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var objs []map[string]any
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, m)
	}
}

// TestGoldenShape checks what each golden case must hold, by its name:
// the PriorityClass of its tier when it has GPUs, then the tenant's
// Namespace and ResourceQuota; a Deployment and
// Service, or an InferenceService with KServe; an autoscaler exactly when
// the spec autoscales; a disruption budget exactly when the spec can run
// more than one replica; in apply order.
func TestGoldenShape(t *testing.T) {
	for name, c := range goldenCases {
		t.Run(name, func(t *testing.T) {
			in := input(t, name, c)
			want := []string{"v1/Namespace", "v1/ResourceQuota"}
			if GPUs(&in.Spec, in.Runtime) > 0 {
				want = append([]string{"scheduling.k8s.io/v1/PriorityClass"}, want...)
			}
			switch {
			case c.kserve:
				want = append(want, KServeAPIVersion+"/"+KServeKind)
			case strings.HasSuffix(name, "-autoscale"):
				want = append(want, "apps/v1/Deployment", "v1/Service", "autoscaling/v2/HorizontalPodAutoscaler")
			default:
				want = append(want, "apps/v1/Deployment", "v1/Service")
			}
			if in.Spec.MaxReplicas() > 1 {
				want = append(want, "policy/v1/PodDisruptionBudget")
			}
			var got []string
			for _, o := range goldenObjects(t, filepath.Join("testdata", name+".yaml")) {
				got = append(got, fmt.Sprintf("%s/%s", o["apiVersion"], o["kind"]))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if (in.Spec.Autoscale != nil) != strings.HasSuffix(name, "-autoscale") {
				t.Errorf("the case's name and its spec disagree about autoscaling")
			}
		})
	}
}

// TestGoldenDecodesStrictly decodes every object of every golden file
// into its k8s.io/api type (the InferenceService into a mirror of KServe's
// types) with unknown fields as errors, so that a misspelt field name
// fails; and converts it back, so that a value the type cannot hold (a
// string for a number, a field in the wrong place) fails too.
func TestGoldenDecodesStrictly(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		for i, o := range goldenObjects(t, f) {
			t.Run(fmt.Sprintf("%s/%d-%s", filepath.Base(f), i, o["kind"]), func(t *testing.T) {
				if err := decodeStrict(o); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestLabels checks the labels of every rendered object against values
// written out here: the tenant's objects carry managed-by and tenant; the
// model's objects and their pods carry all seven; selectors pick the pods
// by name and managed-by only (a Deployment's selector cannot change
// between versions).
func TestLabels(t *testing.T) {
	tenant := map[string]string{"app.kubernetes.io/managed-by": "strata", "strata.io/tenant": "acme"}
	for name, c := range goldenCases {
		t.Run(name, func(t *testing.T) {
			in := input(t, name, c)
			model := in.Spec.Name
			want := map[string]string{
				"app.kubernetes.io/managed-by": "strata",
				"app.kubernetes.io/name":       model,
				"strata.io/tenant":             "acme",
				"strata.io/project":            "llm",
				"strata.io/model":              model,
				"strata.io/version":            "job-4242",
				"strata.io/slurm-job":          "4242",
			}
			selector := map[string]any{"app.kubernetes.io/managed-by": "strata", "app.kubernetes.io/name": model}
			objs, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				kind := o.GetKind()
				switch kind {
				case "Namespace", "ResourceQuota":
					if diff := cmp.Diff(tenant, o.GetLabels()); diff != "" {
						t.Errorf("%s labels (-want +got):\n%s", kind, diff)
					}
					continue
				case "PriorityClass":
					// Cluster-wide, shared by every tenant's replicas of
					// its tier: only the ownership mark.
					if diff := cmp.Diff(map[string]string{LabelManagedBy: ManagedBy}, o.GetLabels()); diff != "" || o.GetNamespace() != "" {
						t.Errorf("PriorityClass %s/%s labels (-want +got):\n%s", o.GetNamespace(), o.GetName(), diff)
					}
					continue
				}
				if o.GetName() != model || o.GetNamespace() != "strata-acme" {
					t.Errorf("%s is %s/%s, want strata-acme/%s", kind, o.GetNamespace(), o.GetName(), model)
				}
				if diff := cmp.Diff(want, o.GetLabels()); diff != "" {
					t.Errorf("%s labels (-want +got):\n%s", kind, diff)
				}
				var podLabels map[string]string
				var sel any
				switch kind {
				case "Deployment":
					podLabels, _, _ = unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
					sel, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "selector", "matchLabels")
				case KServeKind:
					podLabels, _, _ = unstructured.NestedStringMap(o.Object, "spec", "predictor", "labels")
				case "Service":
					sel, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "selector")
				case "PodDisruptionBudget":
					sel, _, _ = unstructured.NestedFieldNoCopy(o.Object, "spec", "selector", "matchLabels")
				case "HorizontalPodAutoscaler":
					if ref, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name"); ref != model {
						t.Errorf("the autoscaler scales %q", ref)
					}
				default:
					t.Errorf("unexpected %s", kind)
				}
				if podLabels != nil {
					if diff := cmp.Diff(want, podLabels); diff != "" {
						t.Errorf("%s pod labels (-want +got):\n%s", kind, diff)
					}
				}
				if sel != nil {
					if diff := cmp.Diff(selector, sel); diff != "" {
						t.Errorf("%s selector (-want +got):\n%s", kind, diff)
					}
				}
			}
		})
	}
}

// TestDeterministic: the same input renders the same bytes, and Render
// leaves its input as it was.
func TestDeterministic(t *testing.T) {
	for name, c := range goldenCases {
		t.Run(name, func(t *testing.T) {
			in := input(t, name, c)
			before := input(t, name, c)
			a, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(marshal(t, a), marshal(t, b)) {
				t.Error("two renders differ")
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("Render changed its input (-before +after):\n%s", diff)
			}
			// Objects are independent: changing one render's output does
			// not change the next.
			a[len(a)-1].SetName("changed")
			c, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(marshal(t, b), marshal(t, c)) {
				t.Error("a render shares state with the one before")
			}
			if _, err := json.Marshal(a[0].Object); err != nil {
				t.Errorf("objects do not marshal as JSON: %v", err)
			}
		})
	}
}
