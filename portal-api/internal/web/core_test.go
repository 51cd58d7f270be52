package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// The jobs of two clusters at the network edge (clustertest replays a
// real slurmrestd): mem is a member of acme's project llm, gmem of
// globex's rl; tadmin administers acme, ops every tenant.
var (
	pagesGPU1 = []clustertest.Job{
		{ID: 910101, User: "mem", Account: "acme-llm", Name: "llm-train", QOS: "train"},
		{ID: 910102, User: "mem", Account: "acme-llm", State: "PENDING", Reason: "Priority", QOS: "batch", Name: "llm-eval"},
		{ID: 910104, User: "gmem", Account: "globex-rl", Name: "globex-rl-run"},
		{ID: 910105, User: "gmem", Account: "globex-rl", State: "PENDING", Reason: "Resources"},
	}
	pagesGPU2 = []clustertest.Job{
		{ID: 920201, User: "mem", Account: "acme-llm", State: "PENDING", Reason: "Priority", Name: "llm-sweep"},
		{ID: 920202, User: "gmem", Account: "globex-rl"},
	}
	memMarks = []string{"910101", "910102", "920201", "llm-train", "llm-eval", "llm-sweep"}
)

// coreBed is the pages over the real core, over two fake slurmrestds.
func coreBed(t *testing.T) (*bed, map[string]*clustertest.Bed) {
	t.Helper()
	now := time.Unix(1795983872, 0)
	m, err := tenantmap.Load("../service/testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	beds := map[string]*clustertest.Bed{}
	var clusters []core.Cluster
	var pollers []*cluster.Poller
	for _, c := range []struct {
		name, release string
		jobs          []clustertest.Job
	}{{"gpu1", "26.05", pagesGPU1}, {"gpu2", "24.11", pagesGPU2}} {
		b := clustertest.New(t, c.release, c.jobs...)
		p := cluster.New(cluster.Config{Name: c.name, Slurm: slurmrest.Config{URL: b.URL, Tokens: slurmrest.StaticToken("t")},
			Interval: time.Second, StaleAfter: time.Minute, Now: func() time.Time { return now }})
		if err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
		beds[c.name] = b
		pollers = append(pollers, p)
		clusters = append(clusters, core.Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }})
	}
	var c *core.Core
	b := newBed(t, func(cfg *Config) {
		c = core.New(core.Config{Clusters: clusters, Store: cfg.Store, Now: func() time.Time { return now }})
		cfg.Source = CoreSessionSource(c, testLauncher(&c))
	})
	seedSessions(t, b.store, now)
	b.pollers = pollers
	return b, beds
}

// TestPagesOverCore: alice's (mem's) pages show her jobs on both clusters
// with their state and reasons; bob's (gmem's) pages hold none of hers,
// not even when he asks for her job by its address or tries to control it.
func TestPagesOverCore(t *testing.T) {
	b, beds := coreBed(t)
	alice := b.client(t)
	b.signIn(t, alice, "mem")
	_, home := get(t, alice, b.srv.URL+"/")
	if !strings.Contains(home, `id="pr-gpu1-acme-llm"`) || !strings.Contains(home, `id="pr-gpu2-acme-llm"`) {
		t.Errorf("alice's home does not show her project acme/llm on both clusters")
	}
	if strings.Contains(home, "%!") || strings.Contains(home, "0x") {
		t.Errorf("alice's home shows a number badly: %s", home[strings.Index(home, "<main"):])
	}
	_, jobs := get(t, alice, b.srv.URL+"/jobs")
	for _, want := range []string{`href="/jobs/gpu1/910101"`, `href="/jobs/gpu2/920201"`, "RUNNING", "PENDING", "llm-train"} {
		if !strings.Contains(jobs, want) {
			t.Errorf("alice's jobs lack %q", want)
		}
	}
	if strings.Contains(jobs, "910104") {
		t.Errorf("alice's jobs list shows globex's job")
	}
	resp, job := get(t, alice, b.srv.URL+"/jobs/gpu1/910102")
	if resp.StatusCode != http.StatusOK || !strings.Contains(job, "llm-eval") || !strings.Contains(job, `/confirm/cancel"`) ||
		!strings.Contains(job, "Job gpu1 910102") {
		t.Errorf("alice's pending job page: %s", resp.Status)
	}
	// A control: asked first, then done as alice, through the core.
	resp, confirm := get(t, alice, b.srv.URL+"/jobs/gpu1/910102/confirm/hold")
	if resp.StatusCode != http.StatusOK || !strings.Contains(confirm, `action="/jobs/gpu1/910102/hold"`) {
		t.Fatalf("confirm page: %s", resp.Status)
	}
	resp, _ = post(t, alice, b.srv.URL+"/jobs/gpu1/910102/hold", url.Values{}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusBadRequest || len(beds["gpu1"].Controls()) != 0 {
		t.Errorf("an unconfirmed control: %s, %d controls", resp.Status, len(beds["gpu1"].Controls()))
	}
	resp, _ = post(t, alice, b.srv.URL+"/jobs/gpu1/910102/hold", url.Values{"confirm": {"yes"}}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs/gpu1/910102?done=hold" {
		t.Errorf("hold: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if c := beds["gpu1"].Controls(); len(c) != 1 {
		t.Errorf("slurmrestd saw %d controls, want the hold", len(c))
	}
	resp, _ = post(t, alice, b.srv.URL+"/jobs/gpu1/910102/cancel", url.Values{"confirm": {"yes"}}, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden || len(beds["gpu1"].Controls()) != 1 {
		t.Errorf("a cross-site cancel: %s", resp.Status)
	}
	// alice is no operator.
	if resp, _ := get(t, alice, b.srv.URL+"/operator"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice's operator screen: %s", resp.Status)
	}

	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	paths := []string{"/", "/jobs", "/jobs?fragment=1", "/operator", "/jobs/gpu1/910101", "/jobs/gpu2/920201",
		"/jobs/gpu1/910102/confirm/cancel", "/jobs/gpu1/910104"}
	for _, p := range paths {
		resp, body := get(t, bob, b.srv.URL+p)
		for _, mark := range memMarks {
			if strings.Contains(body, mark) {
				t.Errorf("bob's %s (%s) holds alice's %q", p, resp.Status, mark)
			}
		}
		if strings.HasPrefix(p, "/jobs/gpu") && strings.Contains(p, "91010") && p != "/jobs/gpu1/910104" && resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s: %s, want 404", p, resp.Status)
		}
	}
	_, bj := get(t, bob, b.srv.URL+"/jobs")
	if !strings.Contains(bj, "910104") || !strings.Contains(bj, "920202") {
		t.Errorf("bob's jobs lack his own")
	}
	resp, body := post(t, bob, b.srv.URL+"/jobs/gpu1/910101/cancel", url.Values{"confirm": {"yes"}}, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusNotFound || len(beds["gpu1"].Controls()) != 1 {
		t.Errorf("bob cancelling alice's job: %s, %d controls", resp.Status, len(beds["gpu1"].Controls()))
	}
	for _, mark := range memMarks {
		if strings.Contains(body, mark) {
			t.Errorf("the refusal holds alice's %q", mark)
		}
	}

	// The operator of every tenant sees both clusters' queues by tenant.
	ops := b.client(t)
	b.signIn(t, ops, "ops")
	resp, op := get(t, ops, b.srv.URL+"/operator")
	if resp.StatusCode != http.StatusOK || !strings.Contains(op, "gpu1") || !strings.Contains(op, "gpu2") || !strings.Contains(op, "globex") {
		t.Errorf("ops' operator screen: %s", resp.Status)
	}
	if strings.Contains(op, i18n.For("", "").T("operator.nodes_down")) {
		t.Errorf("an empty table of nodes down is drawn")
	}
	// acme's admin sees acme alone.
	ta := b.client(t)
	b.signIn(t, ta, "tadmin")
	_, op = get(t, ta, b.srv.URL+"/operator")
	if !strings.Contains(op, "acme") || strings.Contains(op, "globex") {
		t.Errorf("acme's admin's operator screen is not acme's alone")
	}
}
