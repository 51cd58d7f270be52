//go:build integration

package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// TestResourceQuotasEnforced applies the rendered k8s/resourcequotas.yaml
// to the Kubernetes test bed, whose apiserver limits every nvidia.com/
// resource, and shows the apiserver holding each tenant to its tiers: a
// pod within a tier's quota is admitted, one over it is refused, and one
// of a tier the tenant's serving: block leaves out is refused too.
func TestResourceQuotasEnforced(t *testing.T) {
	cfg := kubetest.Config(t)
	ctx := kubetest.Context(t)
	slices, shared := kubetest.Namespace(t, cfg, "quota-slices"), kubetest.Namespace(t, cfg, "quota-shared")
	p, err := spec.Parse("policy.yaml", []byte(fmt.Sprintf(`apiVersion: strata/v1
kind: Policy
cluster: {name: c}
classes: [{name: serve, partition: serve}]
tenants:
  - name: slices
    serving: {gpus: 0, replicas: 4, namespace: %s, isolation: true, tiers: {mig-1g.10gb: 2}}
    projects: []
  - name: shared
    serving: {gpus: 1, replicas: 4, namespace: %s, tiers: {time-sliced: 2}}
    projects: []
`, slices, shared)))
	if err != nil {
		t.Fatal(err)
	}
	out, err := ResourceQuotasYAML(p)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	gvr := map[string]schema.GroupVersionResource{
		"Namespace":     {Version: "v1", Resource: "namespaces"},
		"ResourceQuota": {Version: "v1", Resource: "resourcequotas"},
		"PriorityClass": {Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"},
	}
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(o.Object) == 0 {
			continue
		}
		var ri dynamic.ResourceInterface = dyn.Resource(gvr[o.GetKind()])
		if o.GetNamespace() != "" {
			ri = dyn.Resource(gvr[o.GetKind()]).Namespace(o.GetNamespace())
		}
		data, _ := o.MarshalJSON()
		force := true
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "strata-policy-test", Force: &force}); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	core := corev1client.NewForConfigOrDie(cfg)
	n := 0
	pod := func(ns string, r corev1.ResourceName, count int64) error {
		n++
		res := corev1.ResourceList{r: *resource.NewQuantity(count, resource.DecimalSI)}
		_, err := core.Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", n)}, Spec: corev1.PodSpec{
			PriorityClassName: "strata-serving-mig",
			Containers:        []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}},
			metav1.CreateOptions{})
		return err
	}
	// Within the MIG tier: admitted once the quota controller has counted
	// the namespace (its first status).
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := pod(slices, "nvidia.com/mig-1g.10gb", 2)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pod within the mig-1g.10gb tier: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for name, tc := range map[string]struct {
		ns       string
		resource corev1.ResourceName
		count    int64
		want     string
	}{
		"over the MIG tier":         {slices, "nvidia.com/mig-1g.10gb", 1, "exceeded quota: strata-serving"},
		"whole GPUs at 0":           {slices, "nvidia.com/gpu", 1, "exceeded quota: strata-serving"},
		"a tier it has not":         {slices, "nvidia.com/gpu.shared", 1, "insufficient quota to consume: requests.nvidia.com/gpu.shared"},
		"another MIG profile":       {slices, "nvidia.com/mig-3g.40gb", 1, "insufficient quota to consume: requests.nvidia.com/mig-3g.40gb"},
		"over the time-sliced tier": {shared, "nvidia.com/gpu.shared", 3, "exceeded quota: strata-serving"},
	} {
		err := pod(tc.ns, tc.resource, tc.count)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want forbidden: %s", name, err, tc.want)
		}
	}
}
