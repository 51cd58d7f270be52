//go:build integration

package service

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// switchable is a reverse proxy in front of a test bed's slurmrestd that
// can stop answering, as a cluster that goes away, without stopping the
// shared bed itself.
type switchable struct {
	*httptest.Server
	down atomic.Bool
}

func newSwitchable(t *testing.T, target string) *switchable {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	s := &switchable{}
	rp := httputil.NewSingleHostReverseProxy(u)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// tenantsOf is a tenant map of a bed: alice is a member of project main
// (the bed's account) of tenant lab; bob a member of another tenant's
// project, so alice's jobs are foreign to him.
func tenantsOf(t *testing.T, b *testbed.Bed, alice, bob string) *tenantmap.Map {
	t.Helper()
	m, err := tenantmap.Parse([]byte(tenantsJSON(b, alice, bob)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tenantsJSON is tenantsOf's map as tenants.json (reclaimd reads it too).
func tenantsJSON(b *testbed.Bed, alice, bob string) string {
	return fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": %q, "admins": [],
	  "tenants": [
	    {"name": "lab", "account": "lab", "admins": [], "projects": [
	      {"name": "main", "account": %q, "classes": [], "members": [{"user": %q, "role": "member", "default": true}]}]},
	    {"name": "other", "account": "other", "admins": [], "projects": [
	      {"name": "x", "account": "other-x", "classes": [], "members": [{"user": %q, "role": "member"}]}]}]}`,
		b.Cluster, b.Account, alice, bob)
}

// TestIntegrationClusters serves every test bed at once as a cluster of
// one portal: alice lists her job and bob cannot see it; hold, release,
// requeue and cancel run in Slurm as alice and are audited; a cluster that
// stops answering goes stale while the others are still served.
func TestIntegrationClusters(t *testing.T) {
	beds := testbed.All(t)
	if len(beds[0].Users) < 2 {
		t.Fatalf("the test bed has users %v: two are needed", beds[0].Users)
	}
	alice, bob := beds[0].Users[0], beds[0].Users[1]
	st, err := store.Open(testbed.Context(t), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens := map[string]string{}
	for _, u := range []string{alice, bob} {
		tok, _, err := st.CreateToken(testbed.Context(t), u, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tok
	}
	reg := prometheus.NewRegistry()
	metrics := cluster.NewMetrics(reg)
	var clusters []Cluster
	proxies := map[string]*switchable{}
	pollers := map[string]*cluster.Poller{}
	name := func(b *testbed.Bed) string { return "s" + strings.ReplaceAll(b.Version, ".", "") }
	for _, b := range beds {
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		px := newSwitchable(t, b.URL)
		n := name(b)
		// Slurm 25.11 and older have no REST requeue: the portal requeues
		// through the bed's scontrol, as the user (SLURM_JWT), as a site
		// sets clusters[].scontrol.
		p := cluster.New(cluster.Config{Name: n, Slurm: slurmrest.Config{URL: px.URL, User: b.AdminUser, Tokens: signer,
			Requeuer: slurmrest.ScontrolRequeuer{Path: b.Scontrol}},
			Interval: time.Second, StaleAfter: 5 * time.Second, Metrics: metrics})
		m := tenantsOf(t, b, alice, bob)
		clusters = append(clusters, Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }})
		proxies[n], pollers[n] = px, p
	}
	srv := httptest.NewServer(New(Config{Clusters: clusters, Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}),
		Store: st, Registry: reg}))
	defer srv.Close()
	do := func(user, method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokens[user])
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	pollAll := func() {
		for n, p := range pollers {
			if err := p.Poll(testbed.Context(t)); err != nil && !proxies[n].down.Load() {
				t.Fatalf("poll %s: %v", n, err)
			}
		}
	}

	for _, b := range beds {
		n := name(b)
		t.Run(n, func(t *testing.T) {
			b.DumpLogsOnFailure(t)
			// A job that waits (begins in an hour) and one that runs.
			waiting := b.Sbatch(t, alice, "--begin=now+1hour", "--wrap", "sleep 60")
			running := b.Sbatch(t, alice, "--requeue", "--wrap", "sleep 300")
			testbed.WaitJob(t, b.Client(t), running, time.Minute, "running", func(j slurmrest.Job) bool { return j.Running() })
			// One that waits for the running one to end.
			after := b.Sbatch(t, alice, "--dependency=afterok:"+fmt.Sprint(running), "--wrap", "true")
			testbed.WaitJob(t, b.Client(t), after, 30*time.Second, "waiting on its dependency", func(j slurmrest.Job) bool { return j.StateReason == "Dependency" })
			// And one over the partition's MaxTime (1 day): it never starts,
			// and both name the limit and what to do.
			tooLong := b.Sbatch(t, alice, "--time=2-0", "--wrap", "true")
			testbed.WaitJob(t, b.Client(t), tooLong, 30*time.Second, "over the partition's time limit", func(j slurmrest.Job) bool {
				return j.StateReason == "PartitionTimeLimit"
			})
			pollAll()
			explainAgrees(t, b, do, alice, n, after, tenantsOf(t, b, alice, bob))
			explainAgrees(t, b, do, alice, n, tooLong, tenantsOf(t, b, alice, bob))
			code, body := do(alice, "GET", "/v1/jobs?cluster="+n)
			if code != 200 || !strings.Contains(body, fmt.Sprintf(`"id":%d`, waiting)) || !strings.Contains(body, fmt.Sprintf(`"id":%d`, running)) {
				t.Fatalf("alice's jobs: %d %s", code, body)
			}
			code, body = do(bob, "GET", "/v1/jobs?cluster="+n)
			if code != 200 || strings.Contains(body, fmt.Sprint(waiting)) || strings.Contains(body, fmt.Sprint(running)) {
				t.Errorf("bob sees alice's jobs: %s", body)
			}
			if code, _ := do(bob, "GET", fmt.Sprintf("/v1/jobs/%s/%d", n, waiting)); code != 404 {
				t.Errorf("bob GET alice's job = %d, want 404", code)
			}
			if code, _ := do(bob, "POST", fmt.Sprintf("/v1/jobs/%s/%d/cancel", n, waiting)); code != 404 {
				t.Errorf("bob cancels alice's job = %d, want 404", code)
			}
			act := func(id int64, action string, want int) {
				t.Helper()
				code, body := do(alice, "POST", fmt.Sprintf("/v1/jobs/%s/%d/%s", n, id, action))
				if code != want {
					t.Errorf("%s job %d = %d, want %d: %s", action, id, code, want, body)
				}
			}
			explainAgrees(t, b, do, alice, n, waiting, tenantsOf(t, b, alice, bob))
			act(waiting, "hold", 200)
			j := testbed.WaitJob(t, b.Client(t), waiting, 30*time.Second, "held", func(j slurmrest.Job) bool { return j.Held || j.StateReason == "JobHeldUser" })
			if !j.Held && j.StateReason != "JobHeldUser" {
				t.Errorf("after hold: %+v", j)
			}
			pollAll()
			explainAgrees(t, b, do, alice, n, waiting, tenantsOf(t, b, alice, bob)) // held by its user
			act(waiting, "release", 200)
			testbed.WaitJob(t, b.Client(t), waiting, 30*time.Second, "released", func(j slurmrest.Job) bool { return j.StateReason != "JobHeldUser" })
			before := testbed.WaitJob(t, b.Client(t), running, time.Second, "known", func(slurmrest.Job) bool { return true })
			act(running, "requeue", 200) // REST on 26.05, scontrol as alice before
			testbed.WaitJob(t, b.Client(t), running, 30*time.Second, "requeued", func(j slurmrest.Job) bool {
				return j.RestartCount > before.RestartCount
			})
			act(waiting, "cancel", 200)
			act(after, "cancel", 200)
			act(tooLong, "cancel", 200)
			act(running, "cancel", 200)
			testbed.WaitJob(t, b.Client(t), waiting, 30*time.Second, "cancelled", func(j slurmrest.Job) bool { return j.State.Has("CANCELLED") })
			log, err := st.AuditLog(testbed.Context(t), 1000)
			if err != nil {
				t.Fatal(err)
			}
			done := map[string]bool{}
			for _, a := range log {
				if a.Cluster == n && a.User == alice && a.Result == store.ResultOK {
					done[a.Action+" "+a.Target] = true
				}
			}
			for _, want := range []string{fmt.Sprintf("hold %d", waiting), fmt.Sprintf("release %d", waiting), fmt.Sprintf("requeue %d", running),
				fmt.Sprintf("cancel %d", waiting), fmt.Sprintf("cancel %d", running)} {
				if !done[want] {
					t.Errorf("no audit record of %s done: %+v", want, log)
				}
			}
		})
	}

	// One cluster stops answering: it goes stale, the others are served.
	first := name(beds[0])
	proxies[first].down.Store(true)
	time.Sleep(6 * time.Second)
	pollAll()
	code, body := do(alice, "GET", "/v1/clusters")
	var cl struct {
		Clusters []struct {
			Name           string
			Healthy, Stale bool
		}
	}
	if err := json.Unmarshal([]byte(body), &cl); code != 200 || err != nil {
		t.Fatalf("clusters: %d %s", code, body)
	}
	for _, c := range cl.Clusters {
		if wantStale := c.Name == first; c.Stale != wantStale || c.Healthy == wantStale {
			t.Errorf("cluster %s: healthy %v, stale %v; want stale %v", c.Name, c.Healthy, c.Stale, wantStale)
		}
	}
	if code, body := do(alice, "GET", "/v1/jobs"); code != 200 || !strings.Contains(body, `"stale_clusters":["`+first+`"]`) {
		t.Errorf("jobs with a stopped cluster: %d %s", code, body)
	}
}

// TestIntegrationSubmit: alice submits a template through the portal and
// the job runs in Slurm as alice with the template's options; over the
// project's GPU limit she is refused with the policy line before Slurm is
// asked; bob, of another tenant, cannot submit to her project.
func TestIntegrationSubmit(t *testing.T) {
	beds := testbed.All(t)
	b := beds[0]
	alice, bob := b.Users[0], b.Users[1]
	st, err := store.Open(testbed.Context(t), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens := map[string]string{}
	for _, u := range []string{alice, bob} {
		tok, _, err := st.CreateToken(testbed.Context(t), u, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tok
	}
	policy, err := jobpolicy.Parse([]byte(fmt.Sprintf(`{"apiVersion": "strata/v1", "kind": "JobPolicy", "source": "policy.yaml",
	  "cluster": %q, "default_class": "batch", "classes_line": 10,
	  "classes": {"batch": {"partition": %q, "default_time": 10, "max_time": 120, "requeue": true, "whole_nodes": false,
	    "switches": 0, "max_gpus_per_job": 0, "line": 20, "max_time_line": 22, "max_gpus_line": 20, "whole_nodes_line": 20}},
	  "partitions": {%q: "batch"},
	  "accounts": {%q: {"tenant": "lab", "project": "main", "line": 50, "classes": ["batch"], "classes_line": 51,
	    "gpus": {"limit": 4, "owner": "account %s", "line": 52}, "gpus_by_type": {}, "members": [%q], "viewers": {}}},
	  "users": {%q: %q}}`, b.Cluster, b.Partition, b.Partition, b.Account, b.Account, alice, alice, b.Account)))
	if err != nil {
		t.Fatal(err)
	}
	set, err := templates.Load("testdata/templates")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p := cluster.New(cluster.Config{Name: "c1", Slurm: slurmrest.Config{URL: b.URL, User: b.AdminUser, Tokens: signer}, Interval: time.Second})
	m := tenantsOf(t, b, alice, bob)
	srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m },
		Policy: func() *jobpolicy.Policy { return policy }, WorkDir: b.JobDir}}, Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}),
		Store: st, Templates: func() *templates.Set { return set }}))
	defer srv.Close()
	submit := func(user string, params map[string]string) (int, string) {
		t.Helper()
		data, _ := json.Marshal(map[string]any{"cluster": "c1", "template": "small", "params": params})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/submissions", strings.NewReader(string(data)))
		req.Header.Set("Authorization", "Bearer "+tokens[user])
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := submit(alice, map[string]string{"gpus": "1", "steps": "3", "tag": "it"})
	if code != 201 {
		t.Fatalf("alice's submission = %d %s", code, body)
	}
	var sub struct {
		JobID int64 `json:"job_id"`
	}
	json.Unmarshal([]byte(body), &sub)
	j := testbed.WaitJob(t, b.Client(t), sub.JobID, time.Minute, "known", func(slurmrest.Job) bool { return true })
	if j.User != alice || j.Account != b.Account || j.Partition != b.Partition || j.TimeLimit != time.Hour || j.WorkDir != b.JobDir {
		t.Errorf("the job in Slurm: user %s, account %s, partition %s, time limit %s, work dir %s", j.User, j.Account, j.Partition, j.TimeLimit, j.WorkDir)
	}
	b.Client(t).Cancel(testbed.Context(t), sub.JobID)
	code, body = submit(alice, map[string]string{"gpus": "6"})
	if code != 403 || !strings.Contains(body, `"policy_line":"policy.yaml:52"`) {
		t.Errorf("over the limit = %d %s", code, body)
	}
	if code, body := submit(bob, map[string]string{"gpus": "1"}); code == 201 {
		t.Errorf("bob submitted: %s", body)
	}
	if recs, _ := st.Submissions(testbed.Context(t), alice, 10); len(recs) != 1 || recs[0].JobID != sub.JobID {
		t.Errorf("recorded submissions = %+v", recs)
	}
}

// explainAgrees: the reason the portal gives for a real pending job is
// what strata-policy explain job says of it on the same bed, read the way
// the command reads it (explain.Read over slurmrestd, then explain.Job
// with the same tenant map): Slurm's code, the meaning, the detail, the
// hint and the policy line.
func explainAgrees(t *testing.T, b *testbed.Bed, do func(user, method, path string) (int, string), user, cluster string, id int64, m *tenantmap.Map) {
	t.Helper()
	code, body := do(user, "GET", fmt.Sprintf("/v1/jobs/%s/%d", cluster, id))
	var job struct {
		Reason *struct {
			Slurm      string  `json:"slurm"`
			Meaning    *string `json:"meaning"`
			Text       *string `json:"text"`
			Hint       *string `json:"hint"`
			PolicyLine *string `json:"policy_line"`
		} `json:"reason"`
	}
	if err := json.Unmarshal([]byte(body), &job); code != 200 || err != nil || job.Reason == nil {
		t.Fatalf("job %d in the portal: %d %s", id, code, body)
	}
	live, err := explain.Read(testbed.Context(t), b.Client(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := explain.Job(explain.Input{Tenants: m, Live: live}, id)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Why == nil {
		t.Fatalf("strata-policy explain job %d says it does not wait: %+v", id, rep)
	}
	type said struct{ Slurm, Meaning, Text, Hint, PolicyLine string }
	cliSaid := said{Slurm: rep.Why.Reason, Meaning: rep.Why.Meaning, Text: rep.Why.Detail, Hint: rep.Why.Hint}
	if rep.Why.Limit != nil && rep.Why.Limit.Limit.Source != nil {
		cliSaid.PolicyLine = rep.Why.Limit.Limit.Source.String()
	}
	r := job.Reason
	portalSaid := said{Slurm: r.Slurm, Meaning: deref(r.Meaning), Text: deref(r.Text), Hint: deref(r.Hint), PolicyLine: deref(r.PolicyLine)}
	if portalSaid != cliSaid {
		t.Errorf("job %d waits, the portal says %+v, strata-policy explain says %+v", id, portalSaid, cliSaid)
	}
	t.Logf("job %d: the portal and strata-policy explain say %+v", id, cliSaid)
	if cliSaid.Meaning == "" {
		t.Errorf("job %d: explain gives no meaning: %+v", id, rep.Why)
	}
}
