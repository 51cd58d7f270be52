package render

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "k8s/resourcequotas.yaml", Dir: DirStrata, Mode: 0o644,
		Doc: "serving namespaces and ResourceQuotas, for kubectl apply", Render: ResourceQuotasYAML})
}

// The labels, names and resources of what ResourceQuotasYAML writes.
// managed-by is Strata's ownership mark on what it puts in Kubernetes.
const (
	k8sLabelManagedBy = "app.kubernetes.io/managed-by"
	k8sManagedBy      = "strata"
	k8sLabelTenant    = "strata.io/tenant"
	k8sQuotaName      = "strata-serving"
	k8sResourceGPU    = "requests.nvidia.com/gpu"
	// corev1RequestsPrefix heads the quota of an extended resource: only
	// requests can have one.
	corev1RequestsPrefix = "requests."
	k8sResourcePods      = "pods"
	k8sQuotasHead        = `# /etc/strata/rendered/k8s/resourcequotas.yaml: the PriorityClasses of the GPU
# sharing tiers, and the namespace and serving quota of every tenant with
# a serving: block, written by strata-policy render from the policy. Do
# not edit it: the next render overwrites it.
#
#   kubectl apply --server-side -f /etc/strata/rendered/k8s/resourcequotas.yaml
#
# The apiserver then holds each tenant's model servers to its quota, as
# strata-bridge does before it deploys: requests.nvidia.com/gpu is
# serving.gpus (GPUs are requested, never overcommitted, so requests are
# what counts), requests.<resource> of each tier is serving.tiers, pods is
# serving.replicas (pods that have not finished). A tier a tenant may not
# use has no line here: start the apiserver with the ResourceQuota
# admission configured to limit every nvidia.com/ resource
# (limitedResources, see policy/README.md), so a pod that asks for a
# resource its namespace's quota does not name is refused. A Deployment
# that rolls out with maxSurge needs room for its surge pods within pods
# and the tier's quota.
`
)

// k8sLabelValueRE matches a Kubernetes label value (at most 63 characters).
var k8sLabelValueRE = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

// ResourceQuotasYAML renders the PriorityClasses of the GPU sharing tiers
// (servingquota.PriorityClasses), then, for every tenant with a serving
// quota in the order of the policy, a Namespace (serving.namespace) and a
// ResourceQuota strata-serving in it (whole GPUs, pods, and each tier's
// resource), both labelled as Strata's and with the tenant, as one
// multi-document YAML file. Tenants without a serving: block get
// nothing: strata-bridge refuses to serve for them. Strings are quoted, so
// no YAML reader takes a name such as "no" for something else.
func ResourceQuotasYAML(p *spec.Policy) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(k8sQuotasHead)
	var tenants bytes.Buffer
	n := 0
	for _, t := range p.Tenants {
		if t.Serving == nil {
			continue
		}
		if len(t.Name) > 63 || !k8sLabelValueRE.MatchString(t.Name) {
			return nil, fmt.Errorf("tenant %q cannot be the value of label %s: a label value is at most 63 characters and starts and ends with a letter or digit", t.Name, k8sLabelTenant)
		}
		ns := t.Serving.Namespace
		if ns == "" {
			ns = spec.DefaultNamespace(t.Name)
		}
		n++
		labels := fmt.Sprintf("  labels:\n    %s: %s\n    %s: %s\n", k8sLabelManagedBy, strconv.Quote(k8sManagedBy), k8sLabelTenant, strconv.Quote(t.Name))
		fmt.Fprintf(&tenants, "---\n# tenant %s\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n%s", t.Name, strconv.Quote(ns), labels)
		fmt.Fprintf(&tenants, "---\napiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: %s\n  namespace: %s\n%s", k8sQuotaName, strconv.Quote(ns), labels)
		fmt.Fprintf(&tenants, "spec:\n  hard:\n    # serving.gpus\n    %s: %s\n    # serving.replicas\n    %s: %s\n",
			k8sResourceGPU, strconv.Quote(strconv.Itoa(t.Serving.GPUs)), k8sResourcePods, strconv.Quote(strconv.Itoa(t.Serving.Replicas)))
		for _, tier := range slices.Sorted(maps.Keys(t.Serving.Tiers)) {
			if q := t.Serving.Tiers[tier]; q > 0 {
				fmt.Fprintf(&tenants, "    # serving.tiers.%s\n    %s: %s\n", tier, corev1RequestsPrefix+servingquota.Resource(tier), strconv.Quote(strconv.Itoa(q)))
			}
		}
	}
	if n == 0 {
		b.WriteString("#\n# No tenant has a serving: block: nothing to apply.\n")
		return b.Bytes(), nil
	}
	for _, pc := range servingquota.PriorityClasses {
		// preemptionPolicy Never: the value orders the scheduler's queue,
		// and no model server evicts another tenant's.
		fmt.Fprintf(&b, "---\n# %s\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: %s\n  labels:\n    %s: %s\nvalue: %d\npreemptionPolicy: Never\nglobalDefault: false\ndescription: %s\n",
			pc.Description, strconv.Quote(pc.Name), k8sLabelManagedBy, strconv.Quote(k8sManagedBy), pc.Value, strconv.Quote(pc.Description))
	}
	b.Write(tenants.Bytes())
	return b.Bytes(), nil
}
