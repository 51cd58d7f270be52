//go:build integration

package service

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestIntegrationHistory: on each Slurm bed, alice's two-GPU job runs to
// completion and GET /v1/jobs/history finds it with the GPU-hours sacct
// gives (ElapsedRaw × AllocTRES gres/gpu); bob, of another tenant, does
// not see it. A job of alice's that slurmctld has already forgotten
// (past MinJobAge, 300 s on the beds) is read from slurmdbd: its page
// answers, with its GPU-hours, for alice and not for bob.
func TestIntegrationHistory(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		alice, bob := b.Users[0], b.Users[1]
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
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
		if err := p.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		m := tenantsOf(t, b, alice, bob)
		srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m }}},
			Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st}))
		defer srv.Close()
		do := func(user, path string, v any) int {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+tokens[user])
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode == http.StatusOK && v != nil {
				if err := json.Unmarshal(body, v); err != nil {
					t.Fatalf("%s: %v: %s", path, err, body)
				}
			}
			return resp.StatusCode
		}

		admin := b.Client(t)
		res, err := admin.Submit(ctx, alice, slurmrest.JobSpec{Name: testbed.Unique("portal-history"), Script: "#!/bin/sh\nsleep 2\n",
			Account: b.Account, Partition: b.Partition, TRESPerNode: "gres/gpu:2", TimeLimit: 5 * time.Minute, WorkDir: b.JobDir, StdOut: "/dev/null"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Cancel(testbed.Context(t), res.JobID) })
		live := testbed.WaitJob(t, admin, res.JobID, 2*time.Minute, "completed", func(j slurmrest.Job) bool { return j.State.Has("COMPLETED") })

		window := "?from=" + url.QueryEscape(live.SubmitTime.Add(-time.Minute).UTC().Format(time.RFC3339)) +
			"&to=" + url.QueryEscape(time.Now().Add(time.Minute).UTC().Format(time.RFC3339))
		var got *api.FinishedJob
		for end := time.Now().Add(time.Minute); got == nil; time.Sleep(time.Second) {
			if time.Now().After(end) {
				t.Fatalf("job %d is not in alice's history after a minute", res.JobID)
			}
			var h api.JobHistory
			if code := do(alice, "/v1/jobs/history"+window, &h); code != http.StatusOK {
				t.Fatalf("alice's history: %d", code)
			}
			for i := range h.Jobs {
				if h.Jobs[i].Id == res.JobID {
					got = &h.Jobs[i]
				}
			}
		}
		elapsed, gpus := sacctGPU(t, b, res.JobID)
		want := math.Round(float64(gpus)*float64(elapsed)/3600*1000) / 1000
		if got.GpuHours != want || got.Gpus != gpus || got.ElapsedSeconds != elapsed || got.State != "COMPLETED" || got.Project != "main" || got.User != alice {
			t.Errorf("alice's finished job %+v; sacct: %d s × %d GPUs = %v GPU-hours", *got, elapsed, gpus, want)
		}
		var hb api.JobHistory
		if code := do(bob, "/v1/jobs/history"+window, &hb); code != http.StatusOK {
			t.Fatalf("bob's history: %d", code)
		}
		for _, j := range hb.Jobs {
			if j.User == alice || j.Id == res.JobID {
				t.Errorf("bob's history holds alice's job %d", j.Id)
			}
		}
		t.Logf("%s: job %d: %v GPU-hours, as sacct gives", b.Version, got.Id, got.GpuHours)

		// A job slurmctld has forgotten: alice's oldest of the last day.
		old, err := admin.History(ctx, slurmrest.HistoryFilter{Users: []string{alice}, Accounts: []string{b.Account}})
		if err != nil {
			t.Fatal(err)
		}
		var gone *slurmrest.FinishedJob
		for i := range old {
			if _, err := admin.Job(ctx, old[i].ID); old[i].Ended() && errors.Is(err, slurmrest.ErrNotFound) {
				gone = &old[i]
				break
			}
		}
		if gone == nil {
			t.Logf("%s: no job of alice's has left slurmctld yet (a fresh bed): the finished job page is not checked", b.Version)
			return
		}
		path := "/v1/jobs/c1/" + strconv.FormatInt(gone.ID, 10)
		var j api.Job
		if code := do(alice, path, &j); code != http.StatusOK || j.Id != gone.ID || j.GpuHours == nil ||
			*j.GpuHours != math.Round(gone.GPUHours()*1000)/1000 || j.State != gone.State.Base() {
			t.Errorf("alice's forgotten job %d: %d %+v", gone.ID, code, j)
		}
		if code := do(bob, path, nil); code != http.StatusNotFound {
			t.Errorf("bob's view of alice's forgotten job %d: %d", gone.ID, code)
		}
		t.Logf("%s: job %d (gone from slurmctld) read from slurmdbd: %s", b.Version, gone.ID, j.State)
	})
}

// sacctGPU is the job's ElapsedRaw and gres/gpu count as sacct -X gives them.
func sacctGPU(t *testing.T, b *testbed.Bed, id int64) (elapsed, gpus int64) {
	t.Helper()
	out, err := exec.CommandContext(testbed.Context(t), filepath.Join(b.Bin, "sacct"), "-X", "-n", "-P", "-j", strconv.FormatInt(id, 10),
		"--format=ElapsedRaw,AllocTRES").CombinedOutput()
	if err != nil {
		t.Fatalf("sacct: %v: %s", err, out)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	raw, tres, ok := strings.Cut(line, "|")
	if !ok {
		t.Fatalf("sacct: %q is not ElapsedRaw|AllocTRES", out)
	}
	if elapsed, err = strconv.ParseInt(raw, 10, 64); err != nil {
		t.Fatalf("sacct ElapsedRaw %q: %v", raw, err)
	}
	for _, kv := range strings.Split(tres, ",") {
		if n, ok := strings.CutPrefix(kv, "gres/gpu="); ok {
			gpus, _ = strconv.ParseInt(n, 10, 64)
		}
	}
	if gpus == 0 {
		t.Fatalf("sacct AllocTRES %q has no gres/gpu", tres)
	}
	return elapsed, gpus
}
