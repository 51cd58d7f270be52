//go:build integration

package watch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/render"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/bridge/internal/watch"
	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// pollInterval is the watcher's interval in this test; the Deployment of
// a job must exist one interval (plus the time the apply itself takes)
// after the job completed.
const (
	pollInterval = 2 * time.Second
	applyGrace   = 5 * time.Second
)

// On each Slurm test bed, with the daemon's poll loop running in this
// process against the bed's slurmrestd and the Kubernetes test bed: alice
// submits two jobs in account testbed that write a small model into the
// bed's shared folder and ask to be served, one with strata-serve.yaml,
// one with --comment=strata:serve=<name>. Each ends, and within one poll
// interval its Deployment exists in the tenant's namespace (serving.json
// maps account testbed to it) with the model's folder mounted read-only
// at /model; the store records each as a version that rolled out.
func TestJobToDeployment(t *testing.T) {
	rc := kubetest.Config(t)
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		ns := kubetest.Namespace(t, rc, "bridge-e2e-"+strings.ReplaceAll(b.Version, ".", ""))

		// A folder of the bed's shared path that alice may write.
		dir := path.Join(b.JobDir, testbed.Unique("serve-"))
		commentDir := path.Join(dir, "by-comment")
		for _, d := range []string{dir, commentDir} {
			if err := os.MkdirAll(b.HostPath(d), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(b.HostPath(d), 0o777); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { os.RemoveAll(b.HostPath(dir)) })

		serving := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{{
			Name: "tb", Namespace: ns, GPUs: 4, Replicas: 4, Projects: []servingquota.Project{{Name: "testbed", Account: b.Account}},
		}}}
		if err := serving.Validate(); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, path.Join(t.TempDir(), "bridge.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		kube, err := deploy.NewKube(rc, "strata-bridge")
		if err != nil {
			t.Fatal(err)
		}
		client := b.Client(t)
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("bed", b.Name)
		dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Jobs: client, Serving: func() *servingquota.File { return serving },
			AllowedRoots: []string{dir},
			// Pods would mount the bed's shared folder from the node's
			// host path; the bridge reads it through the bed's root.
			Mount:       config.Mount{Kind: config.MountHostPath, Root: b.JobDir, Path: b.HostPath(b.JobDir)},
			RuntimesDir: "../../../etc/strata/bridge/runtimes", Defaults: servespec.Defaults{Runtime: "vllm", Replicas: 1},
			HostRoot: b.Root, RolloutTimeout: 2 * time.Minute, RolloutPoll: 200 * time.Millisecond, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		w, err := watch.New(watch.Config{Slurm: client, Deployer: dep, Store: st, Interval: pollInterval, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("poll loop: %v", err)
			}
		})

		byFile, byComment := testbed.Unique("e2e-file-"), testbed.Unique("e2e-note-")
		fileJob := submit(t, client, b, byFile, dir, "", fmt.Sprintf(`mkdir -p model
printf 'weights of %[1]s\n' > model/weights.bin
cat > strata-serve.yaml <<EOF
name: %[1]s
model: %[2]s/model
runtime: vllm
gpus: 1
EOF
`, byFile, dir))
		commentJob := submit(t, client, b, byComment, commentDir, "strata:serve="+byComment, "printf 'weights\\n' > weights.bin\n")

		apps := appsv1client.NewForConfigOrDie(rc)
		for _, c := range []struct {
			job       int64
			name      string
			modelPath string // as the job saw it
		}{
			{fileJob, byFile, dir + "/model"},
			{commentJob, byComment, commentDir},
		} {
			testbed.WaitJob(t, client, c.job, 2*time.Minute, "completed", func(j slurmrest.Job) bool { return j.State.Has("COMPLETED") })
			ended := time.Now()
			d := waitDeployment(t, apps, ns, c.name, ended.Add(pollInterval+applyGrace))
			t.Logf("job %d completed; Deployment %s/%s seen %s later (poll interval %s)", c.job, ns, c.name,
				time.Since(ended).Round(10*time.Millisecond), pollInterval)
			checkMount(t, d, b.HostPath(c.modelPath))
			if got := d.Labels[render.LabelSlurmJob]; got != strconv.FormatInt(c.job, 10) {
				t.Errorf("Deployment %s: label %s=%q, want %d", c.name, render.LabelSlurmJob, got, c.job)
			}
			v := waitVerdict(t, st, c.job)
			if v.Outcome != store.OutcomeReady {
				t.Errorf("job %d: verdict %s (%s), want ready", c.job, v.Outcome, v.Message)
			}
			if ver, err := st.Version(ctx, c.job); err != nil || ver.Name != c.name || ver.Tenant != "tb" || ver.User != "alice" {
				t.Errorf("job %d: stored version %+v, %v", c.job, ver, err)
			}
		}
		if s := w.Status(); !s.OK {
			t.Errorf("watcher status: %+v", s)
		}
	})
}

func submit(t *testing.T, c *slurmrest.Client, b *testbed.Bed, name, dir, comment, body string) int64 {
	t.Helper()
	res, err := c.Submit(testbed.Context(t), "alice", slurmrest.JobSpec{Name: name, Script: "#!/bin/bash\nset -e\n" + body,
		Account: b.Account, Partition: b.Partition, WorkDir: dir, StdOut: dir + "/" + name + ".out", TimeLimit: 5 * time.Minute,
		Comment: comment})
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return res.JobID
}

func waitDeployment(t *testing.T, apps *appsv1client.AppsV1Client, ns, name string, deadline time.Time) *appsv1.Deployment {
	t.Helper()
	for {
		d, err := apps.Deployments(ns).Get(testbed.Context(t), name, metav1.GetOptions{})
		if err == nil {
			return d
		}
		if !apierrors.IsNotFound(err) {
			t.Fatalf("get Deployment %s/%s: %v", ns, name, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Deployment %s/%s one poll interval (%s, plus %s to apply) after its job completed", ns, name, pollInterval, applyGrace)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMount wants the model's folder mounted read-only at /model.
func checkMount(t *testing.T, d *appsv1.Deployment, hostPath string) {
	t.Helper()
	vol := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == hostPath {
			vol = v.Name
		}
	}
	if vol == "" {
		t.Errorf("Deployment %s mounts no hostPath %s: %+v", d.Name, hostPath, d.Spec.Template.Spec.Volumes)
		return
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == vol && m.MountPath == render.ModelMountPath && m.ReadOnly {
				return
			}
		}
	}
	t.Errorf("Deployment %s: volume %s is not mounted read-only at %s", d.Name, vol, render.ModelMountPath)
}

func waitVerdict(t *testing.T, st *store.Store, job int64) store.Seen {
	t.Helper()
	end := time.Now().Add(2 * time.Minute)
	for time.Now().Before(end) {
		if v, err := st.Seen(testbed.Context(t), job); err == nil {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("job %d: no verdict after 2m", job)
	return store.Seen{}
}
