//go:build integration

package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/strata-hpc/strata/internal/bridgetest"
	"github.com/strata-hpc/strata/internal/kubetest"
	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// bridgeDir is the folder bridgeBinary built into, removed by TestMain.
var bridgeDir string

// bridgeBinary builds strata-bridge once for the tests of this package
// (or takes STRATA_BRIDGE_BIN): the portal meets the bridge through its
// API only, so the test runs the real daemon, as its unit does.
var bridgeBinary = sync.OnceValues(func() (string, error) {
	if os.Getenv("STRATA_BRIDGE_BIN") != "" {
		return bridgetest.Build("")
	}
	dir, err := os.MkdirTemp("", "strata-bridge-bin-")
	if err != nil {
		return "", err
	}
	bridgeDir = dir
	return bridgetest.Build(dir)
})

// TestMain removes the bridge binary's folder once the package's tests
// are done (built once for all of them, it outlives each test's own
// temporary folder).
func TestMain(m *testing.M) {
	code := m.Run()
	if bridgeDir != "" {
		_ = os.RemoveAll(bridgeDir)
	}
	os.Exit(code)
}

// TestDeployThroughPortal: on each Slurm test bed and the Kubernetes test
// bed, `strata-bridge run` (its API with a token) and the portal over
// both. alice's job writes a model into the bed's shared folder and
// completes; alice deploys it through the portal, the Deployment rolls
// out on kwok's GPU nodes in her tenant's namespace, the portal lists it
// and shows it on the job; bob, of another tenant, neither sees it nor
// can deploy the job or delete the deployment; alice deletes it; every
// act is in the audit log.
func TestDeployThroughPortal(t *testing.T) {
	rc := kubetest.Config(t)
	bin, err := bridgeBinary()
	if err != nil {
		t.Fatal(err)
	}
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		b.DumpLogsOnFailure(t)
		ctx := testbed.Context(t)
		alice, bob := b.Users[0], b.Users[1]
		ns := kubetest.Namespace(t, rc, "portal-deploy-"+strings.ReplaceAll(b.Version, ".", ""))
		dir := t.TempDir()

		// The bridge: tenant lab, project main (the bed's account, as
		// tenantsOf has it), models beneath a folder of its own.
		br := bridgetest.Start(t, b, bridgetest.Options{Binary: bin, Namespace: ns, Tenant: "lab", Project: "main",
			Prefix: "portal-serve-", RolloutTimeout: "1m"})
		shared := br.Shared

		// The portal over the bed and the bridge, the token read as
		// serve reads it.
		st, err := store.Open(ctx, filepath.Join(dir, "portal.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		tokens := map[string]string{}
		for _, u := range []string{alice, bob} {
			if tokens[u], _, err = st.CreateToken(ctx, u, "", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		p := cluster.New(cluster.Config{Name: "c1", Slurm: slurmrest.Config{URL: b.URL, User: b.AdminUser, Tokens: signer}, Interval: time.Second})
		m := tenantsOf(t, b, alice, bob)
		token := &secretfile.File{Path: br.TokenFile, What: "bridge_token_file"}
		bridge := bridgeclient.New(bridgeclient.Config{URL: br.URL, Token: token.Get, HTTP: &http.Client{Timeout: 90 * time.Second}})
		srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m }, Bridge: bridge}},
			Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st}))
		t.Cleanup(srv.Close)
		do := func(user, method, path string, body any) (int, string) {
			t.Helper()
			var rd io.Reader
			if body != nil {
				data, _ := json.Marshal(body)
				rd = bytes.NewReader(data)
			}
			req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, rd)
			req.Header.Set("Authorization", "Bearer "+tokens[user])
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(data)
		}

		// alice's job writes a model, asking nothing of the bridge.
		name := testbed.Unique("pd-")
		workdir := path.Join(shared, name)
		if err := os.MkdirAll(b.HostPath(workdir), 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(b.HostPath(workdir), 0o777)
		client := b.Client(t)
		res, err := client.Submit(ctx, alice, slurmrest.JobSpec{Name: name, Script: "#!/bin/bash\nset -e\nprintf 'weights\\n' > model.bin\n",
			Account: b.Account, Partition: b.Partition, WorkDir: workdir, StdOut: workdir + "/job.out", TimeLimit: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		job := res.JobID
		testbed.WaitJob(t, client, job, 2*time.Minute, "completed", func(j slurmrest.Job) bool { return j.State.Has("COMPLETED") })
		if err := p.Poll(ctx); err != nil {
			t.Fatal(err)
		}

		// bob may not deploy it: as a job that does not exist.
		req := map[string]any{"cluster": "c1", "job": job, "name": name}
		if code, body := do(bob, "POST", "/v1/deployments", req); code != 404 {
			t.Errorf("bob deploys alice's job = %d %s, want 404", code, body)
		}
		code, body := do(alice, "POST", "/v1/deployments", req)
		if code != 200 {
			t.Fatalf("alice deploys job %d = %d %s", job, code, body)
		}
		var out struct {
			Outcome, Namespace, Version, Tenant string
			AuditID                             int64 `json:"audit_id"`
		}
		json.Unmarshal([]byte(body), &out)
		if out.Outcome != "ready" || out.Namespace != ns || out.Version != fmt.Sprintf("job-%d", job) || out.Tenant != "lab" || out.AuditID == 0 {
			t.Errorf("deploy = %s", body)
		}
		d, err := appsv1client.NewForConfigOrDie(rc).Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("no Deployment %s/%s after the portal's deploy: %v", ns, name, err)
		}
		if d.Status.ReadyReplicas < 1 {
			t.Errorf("Deployment %s/%s: %d replicas ready", ns, name, d.Status.ReadyReplicas)
		}

		// Listed, and shown on the job, for alice; nothing for bob.
		code, body = do(alice, "GET", "/v1/deployments?cluster=c1", nil)
		if code != 200 || !strings.Contains(body, `"name":"`+name+`"`) || !strings.Contains(body, fmt.Sprintf(`"job_id":%d`, job)) ||
			!strings.Contains(body, `"outcome":"ready"`) || !strings.Contains(body, `"user":"`+alice+`"`) {
			t.Errorf("alice's deployments = %d %s", code, body)
		}
		if code, body := do(bob, "GET", "/v1/deployments", nil); code != 200 || strings.Contains(body, name) {
			t.Errorf("bob's deployments = %d %s", code, body)
		}
		code, body = do(alice, "GET", fmt.Sprintf("/v1/jobs/c1/%d", job), nil)
		if code != 200 || !strings.Contains(body, `"served":[{`) || !strings.Contains(body, `"name":"`+name+`"`) {
			t.Errorf("alice's job = %d %s", code, body)
		}

		// Delete: not bob's; alice's.
		if code, body := do(bob, "DELETE", "/v1/deployments/c1/"+name, nil); code != 404 {
			t.Errorf("bob deletes alice's deployment = %d %s, want 404", code, body)
		}
		code, body = do(alice, "DELETE", "/v1/deployments/c1/"+name, nil)
		if code != 200 || !strings.Contains(body, `"kind":"Deployment"`) {
			t.Errorf("alice deletes = %d %s", code, body)
		}
		log, err := st.AuditLog(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		var acts []string
		for _, a := range log {
			acts = append(acts, a.User+" "+a.Action+" "+a.Target+" "+a.Result)
		}
		for _, want := range []string{fmt.Sprintf("%s deploy %d ok", alice, job), fmt.Sprintf("%s delete %s ok", alice, name)} {
			if !strings.Contains(strings.Join(acts, "\n"), want) {
				t.Errorf("no audit record %q in %q", want, acts)
			}
		}
	})
}
