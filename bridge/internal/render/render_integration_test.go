//go:build integration

package render

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/config"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/servingquota"
)

// resources maps the kinds Render makes to their API resources.
var resources = map[string]schema.GroupVersionResource{
	"Namespace":               {Version: "v1", Resource: "namespaces"},
	"ResourceQuota":           {Version: "v1", Resource: "resourcequotas"},
	"PriorityClass":           {Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"},
	"Service":                 {Version: "v1", Resource: "services"},
	"Deployment":              {Group: "apps", Version: "v1", Resource: "deployments"},
	"HorizontalPodAutoscaler": {Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
	"PodDisruptionBudget":     {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	KServeKind:                {Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"},
}

// TestAPIServerAccepts sends the objects of every golden case to the real
// kube-apiserver of the Kubernetes test bed as a server-side apply with
// dryRun=All, in a namespace of its own: its validation, defaulting and
// admission accept each one, field for field (fieldValidation=Strict),
// and nothing is stored. An InferenceService is checked only where the
// cluster has KServe's CRD; the test bed has none.
func TestAPIServerAccepts(t *testing.T) {
	cfg := kubetest.Config(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range goldenCases {
		t.Run(name, func(t *testing.T) {
			ctx := kubetest.Context(t)
			ns := kubetest.Namespace(t, cfg, "render")
			in := input(t, name, c)
			in.Namespace, in.Quota.Namespace = ns, ns
			objs, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				gvr, ok := resources[o.GetKind()]
				if !ok {
					t.Fatalf("no resource for %s", o.GetKind())
				}
				var ri dynamic.ResourceInterface = dyn.Resource(gvr)
				if o.GetNamespace() != "" {
					ri = dyn.Resource(gvr).Namespace(o.GetNamespace())
				}
				data, err := o.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
					FieldManager: "strata-render-test", Force: ptr(true),
					DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
				})
				if o.GetKind() == KServeKind && apierrors.IsNotFound(err) {
					t.Logf("%s not checked: the cluster has no KServe CRD (%v)", o.GetKind(), err)
					continue
				}
				if err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}

// TestRollsOut applies the objects of every case without KServe for real,
// in a namespace of its own with the tenant's ResourceQuota, and waits
// for the Deployment to roll out on the test bed's fake GPU nodes: the
// GPU requests fit the quota, the pods tolerate and schedule, and the
// probes' named port exists (kwok reports the pods ready).
func TestRollsOut(t *testing.T) {
	cfg := kubetest.Config(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range goldenCases {
		if c.kserve {
			continue
		}
		t.Run(name, func(t *testing.T) {
			ctx := kubetest.Context(t)
			ns := kubetest.Namespace(t, cfg, "render")
			in := input(t, name, c)
			in.Namespace, in.Quota.Namespace = ns, ns
			if tier := Tier(&in.Spec, in.Runtime); tier == servingquota.TierTimeSliced {
				// acme asks for isolation and has no time slices; the
				// apiserver would refuse the pods (limitedResources).
				in.Quota.Isolation = false
				in.Quota.Tiers = append(slices.Clone(in.Quota.Tiers), servingquota.Tier{Name: tier, Resource: servingquota.Resource(tier), Quota: 4})
			}
			objs, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			if c.mount.Kind == config.MountPVC {
				boundClaim(t, cfg, ns, c.mount.ClaimName)
			}
			for _, o := range objs {
				data, err := o.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				var ri dynamic.ResourceInterface = dyn.Resource(resources[o.GetKind()])
				if o.GetNamespace() != "" {
					ri = dyn.Resource(resources[o.GetKind()]).Namespace(ns)
				}
				if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
					FieldManager: "strata-render-test", Force: ptr(true)}); err != nil {
					t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			want := int64(in.Spec.MinReplicas())
			deadline := time.Now().Add(time.Minute)
			for {
				d, err := dyn.Resource(resources["Deployment"]).Namespace(ns).Get(ctx, in.Spec.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
				updated, _, _ := unstructured.NestedInt64(d.Object, "status", "updatedReplicas")
				available, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
				if observed == d.GetGeneration() && updated == want && available == want {
					return
				}
				if time.Now().After(deadline) {
					st, _, _ := unstructured.NestedMap(d.Object, "status")
					describePods(t, cfg, ns)
					t.Fatalf("not rolled out after a minute (want %d available): status %v", want, st)
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
}

// boundClaim gives namespace ns the claim a pvc mount expects, as a site
// would: bound to a volume of the shared file system. The test bed runs no
// volume binder, so the test binds them itself (spec and status); kwok
// mounts nothing, so the volume's path is never used.
func boundClaim(t *testing.T, cfg *rest.Config, ns, claim string) {
	t.Helper()
	ctx := kubetest.Context(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("1Ti")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim, Labels: map[string]string{kubetest.LabelTest: "true"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				NFS: &corev1.NFSVolumeSource{Server: "nfs.invalid", Path: "/export/shared", ReadOnly: true}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim},
		},
	}
	pv, err = cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create volume: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pv.Status.Phase = corev1.VolumeBound
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("bind volume: %v", err)
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		// The volume binder marks a claim it bound; the scheduler looks
		// for the mark.
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns,
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeName:       pv.Name,
			StorageClassName: &empty,
		},
	}
	pvc, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create claim: %v", err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("bind claim: %v", err)
	}
}

// describePods logs the pods of ns and the namespace's events, for a
// rollout that failed.
func describePods(t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kubetest.Context(t)
	if pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: %s on %q, conditions %+v", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
		}
	}
	if evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}
