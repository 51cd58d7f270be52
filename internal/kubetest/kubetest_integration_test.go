//go:build integration

package kubetest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/internal/kubetest"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// TestBedIsTheOneBuilt checks that the apiserver answers with the version the
// test bed's tool module pins, stamped into the binary (an unstamped build
// says v0.0.0-master), and that the environment file says the same.
func TestBedIsTheOneBuilt(t *testing.T) {
	cfg := kubetest.Config(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(kubetest.Context(t), http.MethodGet, cfg.Host+"/version", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	defer resp.Body.Close()
	var v struct{ GitVersion, Major, Minor string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	if !regexp.MustCompile(`^v1\.\d+\.\d+$`).MatchString(v.GitVersion) || v.Major != "1" || !strings.HasPrefix(v.GitVersion, "v1."+v.Minor+".") {
		t.Errorf("kube-apiserver version %+v: want a stamped release vMAJOR.MINOR.PATCH", v)
	}
	if f := os.Getenv(kubetest.EnvVar); f != "" {
		b, err := kubetest.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if b.Version != v.GitVersion {
			t.Errorf("environment file says %s, the apiserver %s", b.Version, v.GitVersion)
		}
	}
}

// TestWrongTokenIsRefused checks that the bed authenticates: the same
// configuration with another token gets 401, and Ready reports it.
func TestWrongTokenIsRefused(t *testing.T) {
	cfg := rest.CopyConfig(kubetest.Config(t))
	cfg.BearerToken, cfg.BearerTokenFile = "not-the-token", ""
	err := kubetest.Ready(kubetest.Context(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("Ready with a wrong token: %v, want HTTP 401", err)
	}
}

// TestNamespaceIsDeletedAtCleanup checks Namespace: a namespace with the
// prefix and the test label exists during the test and is being deleted
// (or gone) once the test's cleanup ran.
func TestNamespaceIsDeletedAtCleanup(t *testing.T) {
	cfg := kubetest.Config(t)
	core := corev1client.NewForConfigOrDie(cfg)
	ctx := kubetest.Context(t)
	var name string
	t.Run("inner", func(t *testing.T) {
		name = kubetest.Namespace(t, cfg, "kubetest-ns")
		ns, err := core.Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get namespace %s: %v", name, err)
		}
		if !strings.HasPrefix(name, "kubetest-ns-") || ns.Labels[kubetest.LabelTest] != "true" ||
			ns.Annotations[kubetest.AnnotationTest] != t.Name() || ns.DeletionTimestamp != nil {
			t.Errorf("namespace %s: labels %v, annotations %v, deleting %v", name, ns.Labels, ns.Annotations, ns.DeletionTimestamp)
		}
	})
	ns, err := core.Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatalf("get namespace %s after cleanup: %v", name, err)
	case ns.DeletionTimestamp == nil:
		t.Errorf("namespace %s is not being deleted after the test that made it ended (phase %s)", name, ns.Status.Phase)
	}
}

// TestGPUDeployment is what the bed is for: a Deployment whose pods each ask
// for 4 GPUs rolls out on the fake nodes; scaled past what the nodes hold,
// exactly the pods that fit run and the rest stay Pending because the
// scheduler finds "Insufficient nvidia.com/gpu"; deleted, its ReplicaSets
// and Pods are collected. It counts the cluster's GPUs, so it takes the bed
// to itself.
func TestGPUDeployment(t *testing.T) {
	const perPod = 4
	cfg := kubetest.ConfigExclusive(t)
	core := corev1client.NewForConfigOrDie(cfg)
	apps := appsv1client.NewForConfigOrDie(cfg)
	ctx := kubetest.Context(t)

	// How many 4-GPU pods fit: each Ready node holds allocatable/4. The default
	// bed has 2 nodes × 8 GPUs, so 2 × 2 = 4 pods fit and a 5th cannot.
	nodes, err := core.Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	fit := 0
	alloc := map[string]int64{}
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[gpu]
		alloc[n.Name] = q.Value()
		if ready(n.Status.Conditions) {
			fit += int(q.Value() / perPod)
		}
	}
	if fit < 2 {
		t.Fatalf("the bed's Ready nodes hold %d pods of %d GPUs (allocatable %v): this test needs at least 2", fit, perPod, alloc)
	}
	t.Logf("nodes (allocatable %s): %v; %d pods of %d GPUs fit", gpu, alloc, fit, perPod)
	waitNoGPUPods(t, core)

	ns := kubetest.Namespace(t, cfg, "kubetest-gpu")
	// The bed's apiserver limits every nvidia.com/ resource: a pod may ask
	// for GPUs only where a ResourceQuota names them. This one leaves room
	// for every GPU of the cluster, so the scheduler is what stops the
	// pods that do not fit.
	total := int64(0)
	for _, v := range alloc {
		total += v
	}
	if _, err := core.ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests." + gpu: *resource.NewQuantity(total+perPod, resource.DecimalSI)}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceQuota: %v", err)
	}
	labels := map[string]string{"app": "gpu-model"}
	res := corev1.ResourceList{gpu: *resource.NewQuantity(perPod, resource.DecimalSI)}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-model", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"nvidia.com/gpu.product": "H100"},
					Containers: []corev1.Container{{
						Name:      "server",
						Image:     "registry.invalid/strata/model-server:test", // kwok runs no container
						Resources: corev1.ResourceRequirements{Limits: res, Requests: res},
					}},
				},
			},
		},
	}
	start := time.Now()
	if _, err := apps.Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	waitRollout(t, apps, ns, dep.Name, 2)
	t.Logf("2 replicas rolled out in %s", time.Since(start).Round(time.Millisecond))

	// Scale through the scale subresource, as an autoscaler does.
	want := int32(fit + 1)
	scale, err := apps.Deployments(ns).GetScale(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	scale.Spec.Replicas = want
	if _, err := apps.Deployments(ns).UpdateScale(ctx, dep.Name, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale to %d: %v", want, err)
	}
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})
	var pods *corev1.PodList
	eventually(t, 60*time.Second, fmt.Sprintf("%d pods running and 1 pending for lack of GPUs", fit), func() (bool, string) {
		pods, err = core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		running, pending := countPods(pods.Items)
		return len(pods.Items) == int(want) && len(running) == fit && len(pending) == 1, describe(pods.Items)
	})
	t.Logf("scaled to %d: %s", want, describe(pods.Items))
	// The scheduler placed no more GPUs on a node than it has.
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			used[p.Spec.NodeName] += perPod
		}
	}
	for n, u := range used {
		if u > alloc[n] {
			t.Errorf("node %s: pods ask %d GPUs, it has %d", n, u, alloc[n])
		}
	}
	// The deployment controller reports it (its status follows the pods).
	eventually(t, 30*time.Second, fmt.Sprintf("deployment status %d available of %d", fit, want), func() (bool, string) {
		d, err := apps.Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := d.Status
		return s.Replicas == want && s.AvailableReplicas == int32(fit) && s.UnavailableReplicas == 1,
			fmt.Sprintf("replicas %d, available %d, unavailable %d", s.Replicas, s.AvailableReplicas, s.UnavailableReplicas)
	})

	start = time.Now()
	if err := apps.Deployments(ns).Delete(ctx, dep.Name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatalf("delete deployment: %v", err)
	}
	eventually(t, 60*time.Second, "the deployment, its ReplicaSets and Pods gone", func() (bool, string) {
		_, derr := apps.Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
		rs, err1 := apps.ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		ps, err2 := core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return apierrors.IsNotFound(derr) && len(rs.Items) == 0 && len(ps.Items) == 0,
			fmt.Sprintf("deployment: %v; %d ReplicaSets; pods: %s", derr, len(rs.Items), describe(ps.Items))
	})
	t.Logf("deleted with its ReplicaSets and Pods in %s", time.Since(start).Round(time.Millisecond))
}

// waitRollout waits for what `kubectl rollout status` waits for: the
// controller saw the latest spec, and every replica is updated and available.
func waitRollout(t *testing.T, apps *appsv1client.AppsV1Client, ns, name string, replicas int32) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("deployment %s rolled out with %d replicas", name, replicas), func() (bool, string) {
		d, err := apps.Deployments(ns).Get(kubetest.Context(t), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == replicas && s.Replicas == replicas &&
				s.AvailableReplicas == replicas,
			fmt.Sprintf("generation %d, observed %d, replicas %d, updated %d, available %d",
				d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas)
	})
}

// waitNoGPUPods waits until no pod on the cluster holds GPUs: pods of tests
// that ended go with their namespaces within seconds.
func waitNoGPUPods(t *testing.T, core *corev1client.CoreV1Client) {
	t.Helper()
	eventually(t, 90*time.Second, "no pod of another test holding GPUs", func() (bool, string) {
		pods, err := core.Pods("").List(kubetest.Context(t), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var holders []string
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, c := range p.Spec.Containers {
				if q, ok := c.Resources.Requests[gpu]; ok && !q.IsZero() {
					holders = append(holders, p.Namespace+"/"+p.Name)
					break
				}
			}
		}
		return len(holders) == 0, "still holding GPUs: " + strings.Join(holders, ", ") +
			" (a namespace left by a killed test run? delete it)"
	})
}

// countPods sorts pods into running (Running and Ready) and pending because
// the scheduler found too few GPUs.
func countPods(pods []corev1.Pod) (running, pending []string) {
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodRunning && podReady(p):
			running = append(running, p.Name)
		case p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "":
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse &&
					c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, "Insufficient nvidia.com/gpu") {
					pending = append(pending, p.Name)
				}
			}
		}
	}
	return running, pending
}

func describe(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		s := fmt.Sprintf("%s %s node=%q", p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				s += fmt.Sprintf(" unschedulable=%q", c.Message)
			}
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return fmt.Sprintf("%d pods [%s]", len(pods), strings.Join(out, "; "))
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func ready(cs []corev1.NodeCondition) bool {
	for _, c := range cs {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// eventually polls cond every 100 ms until it holds, or fails the test
// with the last state cond described.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(timeout)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(end) {
			t.Fatalf("not %s after %s; last seen: %s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// TestBedEnforcesQuotas: the bed's apiserver runs the ResourceQuota
// admission with every nvidia.com/ resource limited, so a pod that asks
// for one in a namespace whose quota does not name it is refused, and
// one over a quota that names it too; kwok-gpu-1 advertises MIG slices
// (mixed strategy) and kwok-gpu-2 shared GPUs, as the device plugin does.
func TestBedEnforcesQuotas(t *testing.T) {
	cfg := kubetest.Config(t)
	core := corev1client.NewForConfigOrDie(cfg)
	ctx := kubetest.Context(t)
	for node, want := range map[string][]corev1.ResourceName{
		"kwok-gpu-1": {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"},
		"kwok-gpu-2": {"nvidia.com/gpu.shared", "nvidia.com/gpu.mps"},
	} {
		n, err := core.Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", node, err)
		}
		for _, r := range want {
			if q := n.Status.Allocatable[r]; q.Value() < 1 {
				t.Errorf("node %s has no %s (allocatable %v)", node, r, n.Status.Allocatable)
			}
		}
	}
	ns := kubetest.Namespace(t, cfg, "kubetest-quota")
	if _, err := core.ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("1")}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, r corev1.ResourceName, n int64) error {
		res := corev1.ResourceList{r: *resource.NewQuantity(n, resource.DecimalSI)}
		_, err := core.Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}},
			metav1.CreateOptions{})
		return err
	}
	for name, tc := range map[string]struct {
		resource corev1.ResourceName
		n        int64
		want     string
	}{
		"a resource the quota does not name": {"nvidia.com/mig-1g.10gb", 1, "insufficient quota to consume: requests.nvidia.com/mig-1g.10gb"},
		"over the quota":                     {"nvidia.com/gpu", 2, "exceeded quota: q"},
	} {
		err := pod("p-"+strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), "a-", ""), tc.resource, tc.n)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want forbidden: %s", name, err, tc.want)
		}
	}
	// The quota controller keeps the quota's usage, which admission needs
	// to admit a pod within it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := pod("within", "nvidia.com/gpu", 1)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pod within the quota: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
