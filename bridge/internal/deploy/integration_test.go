//go:build integration

package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/render"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// runtimes are the templates the bridge ships.
const runtimes = "../../../etc/strata/bridge/runtimes"

// bed is one test's world: a fresh namespace as the tenant's, a shared
// file system in a temporary folder (the same paths on the Slurm side and
// here), a store, and a deployer over the real apiserver.
type bed struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	shared  string // the shared file system's root, and the allowed root
	store   *store.Store
	dep     *deploy.Deployer
	reg     *prometheus.Registry
	apps    *appsv1client.AppsV1Client
	core    *corev1client.CoreV1Client
	policy  *policyv1client.PolicyV1Client
	rc      *rest.Config
	serving *servingquota.File
	// depConfig is dep's configuration, for a test that needs another.
	depConfig deploy.Config
}

func newBed(t *testing.T, gpus, replicas int, timeout time.Duration) *bed {
	t.Helper()
	rc := kubetest.Config(t)
	b := &bed{t: t, ctx: kubetest.Context(t), rc: rc, ns: kubetest.Namespace(t, rc, "bridge"), shared: t.TempDir(), reg: prometheus.NewRegistry()}
	var err error
	if b.store, err = store.Open(b.ctx, filepath.Join(t.TempDir(), "bridge.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.store.Close() })
	b.serving = &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{
		{Name: "acme", Namespace: b.ns, GPUs: gpus, Replicas: replicas, Projects: []servingquota.Project{{Name: "llm", Account: "acme-llm"}}}}}
	kube, err := deploy.NewKube(rc, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	b.depConfig = deploy.Config{Kube: kube, Store: b.store, Serving: func() *servingquota.File { return b.serving },
		AllowedRoots: []string{b.shared}, Mount: config.Mount{Kind: config.MountHostPath, Root: b.shared, Path: "/srv/shared"},
		RuntimesDir: runtimes, Defaults: servespec.Defaults{Runtime: "vllm", Replicas: 1}, SpreadKey: "kubernetes.io/hostname",
		RolloutTimeout: timeout, RolloutPoll: 200 * time.Millisecond,
		Log:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Metrics: deploy.NewMetrics(b.reg)}
	b.dep, err = deploy.New(b.depConfig)
	if err != nil {
		t.Fatal(err)
	}
	b.apps = appsv1client.NewForConfigOrDie(rc)
	b.core = corev1client.NewForConfigOrDie(rc)
	b.policy = policyv1client.NewForConfigOrDie(rc)
	return b
}

// job makes a completed job whose working directory holds a model file
// and strata-serve.yaml with the given extra lines.
func (b *bed) job(id int64, name, extra string) slurmrest.Job {
	b.t.Helper()
	dir := filepath.Join(b.shared, fmt.Sprintf("job-%d", id))
	if err := os.MkdirAll(filepath.Join(dir, "model"), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model", "weights.bin"), []byte("weights of job "+fmt.Sprint(id)), 0o644); err != nil {
		b.t.Fatal(err)
	}
	spec := fmt.Sprintf("name: %s\nmodel: %s\nruntime: vllm\n%s", name, filepath.Join(dir, "model"), extra)
	if err := os.WriteFile(filepath.Join(dir, servespec.FileName), []byte(spec), 0o644); err != nil {
		b.t.Fatal(err)
	}
	return slurmrest.Job{ID: id, State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", User: "alice", UserID: int64(os.Getuid()), WorkDir: dir}
}

func (b *bed) deployment(name string) *appsv1.Deployment {
	b.t.Helper()
	d, err := b.apps.Deployments(b.ns).Get(b.ctx, name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatalf("get Deployment %s: %v", name, err)
	}
	return d
}

// modelPath is the hostPath the Deployment's pods mount at /model.
func modelPath(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	t.Fatalf("Deployment %s mounts no hostPath: %+v", d.Name, d.Spec.Template.Spec.Volumes)
	return ""
}

func (b *bed) deploy(j slurmrest.Job, dry bool) *deploy.Result {
	b.t.Helper()
	res, err := b.dep.Deploy(b.ctx, j, deploy.Options{DryRun: dry, Reason: "test"})
	if err != nil {
		b.t.Fatalf("deploy job %d: %v", j.ID, err)
	}
	return res
}

func actions(res *deploy.Result) string {
	var s []string
	for _, o := range res.Objects {
		s = append(s, o.Kind+":"+o.Action)
	}
	return strings.Join(s, " ")
}

// The life of a deployment on a real apiserver: the first deploy creates
// the objects and rolls out; the same version again changes nothing (the
// Deployment keeps its generation and resourceVersion); a new version
// updates the same Deployment (new generation, new model mount, new
// version label); rollback restores the old one; a dry run changes
// nothing. The store follows each step.
func TestDeployVersionsAndRollback(t *testing.T) {
	b := newBed(t, 4, 4, 2*time.Minute)
	v1, v2 := b.job(1001, "llama", "gpus: 1\n"), b.job(1002, "llama", "gpus: 1\n")
	wantV1 := filepath.Join("/srv/shared", "job-1001", "model")
	wantV2 := filepath.Join("/srv/shared", "job-1002", "model")

	res := b.deploy(v1, false)
	if res.Outcome != store.OutcomeReady || !res.Changed {
		t.Fatalf("first deploy: %s changed=%v: %s", res.Outcome, res.Changed, res.Message)
	}
	// The dedicated tier's PriorityClass is the cluster's: created by the
	// first test on the bed that needs it.
	if got := strings.TrimPrefix(strings.TrimPrefix(actions(res), "PriorityClass:created "), "PriorityClass:unchanged "); got != "Namespace:configured ResourceQuota:created Deployment:created Service:created" {
		t.Errorf("first deploy did %s", got)
	}
	d1 := b.deployment("llama")
	if got := modelPath(t, d1); got != wantV1 {
		t.Errorf("model mounted from %s, want %s", got, wantV1)
	}
	if d1.Spec.Template.Labels[render.LabelVersion] != "job-1001" || d1.Status.AvailableReplicas != 1 {
		t.Errorf("Deployment: version %q, %d available; want job-1001 and 1", d1.Spec.Template.Labels[render.LabelVersion], d1.Status.AvailableReplicas)
	}
	if _, err := b.core.Services(b.ns).Get(b.ctx, "llama", metav1.GetOptions{}); err != nil {
		t.Errorf("Service: %v", err)
	}
	if fm := d1.ManagedFields; len(fm) == 0 || fm[0].Manager != "strata-bridge" || fm[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("managedFields[0] = %+v, want an Apply by strata-bridge", fm)
	}

	// The same version again.
	res = b.deploy(v1, false)
	if res.Changed || res.Outcome != store.OutcomeReady {
		t.Errorf("second deploy of job-1001: changed=%v %s (%s), want nothing changed", res.Changed, res.Outcome, actions(res))
	}
	d1again := b.deployment("llama")
	if d1again.Generation != d1.Generation || d1again.ResourceVersion != d1.ResourceVersion {
		t.Errorf("second deploy moved the Deployment: generation %d→%d, resourceVersion %s→%s",
			d1.Generation, d1again.Generation, d1.ResourceVersion, d1again.ResourceVersion)
	}

	// A dry run of the new version says what would change, and changes nothing.
	res = b.deploy(v2, true)
	if res.Outcome != deploy.OutcomeDryRun || !strings.Contains(actions(res), "Deployment:configured") {
		t.Errorf("dry run of job-1002: %s %s", res.Outcome, actions(res))
	}
	if d := b.deployment("llama"); d.ResourceVersion != d1.ResourceVersion {
		t.Errorf("the dry run changed the Deployment (resourceVersion %s→%s)", d1.ResourceVersion, d.ResourceVersion)
	}
	if _, err := b.store.Version(b.ctx, 1002); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the dry run recorded a version: %v", err)
	}

	// A new version updates the same Deployment.
	res = b.deploy(v2, false)
	if res.Outcome != store.OutcomeReady || !strings.Contains(actions(res), "Deployment:configured") {
		t.Fatalf("deploy of job-1002: %s %s: %s", res.Outcome, actions(res), res.Message)
	}
	d2 := b.deployment("llama")
	if d2.Generation != d1.Generation+1 || modelPath(t, d2) != wantV2 || d2.Spec.Template.Labels[render.LabelVersion] != "job-1002" {
		t.Errorf("after job-1002: generation %d (was %d), model %s, version %s", d2.Generation, d1.Generation, modelPath(t, d2),
			d2.Spec.Template.Labels[render.LabelVersion])
	}
	if dep, _ := b.store.Deployment(b.ctx, "llama"); dep.Current != 1002 {
		t.Errorf("store: current = %d, want 1002", dep.Current)
	}

	// Rollback restores job-1001.
	res, err := b.dep.Rollback(b.ctx, "llama", 0, deploy.Options{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != store.OutcomeReady || res.JobID != 1001 {
		t.Fatalf("rollback: %s to job-%d: %s", res.Outcome, res.JobID, res.Message)
	}
	if got := actions(res); got != "Deployment:configured Service:configured" {
		t.Errorf("rollback did %s; want the model's objects back at job-1001 (labels), and not the tenant's Namespace and ResourceQuota", got)
	}
	d3 := b.deployment("llama")
	if modelPath(t, d3) != wantV1 || d3.Spec.Template.Labels[render.LabelVersion] != "job-1001" || d3.Status.UpdatedReplicas != 1 {
		t.Errorf("after rollback: model %s, version %s, %d updated", modelPath(t, d3), d3.Spec.Template.Labels[render.LabelVersion], d3.Status.UpdatedReplicas)
	}
	dep, _ := b.store.Deployment(b.ctx, "llama")
	ev, _ := b.store.Events(b.ctx, "llama")
	var trail []string
	for _, e := range ev {
		trail = append(trail, fmt.Sprintf("%s job-%d %s", e.Action, e.JobID, e.Outcome))
	}
	wantTrail := "deploy job-1001 ready, deploy job-1001 unchanged, deploy job-1002 ready, rollback job-1001 ready"
	if dep.Current != 1001 || strings.Join(trail, ", ") != wantTrail {
		t.Errorf("store: current %d, events %q; want 1001 and %q", dep.Current, strings.Join(trail, ", "), wantTrail)
	}
}

// A deploy over the tenant's serving quota is refused with the check and
// the numbers, and creates nothing.
func TestDeployOverQuotaIsRefused(t *testing.T) {
	b := newBed(t, 3, 4, 2*time.Minute)
	if res := b.deploy(b.job(2001, "small", "gpus: 1\n"), false); res.Outcome != store.OutcomeReady {
		t.Fatalf("deploy small: %s %s", res.Outcome, res.Message)
	}
	_, err := b.dep.Deploy(b.ctx, b.job(2002, "big", "gpus: 1\nreplicas: 3\n"), deploy.Options{Reason: "test"})
	var r *deploy.Refusal
	if !errors.As(err, &r) || r.Check != deploy.CheckQuota {
		t.Fatalf("deploy over quota: err = %v, want a quota refusal", err)
	}
	want := "tenant acme's serving quota is 3 GPUs; small (1 GPUs x 1 replicas) hold 1 GPUs and 1 replicas; big asks for 3 (1 per replica x 3 replicas): 4 > 3"
	if r.Reason != want || !strings.Contains(r.Fix, "strata-policy render") {
		t.Errorf("refusal:\n reason %q\n fix    %q\nwant reason %q", r.Reason, r.Fix, want)
	}
	if _, err := b.apps.Deployments(b.ns).Get(b.ctx, "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment big after the refusal: err = %v, want NotFound", err)
	}
	if _, err := b.store.Deployment(b.ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("store has deployment big after the refusal: %v", err)
	}
	if ev, _ := b.store.Events(b.ctx, "big"); len(ev) != 1 || ev[0].Outcome != "refused" {
		t.Errorf("events of big = %+v, want one refusal", ev)
	}
	mfs, _ := b.reg.Gather()
	found := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "strata_bridge_refusals_total" && m.GetLabel()[0].GetValue() == deploy.CheckQuota {
				found = m.GetCounter().GetValue() == 1
			}
		}
	}
	if !found {
		t.Errorf("strata_bridge_refusals_total{check=quota} is not 1")
	}
}

// Delete removes the bridge's objects of that name and leaves alone what
// it does not own: an object without the managed-by label (even with the
// same name label), another model's objects, the tenant's Namespace and
// ResourceQuota. A new version that no longer needs an object prunes it.
func TestDeleteLeavesUnmanagedObjects(t *testing.T) {
	b := newBed(t, 8, 8, 2*time.Minute)
	res := b.deploy(b.job(3001, "llama", "gpus: 1\nreplicas: 2\n"), false)
	if res.Outcome != store.OutcomeReady {
		t.Fatalf("deploy llama: %s %s", res.Outcome, res.Message)
	}
	if _, err := b.policy.PodDisruptionBudgets(b.ns).Get(b.ctx, "llama", metav1.GetOptions{}); err != nil {
		t.Fatalf("2 replicas: PodDisruptionBudget: %v", err)
	}
	// One replica needs no PodDisruptionBudget: the new version prunes it.
	res = b.deploy(b.job(3002, "llama", "gpus: 1\n"), false)
	if res.Outcome != store.OutcomeReady || len(res.Pruned) != 1 || res.Pruned[0].Kind != "PodDisruptionBudget" {
		t.Errorf("deploy llama with 1 replica: %s, pruned %v", res.Outcome, res.Pruned)
	}
	if _, err := b.policy.PodDisruptionBudgets(b.ns).Get(b.ctx, "llama", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PodDisruptionBudget after the prune: err = %v", err)
	}
	if res := b.deploy(b.job(3003, "other", "gpus: 1\n"), false); res.Outcome != store.OutcomeReady {
		t.Fatalf("deploy other: %s %s", res.Outcome, res.Message)
	}
	// Unmanaged: a Service with the model's name label but no managed-by,
	// and a ConfigMap a person made.
	if _, err := b.core.Services(b.ns).Create(b.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "llama-by-hand", Labels: map[string]string{render.LabelName: "llama"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.core.ConfigMaps(b.ns).Create(b.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "notes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dry, err := b.dep.Delete(b.ctx, "llama", deploy.Options{DryRun: true, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Deleted) != 2 {
		t.Errorf("dry delete would delete %v, want the Deployment and the Service of llama", dry.Deleted)
	}
	b.deployment("llama") // still there
	del, err := b.dep.Delete(b.ctx, "llama", deploy.Options{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range del.Deleted {
		got = append(got, r.Kind+"/"+r.Name)
	}
	slices.Sort(got)
	if strings.Join(got, " ") != "Deployment/llama Service/llama" {
		t.Errorf("deleted %v, want Deployment/llama Service/llama", got)
	}
	gone := func(err error) bool { return apierrors.IsNotFound(err) }
	_, errD := b.apps.Deployments(b.ns).Get(b.ctx, "llama", metav1.GetOptions{})
	_, errS := b.core.Services(b.ns).Get(b.ctx, "llama", metav1.GetOptions{})
	if !gone(errD) || !gone(errS) {
		t.Errorf("llama's objects after delete: Deployment %v, Service %v; want both gone", errD, errS)
	}
	for what, err := range map[string]error{
		"Service llama-by-hand": get(b.core.Services(b.ns).Get(b.ctx, "llama-by-hand", metav1.GetOptions{})),
		"ConfigMap notes":       get(b.core.ConfigMaps(b.ns).Get(b.ctx, "notes", metav1.GetOptions{})),
		"Deployment other":      get(b.apps.Deployments(b.ns).Get(b.ctx, "other", metav1.GetOptions{})),
		"Service other":         get(b.core.Services(b.ns).Get(b.ctx, "other", metav1.GetOptions{})),
		"ResourceQuota":         get(b.core.ResourceQuotas(b.ns).Get(b.ctx, render.QuotaName, metav1.GetOptions{})),
		"Namespace":             get(b.core.Namespaces().Get(b.ctx, b.ns, metav1.GetOptions{})),
	} {
		if err != nil {
			t.Errorf("%s after deleting llama: %v", what, err)
		}
	}
	if dep, _ := b.store.Deployment(b.ctx, "llama"); dep.State != store.StateDeleted || dep.Current != 0 {
		t.Errorf("store: llama is %s with current %d, want deleted", dep.State, dep.Current)
	}
	if vs, _ := b.store.Versions(b.ctx, "llama"); len(vs) != 2 {
		t.Errorf("store: %d versions of llama after delete, want both kept", len(vs))
	}
}

func get[T any](_ T, err error) error { return err }

// A rollout that cannot finish (more GPUs per replica than a node has)
// ends as a timeout: recorded, the version current, and reported.
func TestRolloutTimeout(t *testing.T) {
	b := newBed(t, 64, 4, 3*time.Second)
	res, err := b.dep.Deploy(b.ctx, b.job(4001, "huge", "gpus: 16\n"), deploy.Options{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != store.OutcomeTimeout || !strings.Contains(res.Message, "not rolled out after 3s") {
		t.Errorf("deploy of an unschedulable model: %s %q, want a timeout", res.Outcome, res.Message)
	}
	v, err := b.store.Version(b.ctx, 4001)
	if err != nil || v.Outcome != store.OutcomeTimeout {
		t.Errorf("store: version %+v, %v; want outcome timeout", v, err)
	}
	if dep, _ := b.store.Deployment(b.ctx, "huge"); dep.Current != 4001 {
		t.Errorf("store: current %d, want 4001 (its objects are applied)", dep.Current)
	}
}
