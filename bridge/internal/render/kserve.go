package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
)

// KServe's group, version and annotations.
const (
	KServeAPIVersion         = "serving.kserve.io/v1beta1"
	KServeKind               = "InferenceService"
	kserveDeploymentModeKey  = "serving.kserve.io/deploymentMode"
	kserveAutoscalerClassKey = "serving.kserve.io/autoscalerClass"
	kserveAutoscalerHPA      = "hpa"
	kserveAutoscalerNone     = "none"
	kserveScaleMetricCPU     = "cpu"
)

// inferenceService renders the model as a KServe InferenceService whose
// predictor is the same pod as the Deployment's: a custom container
// (KServe's "kserve-container") with the model volume at /model.
//
// It does not use predictor.model with a storageUri, for three reasons:
// a storageUri cannot say hostPath or NFS (only pvc://), so the three
// mounts would render two different servers; the serve spec's image, args
// and env and the runtime's probes would not apply to KServe's own
// ServingRuntime; and the cluster would need a ServingRuntime for each
// model format. KServe still makes the Deployment, Service and autoscaler.
//
// The deployment mode is Standard (or RawDeployment): never Knative, which
// refuses hostPath and NFS volumes. Without autoscaling the autoscaler
// class is "none" and min = max = replicas; with it, "hpa" on CPU.
func inferenceService(in *Input, pod corev1.PodSpec) (*unstructured.Unstructured, error) {
	pod = *pod.DeepCopy()
	pod.Containers[0].Name = kserveContainerName
	predictor, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		return nil, fmt.Errorf("convert the predictor's pod: %w", err)
	}
	mode := in.KServeDeploymentMode
	if mode == "" {
		mode = config.KServeStandard
	}
	ann := annotations(in)
	ann[kserveDeploymentModeKey] = mode
	s := &in.Spec
	if a := s.Autoscale; a != nil {
		target := a.TargetCPUPercent
		if target == 0 {
			target = servespec.DefaultTargetCPUPercent
		}
		ann[kserveAutoscalerClassKey] = kserveAutoscalerHPA
		predictor["scaleMetric"] = kserveScaleMetricCPU
		predictor["scaleTarget"] = int64(target)
	} else {
		ann[kserveAutoscalerClassKey] = kserveAutoscalerNone
	}
	predictor["minReplicas"] = int64(s.MinReplicas())
	predictor["maxReplicas"] = int64(s.MaxReplicas())
	// predictor.labels go on the pods, so that the PodDisruptionBudget
	// and the spread constraint find them by the same selector.
	predictor["labels"] = stringMap(Labels(in))
	if mode == config.KServeStandard {
		// KServe had deploymentStrategy before it renamed RawDeployment
		// to Standard; a release that knows only RawDeployment may not
		// have the field, so it is left out there.
		st := strategy(in.Surge)
		sm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			return nil, fmt.Errorf("convert the deployment strategy: %w", err)
		}
		predictor["deploymentStrategy"] = sm
	}
	m := meta(in)
	m.Annotations = ann
	mm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m)
	if err != nil {
		return nil, fmt.Errorf("convert metadata: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KServeAPIVersion,
		"kind":       KServeKind,
		"metadata":   mm,
		"spec":       map[string]any{"predictor": predictor},
	}}
	dropNullTimestamps(u.Object)
	return u, nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
