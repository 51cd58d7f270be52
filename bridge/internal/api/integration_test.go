//go:build integration

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/strata-hpc/strata/bridge/internal/api"
	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/render"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// The portal's view, on a real apiserver: a model deployed by the watcher
// (here: the deployer, from a job of this test) is listed; POST
// /v1/deploy of the same job changes nothing; a second version is
// deployed through the API and rolled back through it; DELETE with
// dry_run=true deletes nothing, without it the model's objects go.
func TestAPIOnKubernetes(t *testing.T) {
	rc := kubetest.Config(t)
	ctx := kubetest.Context(t)
	ns := kubetest.Namespace(t, rc, "bridge-api")
	shared := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kube, err := deploy.NewKube(rc, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	serving := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{
		{Name: "acme", Namespace: ns, GPUs: 4, Replicas: 4, Projects: []servingquota.Project{{Name: "llm", Account: "acme-llm"}}}}}
	jobs := jobTable{}
	dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Jobs: jobs, Serving: func() *servingquota.File { return serving },
		AllowedRoots: []string{shared}, Mount: config.Mount{Kind: config.MountHostPath, Root: shared, Path: "/srv/shared"},
		RuntimesDir: "../../../etc/strata/bridge/runtimes", Defaults: servespec.Defaults{Runtime: "vllm", Replicas: 1},
		RolloutTimeout: 2 * time.Minute, RolloutPoll: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{501, 502} {
		dir := filepath.Join(shared, fmt.Sprint(id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "weights.bin"), []byte("w"), 0o644); err != nil {
			t.Fatal(err)
		}
		jobs[id] = slurmrest.Job{ID: id, State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", User: "alice", WorkDir: dir,
			Comment: "strata:serve=llama"}
	}
	if res, err := dep.Deploy(ctx, jobs[501], deploy.Options{Reason: "test"}); err != nil || res.Outcome != store.OutcomeReady {
		t.Fatalf("deploy job 501: %+v, %v", res, err)
	}
	const token = "integration-token"
	srv := httptest.NewServer(api.Handler(api.Config{Deployer: dep, Store: st, Token: func() ([]byte, error) { return []byte(token), nil }}))
	defer srv.Close()
	call := func(method, path, body string, wantCode int, v any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantCode {
			t.Fatalf("%s %s = %d, want %d:\n%s", method, path, resp.StatusCode, wantCode, data)
		}
		if v != nil {
			if err := json.Unmarshal(data, v); err != nil {
				t.Fatalf("%s %s: %v\n%s", method, path, err, data)
			}
		}
	}
	apps := appsv1client.NewForConfigOrDie(rc)
	version := func() string {
		t.Helper()
		d, err := apps.Deployments(ns).Get(ctx, "llama", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Labels[render.LabelVersion]
	}

	var list struct {
		Deployments []api.DeploymentSummary `json:"deployments"`
	}
	call("GET", "/v1/deployments", "", 200, &list)
	if len(list.Deployments) != 1 || list.Deployments[0].Version != "job-501" || list.Deployments[0].Current.Outcome != store.OutcomeReady {
		t.Errorf("list = %+v, want llama at job-501, ready", list.Deployments)
	}
	var res deploy.Result
	call("POST", "/v1/deploy", `{"job": 501}`, 200, &res)
	if res.Changed || res.Outcome != store.OutcomeReady {
		t.Errorf("POST /v1/deploy of job 501 again: changed=%v outcome %s, want nothing changed", res.Changed, res.Outcome)
	}
	call("POST", "/v1/deploy", `{"job": 502, "dry_run": true}`, 200, &res)
	if res.Outcome != deploy.OutcomeDryRun || !res.Changed || version() != "job-501" {
		t.Errorf("dry run of job 502: %s changed=%v, cluster at %s", res.Outcome, res.Changed, version())
	}
	call("POST", "/v1/deploy", `{"job": 502}`, 200, &res)
	if res.Outcome != store.OutcomeReady || version() != "job-502" {
		t.Errorf("deploy of job 502: %s, cluster at %s", res.Outcome, version())
	}
	var refusal api.Error
	call("POST", "/v1/deployments/llama/rollback", `{"to": "job-9"}`, 422, &refusal)
	if refusal.Check != deploy.CheckVersion || !strings.Contains(refusal.Reason, "job-501 (ready), job-502 (ready)") {
		t.Errorf("rollback to job-9: %+v", refusal)
	}
	call("POST", "/v1/deployments/llama/rollback", ``, 200, &res)
	if res.Outcome != store.OutcomeReady || res.JobID != 501 || version() != "job-501" {
		t.Errorf("rollback: %s to job-%d, cluster at %s", res.Outcome, res.JobID, version())
	}
	var detail api.DeploymentDetail
	call("GET", "/v1/deployments/llama", "", 200, &detail)
	if detail.Current != 501 || len(detail.Versions) != 2 || len(detail.Events) != 5 {
		t.Errorf("detail: current %d, %d versions, %d events; want 501, 2, 5 (deploy, unchanged, deploy, refused rollback, rollback)", detail.Current, len(detail.Versions), len(detail.Events))
	}
	var del deploy.DeleteResult
	call("DELETE", "/v1/deployments/llama?dry_run=true", "", 200, &del)
	if len(del.Deleted) != 2 || version() != "job-501" {
		t.Errorf("dry delete: %+v; the Deployment must stay", del)
	}
	// An anonymous DELETE never reaches the cluster.
	anon, _ := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL+"/v1/deployments/llama", nil)
	if resp, err := srv.Client().Do(anon); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous DELETE = %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if version() != "job-501" {
		t.Fatal("an anonymous DELETE removed the Deployment")
	}
	call("DELETE", "/v1/deployments/llama", "", 200, &del)
	if _, err := apps.Deployments(ns).Get(ctx, "llama", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment after DELETE: %v", err)
	}
	call("GET", "/v1/deployments/llama", "", 200, &detail)
	if detail.State != store.StateDeleted {
		t.Errorf("state after DELETE = %s", detail.State)
	}
}

// jobTable is slurmrestd at the edge: the jobs this test made.
type jobTable map[int64]slurmrest.Job

func (j jobTable) Job(_ context.Context, id int64) (slurmrest.Job, error) {
	if job, ok := j[id]; ok {
		return job, nil
	}
	return slurmrest.Job{}, fmt.Errorf("job %d: %w", id, slurmrest.ErrNotFound)
}
