package deploy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-hpc/strata/bridge/internal/render"
)

// Rollout is where a workload's rollout stands.
type Rollout struct {
	Done    bool
	Failed  bool // it will not finish by itself (progress deadline exceeded)
	Message string
}

// RolloutStatus reads a workload as the apiserver returned it: a
// Deployment is rolled out when the controller has seen its latest spec
// (observedGeneration), every replica runs the new template (updated),
// no old replica is left, and every one is available; an
// InferenceService when its Ready condition is True for its generation.
// Other kinds have no rollout and are done at once.
func RolloutStatus(obj *unstructured.Unstructured) Rollout {
	switch obj.GetKind() {
	case "Deployment":
		return deploymentStatus(obj)
	case "InferenceService":
		return conditionStatus(obj, "Ready")
	}
	return Rollout{Done: true, Message: obj.GetKind() + " has no rollout"}
}

func deploymentStatus(obj *unstructured.Unstructured) Rollout {
	gen := obj.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if observed < gen {
		return Rollout{Message: fmt.Sprintf("waiting for the controller to see generation %d (it has seen %d)", gen, observed)}
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Progressing" && m["reason"] == "ProgressDeadlineExceeded" {
			msg, _ := m["message"].(string)
			return Rollout{Failed: true, Message: "progress deadline exceeded: " + msg + refusedText(conds)}
		}
	}
	if r := refusedText(conds); r != "" {
		// Not a failure yet: a pod refused for quota is created once the
		// old version's pods are gone and the quota controller has seen
		// it; said, so that a rollout that times out says why.
		return Rollout{Message: strings.TrimPrefix(r, "; ")}
	}
	want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	replicas, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas")
	updated, _, _ := unstructured.NestedInt64(obj.Object, "status", "updatedReplicas")
	available, _, _ := unstructured.NestedInt64(obj.Object, "status", "availableReplicas")
	switch {
	case updated < want:
		return Rollout{Message: fmt.Sprintf("%d of %d replicas updated", updated, want)}
	case replicas > updated:
		return Rollout{Message: fmt.Sprintf("%d old replicas pending termination", replicas-updated)}
	case available < updated:
		return Rollout{Message: fmt.Sprintf("%d of %d updated replicas available", available, updated)}
	}
	return Rollout{Done: true, Message: fmt.Sprintf("%d of %d replicas updated and available", available, want)}
}

func conditionStatus(obj *unstructured.Unstructured, condType string) Rollout {
	if observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); found && observed < obj.GetGeneration() {
		return Rollout{Message: fmt.Sprintf("waiting for the controller to see generation %d (it has seen %d)", obj.GetGeneration(), observed)}
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != condType {
			continue
		}
		msg, _ := m["message"].(string)
		if m["status"] == "True" {
			return Rollout{Done: true, Message: obj.GetKind() + " is " + condType}
		}
		return Rollout{Message: fmt.Sprintf("%s is not %s: %s", obj.GetKind(), condType, msg)}
	}
	return Rollout{Message: fmt.Sprintf("%s has no %s condition yet", obj.GetKind(), condType)}
}

// refusedText says in words why the ReplicaSet cannot create pods, from
// the Deployment's ReplicaFailure condition (the apiserver's refusal, such
// as a ResourceQuota exceeded), or "" when it can.
func refusedText(conds []any) string {
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "ReplicaFailure" || m["status"] != "True" {
			continue
		}
		msg, _ := m["message"].(string)
		if strings.Contains(msg, "exceeded quota") {
			return "; the apiserver refuses the new version's pods: the tenant's serving quota (ResourceQuota " + render.QuotaName +
				") has no room for them: " + msg
		}
		return "; the apiserver refuses the new version's pods: " + msg
	}
	return ""
}
