//go:build integration

package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestIntegrationSlurmRefuses: bob is made an admin of alice's tenant in
// tenants.json alone (Slurm gives him no right over her account). The
// portal lets him ask to cancel and hold her running job; Slurm refuses
// both. The portal answers 403 slurm_refused, audits each as refused, and
// the job runs on, on every release.
func TestIntegrationSlurmRefuses(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		if len(b.Users) < 2 {
			t.Fatalf("the test bed has users %v: two are needed", b.Users)
		}
		alice, bob := b.Users[0], b.Users[1]
		ctx := testbed.Context(t)
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		tok, _, err := st.CreateToken(ctx, bob, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// tenantsJSON, with bob an admin of alice's tenant lab.
		doc := strings.Replace(tenantsJSON(b, alice, bob), `{"name": "lab", "account": "lab", "admins": []`,
			fmt.Sprintf(`{"name": "lab", "account": "lab", "admins": [%q]`, bob), 1)
		m, err := tenantmap.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		p := cluster.New(cluster.Config{Name: "c1", Slurm: slurmrest.Config{URL: b.URL, User: b.AdminUser, Tokens: signer,
			Requeuer: slurmrest.ScontrolRequeuer{Path: b.Scontrol}}, Interval: time.Second, StaleAfter: time.Minute})
		srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m }}},
			Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st}))
		defer srv.Close()

		job := b.Sbatch(t, alice, "--wrap", "sleep 300")
		t.Cleanup(func() { _ = b.Client(t).Cancel(testbed.Context(t), job) })
		testbed.WaitJob(t, b.Client(t), job, time.Minute, "running", slurmrest.Job.Running)
		if err := p.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for _, action := range []string{"cancel", "hold"} {
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/jobs/c1/%d/%s", srv.URL, job, action), nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Code, Message string }
			_ = json.Unmarshal(body, &e)
			if resp.StatusCode != http.StatusForbidden || e.Code != "slurm_refused" {
				t.Errorf("bob's %s of alice's job through the portal = %d %s, want 403 slurm_refused", action, resp.StatusCode, body)
			}
			if strings.Contains(string(body), strings.TrimPrefix(b.URL, "http://")) {
				t.Errorf("the answer shows slurmrestd's address: %s", body)
			}
			t.Logf("%s: bob's %s: %d %s", b.Version, action, resp.StatusCode, body)
			log, err := st.AuditLog(ctx, 1)
			if err != nil || len(log) != 1 || log[0].Action != action || log[0].Result != store.ResultRefused {
				t.Errorf("audit of bob's %s = %+v, %v; want it refused", action, log, err)
			}
		}
		j, err := b.Client(t).Job(ctx, job)
		if err != nil || !j.Running() || j.Held {
			t.Errorf("alice's job after bob's tries: %+v, %v; want it running", j, err)
		}
	})
}
