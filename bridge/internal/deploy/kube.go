package deploy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/strata-hpc/strata/bridge/internal/render"
	"github.com/strata-hpc/strata/internal/bridgeapi"
)

// Actions of one object in an apply.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
	ActionDeleted    = "deleted"
)

// ObjectRef names one Kubernetes object.
type ObjectRef = bridgeapi.ObjectRef

// Ref names obj.
func Ref(obj *unstructured.Unstructured) ObjectRef {
	return ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Applied is what an apply did to one object. Generations are 0 for kinds
// without one (Service) and before the object existed.
type Applied struct {
	ObjectRef
	Action           string                     `json:"action"`
	GenerationBefore int64                      `json:"generation_before,omitempty"`
	GenerationAfter  int64                      `json:"generation_after,omitempty"`
	Object           *unstructured.Unstructured `json:"-"`
}

// Kube is the cluster as the bridge uses it: server-side apply with its
// own field manager through the dynamic client, with a RESTMapper read
// from discovery (so InferenceService works once its CRD is installed),
// and listing and deleting by the bridge's labels.
type Kube struct {
	dyn     dynamic.Interface
	disc    discovery.DiscoveryInterface
	mapper  meta.ResettableRESTMapper
	manager string
}

// NewKube connects to the apiserver of cfg; fieldManager names the bridge
// in the objects' managedFields.
func NewKube(cfg *rest.Config, fieldManager string) (*Kube, error) {
	if fieldManager == "" {
		return nil, errors.New("kubernetes: no field manager")
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes discovery: %w", err)
	}
	return &Kube{dyn: dyn, disc: dc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), manager: fieldManager}, nil
}

// Ping asks the apiserver whether it is ready (GET /readyz, which every
// client may read): the daemon's health and the watcher's "is there a
// cluster to deploy to" before a cycle.
func (k *Kube) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := k.disc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("kubernetes apiserver not ready: %w", err)
	}
	return nil
}

// pingTimeout bounds Ping: an apiserver that takes longer is not one to
// deploy to.
const pingTimeout = 10 * time.Second

// FieldManager is the name the bridge applies as.
func (k *Kube) FieldManager() string { return k.manager }

// mapping finds the resource of a kind, reading discovery again once when
// the kind is unknown (a CRD installed since the last read).
func (k *Kube) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		k.mapper.Reset()
		m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	switch {
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("%s: the cluster does not serve this kind: %w", gvk, err)
	case err != nil:
		// Discovery itself failed: the apiserver is down or unreachable,
		// which says nothing of the kinds it serves.
		return nil, fmt.Errorf("%s: cannot look up this kind: the Kubernetes apiserver did not answer discovery: %w", gvk, err)
	}
	return m, nil
}

func (k *Kube) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := k.mapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource).Namespace(namespace), nil
	}
	return k.dyn.Resource(m.Resource), nil
}

// Get reads one object; (nil, nil) when it does not exist.
func (k *Kube) Get(ctx context.Context, ref ObjectRef) (*unstructured.Unstructured, error) {
	ri, err := k.resource(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind), ref.Namespace)
	if err != nil {
		return nil, err
	}
	obj, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	return obj, nil
}

// Apply applies obj server-side with the bridge's field manager, taking
// over fields another manager set (Force), and says whether that created,
// changed or left the object as it was: an apply that changes nothing
// leaves the resourceVersion (and the generation) as they were. With
// dryRun the apiserver runs everything but storing.
func (k *Kube) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (Applied, error) {
	ref := Ref(obj)
	out := Applied{ObjectRef: ref}
	ri, err := k.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return out, err
	}
	before, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		before = nil
	case err != nil:
		return out, fmt.Errorf("read %s: %w", ref, err)
	default:
		out.GenerationBefore = before.GetGeneration()
	}
	opts := metav1.ApplyOptions{FieldManager: k.manager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	after, err := ri.Apply(ctx, ref.Name, obj, opts)
	if err != nil {
		if dryRun && before == nil && isNamespaceNotFound(err) {
			// The namespace is created by the same apply: nothing in it
			// can be tried before.
			out.Action = ActionCreated
			return out, nil
		}
		return out, fmt.Errorf("apply %s: %w", ref, err)
	}
	out.Object, out.GenerationAfter = after, after.GetGeneration()
	switch {
	case before == nil:
		out.Action = ActionCreated
	case !dryRun && before.GetResourceVersion() == after.GetResourceVersion():
		out.Action = ActionUnchanged
	case dryRun && sameContent(before, after):
		out.Action = ActionUnchanged
	default:
		out.Action = ActionConfigured
	}
	return out, nil
}

func isNamespaceNotFound(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || !apierrors.IsNotFound(err) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "namespaces"
}

// sameContent compares two versions of an object without what every
// write changes (resourceVersion, managedFields' times, generation).
func sameContent(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
		unstructured.RemoveNestedField(c.Object, "metadata", "generation")
		return c.Object
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// ListManaged returns the objects of the given kinds in namespace that
// carry the bridge's labels for the deployment name; kinds the cluster
// does not serve are skipped.
func (k *Kube) ListManaged(ctx context.Context, namespace, name string, kinds []schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	sel := labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy, render.LabelName: name}).String()
	var out []*unstructured.Unstructured
	for _, gvk := range kinds {
		ri, err := k.resource(gvk, namespace)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list %s in %s: %w", gvk.Kind, namespace, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			// A list answers with the list's apiVersion/kind only.
			obj.SetGroupVersionKind(gvk)
			out = append(out, obj)
		}
	}
	return out, nil
}

// Delete deletes obj if it is still the object listed (same UID), and
// lets the garbage collector remove what it owns (ReplicaSets, Pods).
func (k *Kube) Delete(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	ri, err := k.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return err
	}
	uid := obj.GetUID()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if err := ri.Delete(ctx, obj.GetName(), opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", Ref(obj), err)
	}
	return nil
}

// deletableKinds are the kinds a deployment's own objects may have: what
// the renderer makes besides the tenant's shared Namespace and
// ResourceQuota, plus the kinds of stored objects.
func deletableKinds(stored []*unstructured.Unstructured) []schema.GroupVersionKind {
	set := map[schema.GroupVersionKind]bool{
		{Group: "apps", Version: "v1", Kind: "Deployment"}:                         true,
		{Version: "v1", Kind: "Service"}:                                           true,
		{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}:     true,
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}:              true,
		{Group: "serving.kserve.io", Version: "v1beta1", Kind: "InferenceService"}: true,
	}
	seen := map[schema.GroupKind]bool{}
	for gvk := range set {
		seen[gvk.GroupKind()] = true
	}
	for _, o := range stored {
		gvk := o.GroupVersionKind()
		if shared(gvk.Kind) || seen[gvk.GroupKind()] {
			continue
		}
		set[gvk], seen[gvk.GroupKind()] = true, true
	}
	return slices.SortedFunc(maps.Keys(set), func(a, b schema.GroupVersionKind) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Kind, b.Kind))
	})
}

// shared kinds belong to the tenant, not to one deployment: never pruned
// or deleted.
func shared(kind string) bool {
	return kind == "Namespace" || kind == "ResourceQuota" || kind == "PriorityClass"
}
