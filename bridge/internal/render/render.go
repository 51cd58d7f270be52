// Package render is the bridge's pure core: from a finished job's serve
// spec, the tenant's serving quota, a runtime template and the site's
// mount, it renders the Kubernetes objects of one model deployment, in
// apply order. It takes no clock, no network and no file system (only
// LoadRuntime reads a template), so the same input gives the same objects,
// byte for byte.
//
// The objects are the tenant's Namespace and ResourceQuota (shared by all
// its deployments), then the model's Deployment, Service,
// HorizontalPodAutoscaler (when it autoscales) and PodDisruptionBudget
// (when it can run more than one replica); or, in KServe mode, an
// InferenceService in place of Deployment, Service and autoscaler. Objects
// are built as k8s.io/api types and converted, so a misspelt field does
// not compile; the InferenceService, whose Go types KServe does not
// publish in a form this module can import, is built from a typed PodSpec
// plus KServe's own field names.
//
// The model is mounted read-only at /model and never copied: a hostPath
// or NFS volume of the model's own path (mapped from the Slurm side's
// root to the node's or the server's), or the tenant's PVC with the model
// as subPath.
package render

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/servingquota"
)

// Labels every object carries (the tenant's Namespace and ResourceQuota
// only the first two: they belong to no one model).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelTenant    = "strata.io/tenant"
	LabelName      = "app.kubernetes.io/name"
	LabelProject   = "strata.io/project"
	LabelModel     = "strata.io/model"
	LabelVersion   = "strata.io/version"
	LabelSlurmJob  = "strata.io/slurm-job"
	// ManagedBy is the value of LabelManagedBy: what delete and prune
	// may touch.
	ManagedBy = "strata"
)

// Annotations of the model's objects: where the version came from.
const (
	AnnotationModelPath    = "strata.io/model-path"
	AnnotationSlurmUser    = "strata.io/slurm-user"
	AnnotationSlurmAccount = "strata.io/slurm-account"
	AnnotationRuntime      = "strata.io/runtime"
)

// Names and paths inside the objects.
const (
	// ModelMountPath is where the model is in the container:
	// {{.ModelPath}}.
	ModelMountPath = "/model"
	// QuotaName is the tenant namespace's ResourceQuota.
	QuotaName = "strata-serving"
	// ContainerName is the model server's container (KServe names its
	// own "kserve-container").
	ContainerName       = "server"
	kserveContainerName = "kserve-container"
	portName            = "http"
	modelVolumeName     = "model"
	shmVolume           = "dshm"
	// GPUResource is the extended resource of NVIDIA's device plugin.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// Input is everything one deployment is rendered from.
type Input struct {
	Spec      servespec.Spec
	JobID     int64 // the Slurm job that produced the model
	User      string
	Account   string
	Tenant    string
	Project   string // "" for the tenant's own account
	Namespace string
	// Quota is the tenant's serving quota, for the namespace's
	// ResourceQuota.
	Quota servingquota.Tenant
	// Runtime is LoadRuntime(dir, Spec.Runtime).
	Runtime Runtime
	Mount   config.Mount
	// KServe renders an InferenceService instead of Deployment, Service
	// and HorizontalPodAutoscaler.
	KServe bool
	// KServeDeploymentMode is config.KServeStandard (the default) or
	// config.KServeRawDeployment.
	KServeDeploymentMode string
	// SpreadKey is the node label replicas spread across; "" spreads
	// nothing.
	SpreadKey string
	// Surge rolls out with one surge replica (maxSurge 1, maxUnavailable
	// 0), for a deployment whose tenant's quota has room for it (see
	// deploy); false replaces one replica at a time without one.
	Surge bool
}

// Version is the version label of a deployment: "job-<id>".
func Version(jobID int64) string { return "job-" + strconv.FormatInt(jobID, 10) }

// GPUs is the nvidia.com/gpu per replica of a spec run with rt: the
// spec's, or the runtime's default.
func GPUs(s *servespec.Spec, rt Runtime) int {
	if s.GPUs > 0 {
		return s.GPUs
	}
	return rt.GPUs
}

// Tier is the GPU sharing tier of a spec run with rt: the spec's, the
// runtime's, or dedicated.
func Tier(s *servespec.Spec, rt Runtime) string {
	switch {
	case s.Tier != "":
		return s.Tier
	case rt.Tier != "":
		return rt.Tier
	}
	return servingquota.TierDedicated
}

// Selector is the pod selector of a model's Deployment, Service and
// PodDisruptionBudget. It holds only what never changes for a name
// (a Deployment's selector is immutable); the version labels are on the
// pods besides.
func Selector(name string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelName: name}
}

// Labels returns the labels of a model's objects and pods.
func Labels(in *Input) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelName:      in.Spec.Name,
		LabelTenant:    in.Tenant,
		LabelProject:   in.Project,
		LabelModel:     in.Spec.Name,
		LabelVersion:   Version(in.JobID),
		LabelSlurmJob:  strconv.FormatInt(in.JobID, 10),
	}
}

// TenantLabels returns the labels of the tenant's Namespace and
// ResourceQuota.
func TenantLabels(tenant string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelTenant: tenant}
}

// Render returns the objects of one deployment in apply order:
// Namespace, ResourceQuota, then Deployment, Service,
// HorizontalPodAutoscaler (when autoscaling), PodDisruptionBudget (when
// it can run more than one replica) — or, with KServe, an
// InferenceService (serving.kserve.io/v1beta1) instead of
// Deployment/Service/HorizontalPodAutoscaler. No clock, no network.
func Render(in Input) ([]*unstructured.Unstructured, error) {
	if err := check(&in); err != nil {
		return nil, err
	}
	vol, mount, err := modelVolume(&in)
	if err != nil {
		return nil, err
	}
	pod, err := podSpec(&in, vol, mount)
	if err != nil {
		return nil, err
	}
	objs := []any{namespace(&in), quota(&in)}
	if GPUs(&in.Spec, in.Runtime) > 0 {
		pc, _ := servingquota.PriorityClassOf(Tier(&in.Spec, in.Runtime)) // check made sure
		objs = append([]any{priorityClass(pc)}, objs...)
	}
	if in.KServe {
		isvc, err := inferenceService(&in, pod)
		if err != nil {
			return nil, err
		}
		objs = append(objs, isvc)
	} else {
		objs = append(objs, deployment(&in, pod), service(&in))
		if in.Spec.Autoscale != nil {
			objs = append(objs, hpa(&in))
		}
	}
	if in.Spec.MaxReplicas() > 1 {
		objs = append(objs, pdb(&in))
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := toUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// check refuses an input the objects could not be right for.
func check(in *Input) error {
	s := &in.Spec
	if err := s.Validate().Err(); err != nil {
		return fmt.Errorf("serve spec %s:\n%w", s.Name, err)
	}
	rt := &in.Runtime
	switch {
	case rt.Name == "":
		return fmt.Errorf("serve spec %s: no runtime template (load one with LoadRuntime)", s.Name)
	case s.Runtime != "" && s.Runtime != rt.Name:
		return fmt.Errorf("serve spec %s asks for runtime %q, and the template given is %q", s.Name, s.Runtime, rt.Name)
	case s.Image == "" && rt.Image == "":
		return fmt.Errorf("serve spec %s: runtime %s has no image (hint: give image: in %s)", s.Name, rt.Name, servespec.FileName)
	}
	if err := rt.Validate().Err(); err != nil {
		return fmt.Errorf("runtime %s:\n%w", rt.Name, err)
	}
	if in.JobID <= 0 {
		return fmt.Errorf("serve spec %s: job id %d: want the Slurm job that produced the model", s.Name, in.JobID)
	}
	if msgs := validation.IsDNS1123Label(in.Namespace); len(msgs) > 0 {
		return fmt.Errorf("namespace %q is not a namespace name: %s", in.Namespace, strings.Join(msgs, "; "))
	}
	if in.Quota.Namespace != "" && in.Quota.Namespace != in.Namespace {
		return fmt.Errorf("namespace %q is not the quota's (tenant %s, namespace %s)", in.Namespace, in.Quota.Name, in.Quota.Namespace)
	}
	if err := servingquota.CheckTier(Tier(s, *rt)); err != nil {
		return fmt.Errorf("serve spec %s: %w", s.Name, err)
	}
	if in.Quota.Name != "" && in.Quota.Name != in.Tenant {
		return fmt.Errorf("tenant %q is given the quota of tenant %q", in.Tenant, in.Quota.Name)
	}
	if in.Tenant == "" {
		return fmt.Errorf("serve spec %s: no tenant", s.Name)
	}
	for _, l := range [][2]string{{LabelTenant, in.Tenant}, {LabelProject, in.Project}} {
		if msgs := validation.IsValidLabelValue(l[1]); len(msgs) > 0 {
			return fmt.Errorf("%s %q cannot be a label value: %s", l[0], l[1], strings.Join(msgs, "; "))
		}
	}
	if in.SpreadKey != "" {
		if msgs := validation.IsQualifiedName(in.SpreadKey); len(msgs) > 0 {
			return fmt.Errorf("spread key %q is not a label key: %s", in.SpreadKey, strings.Join(msgs, "; "))
		}
	}
	switch in.KServeDeploymentMode {
	case "", config.KServeStandard, config.KServeRawDeployment:
	default:
		return fmt.Errorf("KServe deployment mode %q: want %s or %s", in.KServeDeploymentMode, config.KServeStandard, config.KServeRawDeployment)
	}
	return nil
}

// modelVolume maps the model's Slurm-side path to a read-only volume and
// its mount at /model.
func modelVolume(in *Input) (corev1.Volume, corev1.VolumeMount, error) {
	m, model := in.Mount, in.Spec.ModelPath
	mount := corev1.VolumeMount{Name: modelVolumeName, MountPath: ModelMountPath, ReadOnly: true}
	vol := corev1.Volume{Name: modelVolumeName}
	root := strings.TrimSuffix(m.Root, "/")
	if m.Root == "" || !path.IsAbs(m.Root) {
		return vol, mount, fmt.Errorf("mount root %q is not an absolute path", m.Root)
	}
	rel, under := strings.CutPrefix(model, root+"/")
	if !under || rel == "" {
		return vol, mount, fmt.Errorf("model %s is outside the shared file system's root %s: pods cannot reach it "+
			"(hint: save the model under %s, or add its file system to models.mount in the bridge's config)", model, m.Root, m.Root)
	}
	switch m.Kind {
	case config.MountHostPath:
		vol.HostPath = &corev1.HostPathVolumeSource{Path: path.Join(m.Path, rel)}
	case config.MountNFS:
		vol.NFS = &corev1.NFSVolumeSource{Server: m.Server, Path: path.Join(m.Path, rel), ReadOnly: true}
	case config.MountPVC:
		vol.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.ClaimName, ReadOnly: true}
		mount.SubPath = rel
	default:
		return vol, mount, fmt.Errorf("mount kind %q: want hostPath, nfs or pvc", m.Kind)
	}
	return vol, mount, nil
}

// podSpec is the model server's pod, shared by the Deployment and the
// InferenceService.
func podSpec(in *Input, vol corev1.Volume, mount corev1.VolumeMount) (corev1.PodSpec, error) {
	s, rt := &in.Spec, &in.Runtime
	gpus := GPUs(s, *rt)
	vars := servespec.Vars{ModelPath: ModelMountPath, Name: s.Name, Version: Version(in.JobID), Port: rt.Port, GPUs: gpus}
	var err error
	expand := func(list ...string) []string {
		var out []string
		for _, a := range list {
			v, e := servespec.Expand(a, vars)
			if e != nil && err == nil {
				err = e
			}
			out = append(out, v)
		}
		return out
	}
	command := expand(rt.Command...)
	var args []string
	if rt.ModelArg != "" {
		args = expand(rt.ModelArg)
	}
	args = append(args, expand(rt.Args...)...)
	args = append(args, expand(s.Args...)...)
	env := maps.Clone(rt.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, s.Env)
	var envVars []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envVars = append(envVars, corev1.EnvVar{Name: k, Value: expand(env[k])[0]})
	}
	if err != nil {
		return corev1.PodSpec{}, fmt.Errorf("serve spec %s with runtime %s: %w", s.Name, rt.Name, err)
	}

	res := corev1.ResourceList{}
	tier := Tier(s, *rt)
	if gpus > 0 {
		res[corev1.ResourceName(servingquota.Resource(tier))] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	if s.CPU != "" {
		res[corev1.ResourceCPU] = resource.MustParse(s.CPU) // Validate parsed it
	}
	if s.Memory != "" {
		res[corev1.ResourceMemory] = resource.MustParse(s.Memory)
	}
	image := rt.Image
	if s.Image != "" {
		image = s.Image
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(portName)}},
			PeriodSeconds:    period,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	c := corev1.Container{
		Name:           ContainerName,
		Image:          image,
		Command:        command,
		Args:           args,
		Env:            envVars,
		Ports:          []corev1.ContainerPort{{Name: portName, ContainerPort: int32(rt.Port), Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: probe(rt.ReadinessPath, 10, 3),
		LivenessProbe:  probe(rt.LivenessPath, 20, 3),
		VolumeMounts:   []corev1.VolumeMount{mount},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
		},
	}
	if len(res) > 0 {
		// Requests equal limits: a GPU must, and for CPU and memory it
		// gives the server the Guaranteed QoS class.
		c.Resources = corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}
	}
	if rt.StartupTimeout > 0 {
		// Until the first success the liveness probe does not run; the
		// server has StartupTimeout to load its weights.
		const period = 10
		c.StartupProbe = probe(rt.LivenessPath, period, int32((rt.StartupTimeout.Seconds()+period-1)/period))
	}
	pod := corev1.PodSpec{
		Containers: []corev1.Container{c},
		Volumes:    []corev1.Volume{vol},
		// Service links would put <SERVICE>_PORT variables into the
		// environment; vLLM reads VLLM_PORT, which a Service named vllm
		// would set to tcp://...
		EnableServiceLinks: ptr(false),
		// A model server needs no access to the Kubernetes API.
		AutomountServiceAccountToken: ptr(false),
	}
	if rt.ShmSize != "" {
		size := resource.MustParse(rt.ShmSize)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}})
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: shmVolume, MountPath: "/dev/shm"})
	}
	if gpus > 0 {
		pc, _ := servingquota.PriorityClassOf(tier)
		pod.PriorityClassName = pc.Name
		// GPU nodes are often tainted so that only GPU pods land there.
		pod.Tolerations = []corev1.Toleration{{Key: string(GPUResource), Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule}}
	}
	if in.SpreadKey != "" {
		pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       in.SpreadKey,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: Selector(s.Name)},
			// Spread each rollout's pods on their own, not together with
			// the old version's that are going away.
			MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey},
		}}
	}
	return pod, nil
}

// meta is the metadata of a model's object.
func meta(in *Input) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: in.Spec.Name, Namespace: in.Namespace, Labels: Labels(in)}
}

// annotations say where the version came from.
func annotations(in *Input) map[string]string {
	return map[string]string{
		AnnotationModelPath:    in.Spec.ModelPath,
		AnnotationSlurmUser:    in.User,
		AnnotationSlurmAccount: in.Account,
		AnnotationRuntime:      in.Runtime.Name,
	}
}

func namespace(in *Input) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Namespace, Labels: TenantLabels(in.Tenant)},
	}
}

// quota is the tenant's serving quota as a ResourceQuota, the same as
// strata-policy render writes: whole GPUs, each sharing tier's resource,
// and pods. Extended resources take a quota on requests only. Every pod of
// the namespace is a model server replica, so "pods" is the replica quota.
func quota(in *Input) *corev1.ResourceQuota {
	hard := corev1.ResourceList{
		corev1.DefaultResourceRequestsPrefix + GPUResource: *resource.NewQuantity(int64(in.Quota.GPUs), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(int64(in.Quota.Replicas), resource.DecimalSI),
	}
	for _, t := range in.Quota.Tiers {
		hard[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+t.Resource)] = *resource.NewQuantity(int64(t.Quota), resource.DecimalSI)
	}
	return &corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: QuotaName, Namespace: in.Namespace, Labels: TenantLabels(in.Tenant)},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
}

// priorityClass is the PriorityClass of a tier's replicas, as strata-policy
// render writes it; like the Namespace it belongs to no one model.
// preemptionPolicy Never: the value orders the scheduler's queue, and no
// model server evicts another tenant's.
func priorityClass(pc servingquota.PriorityClass) *schedulingv1.PriorityClass {
	never := corev1.PreemptNever
	return &schedulingv1.PriorityClass{
		TypeMeta:         metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
		ObjectMeta:       metav1.ObjectMeta{Name: pc.Name, Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Value:            pc.Value,
		PreemptionPolicy: &never,
		Description:      pc.Description,
	}
}

// strategy rolls out with one surge replica when the tenant's quota has
// room for it (the new version starts before an old replica stops, so a
// one-replica model stays up); else it replaces one pod at a time without
// a surge pod, which could not start, and a one-replica model is
// unavailable while its new version loads.
func strategy(surge bool) appsv1.DeploymentStrategy {
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	if surge {
		return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}}
	}
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one}}
}

func deployment(in *Input, pod corev1.PodSpec) *appsv1.Deployment {
	m := meta(in)
	m.Annotations = annotations(in)
	st := strategy(in.Surge)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: m,
		Spec: appsv1.DeploymentSpec{
			// With an autoscaler, the minimum: each new version starts
			// there and the autoscaler takes it up.
			Replicas: ptr(int32(in.Spec.MinReplicas())),
			Selector: &metav1.LabelSelector{MatchLabels: Selector(in.Spec.Name)},
			Strategy: st,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: Labels(in)},
				Spec:       pod,
			},
		},
	}
}

func service(in *Input) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(in),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: Selector(in.Spec.Name),
			Ports: []corev1.ServicePort{{Name: portName, Port: int32(in.Runtime.Port), TargetPort: intstr.FromString(portName),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

func hpa(in *Input) *autoscalingv2.HorizontalPodAutoscaler {
	a := in.Spec.Autoscale
	target := a.TargetCPUPercent
	if target == 0 {
		target = servespec.DefaultTargetCPUPercent
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: meta(in),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: in.Spec.Name},
			MinReplicas:    ptr(int32(a.MinReplicas)),
			MaxReplicas:    int32(a.MaxReplicas),
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(target))}},
			}},
		},
	}
}

// pdb lets a drain take one replica at a time. A pod that is not ready
// (still loading, or crashing) may always be evicted, so a broken model
// never blocks a node's maintenance.
func pdb(in *Input) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	always := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(in),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &one,
			Selector:                   &metav1.LabelSelector{MatchLabels: Selector(in.Spec.Name)},
			UnhealthyPodEvictionPolicy: &always,
		},
	}
}

func ptr[T any](v T) *T { return &v }

// toUnstructured converts a typed object, or passes an unstructured one
// through, and drops what a typed object carries that a client must not
// send: an empty status and null creation timestamps.
func toUnstructured(o any) (*unstructured.Unstructured, error) {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", o, err)
	}
	delete(m, "status")
	dropNullTimestamps(m)
	return &unstructured.Unstructured{Object: m}, nil
}

func dropNullTimestamps(v any) {
	switch v := v.(type) {
	case map[string]any:
		if ts, ok := v["creationTimestamp"]; ok && ts == nil {
			delete(v, "creationTimestamp")
		}
		for _, c := range v {
			dropNullTimestamps(c)
		}
	case []any:
		for _, c := range v {
			dropNullTimestamps(c)
		}
	}
}
