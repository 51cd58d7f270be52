package render

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// isvcMirror mirrors the part of KServe's InferenceService
// (serving.kserve.io/v1beta1) that the bridge writes, with KServe's JSON
// names: in github.com/kserve/kserve pkg/apis/serving/v1beta1, PredictorSpec
// inlines a PodSpec (volumes, containers, tolerations,
// topologySpreadConstraints, ...) and a ComponentExtensionSpec
// (minReplicas, maxReplicas, scaleTarget, scaleMetric, labels,
// annotations, deploymentStrategy). KServe's module cannot be imported
// here, so the test holds the few fields it needs.
type isvcMirror struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Predictor predictorMirror `json:"predictor"`
	} `json:"spec"`
}

type predictorMirror struct {
	corev1.PodSpec     `json:",inline"`
	MinReplicas        *int                       `json:"minReplicas,omitempty"`
	MaxReplicas        int                        `json:"maxReplicas,omitempty"`
	ScaleTarget        *int                       `json:"scaleTarget,omitempty"`
	ScaleMetric        *string                    `json:"scaleMetric,omitempty"`
	Labels             map[string]string          `json:"labels,omitempty"`
	Annotations        map[string]string          `json:"annotations,omitempty"`
	DeploymentStrategy *appsv1.DeploymentStrategy `json:"deploymentStrategy,omitempty"`
}

// typedFor returns an empty typed object for an apiVersion and kind.
func typedFor(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}, nil
	case "v1/ResourceQuota":
		return &corev1.ResourceQuota{}, nil
	case "scheduling.k8s.io/v1/PriorityClass":
		return &schedulingv1.PriorityClass{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case KServeAPIVersion + "/" + KServeKind:
		return &isvcMirror{}, nil
	}
	return nil, fmt.Errorf("no type for %s %s", apiVersion, kind)
}

// decodeStrict decodes an object read from YAML into its typed struct,
// refusing unknown fields, and checks that the typed struct converts back
// to the same JSON (so nothing was dropped or reinterpreted).
func decodeStrict(o map[string]any) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	// Through JSON, as the apiserver reads it: numbers become int64.
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(data); err != nil {
		return err
	}
	typed, err := typedFor(u.GetAPIVersion(), u.GetKind())
	if err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, typed, true); err != nil {
		return fmt.Errorf("strict decoding: %w", err)
	}
	back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return err
	}
	delete(back, "status")
	dropNullTimestamps(back)
	again, err := json.Marshal(back)
	if err != nil {
		return err
	}
	if !bytes.Equal(data, again) {
		return fmt.Errorf("the typed object converts back differently:\nread:  %s\nagain: %s", data, again)
	}
	return nil
}
