package web

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/service"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// apiBed is the portal as serve runs it: the JSON API (internal/service)
// and the pages over its one core, on one TLS listener, over two
// replayed slurmrestds.
type apiBed struct {
	*bed
	beds map[string]*clustertest.Bed
}

func newAPIBed(t *testing.T) *apiBed {
	t.Helper()
	now := time.Unix(1795983872, 0)
	m, err := tenantmap.Load("../service/testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	beds := map[string]*clustertest.Bed{}
	var clusters []core.Cluster
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
		clusters = append(clusters, core.Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }})
	}
	srv := service.New(service.Config{Clusters: clusters, Store: st, Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}),
		RatePerSecond: 1e6, Burst: 1e6, Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	h, err := New(Config{Store: st, IdleTimeout: time.Hour, MaxAge: 8 * time.Hour, Source: CoreSource(srv.Core())})
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{store: st, h: h}
	b.srv = newTLSServer(t, Mount(srv, h, ""))
	return &apiBed{bed: b, beds: beds}
}

// screenNumbers are the numbers of the operator screen, read from its
// HTML: by section ("*" the total, else the cluster), then by name
// ("running", or "acme/running" in a tenant's row).
func screenNumbers(t *testing.T, page string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	num := regexp.MustCompile(`data-n="([a-z_]+)">(?:<a [^>]*>)?(\d+)`)
	tenantRow := regexp.MustCompile(`(?s)<tr data-tenant="([^"]+)">(.*?)</tr>`)
	for _, sec := range strings.Split(page, "<section ")[1:] {
		m := regexp.MustCompile(`data-cluster="([^"]+)"`).FindStringSubmatch(sec)
		if m == nil {
			continue
		}
		nums := map[string]int{}
		rows := tenantRow.FindAllStringSubmatch(sec, -1)
		for _, r := range rows {
			for _, n := range num.FindAllStringSubmatch(r[2], -1) {
				v, _ := strconv.Atoi(n[2])
				nums[r[1]+"/"+n[1]] = v
			}
		}
		rest := tenantRow.ReplaceAllString(sec, "")
		for _, n := range num.FindAllStringSubmatch(rest, -1) {
			v, _ := strconv.Atoi(n[2])
			nums[n[1]] = v
		}
		out[m[1]] = nums
	}
	return out
}

// overviewNumbers are the same numbers from GET /v1/overview's answer.
func overviewNumbers(ov api.Overview) map[string]map[string]int {
	out := map[string]map[string]int{}
	total := map[string]int{}
	add := func(nums map[string]int, k string, v int) {
		nums[k] = v
		total[k] += v
	}
	for _, c := range ov.Clusters {
		nums := map[string]int{}
		if c.GpusTotal != nil {
			add(nums, "gpus_total", *c.GpusTotal)
		}
		add(nums, "gpus_allocated", c.GpusAllocated)
		add(nums, "running", c.Running)
		add(nums, "pending", c.Pending)
		if c.GpuUse != nil {
			add(nums, "in_use", c.GpuUse.InUse)
			add(nums, "idle", c.GpuUse.Idle)
		}
		if c.Deployments != nil {
			add(nums, "deployments", *c.Deployments)
		}
		if c.Replicas != nil {
			nums["replicas"] = *c.Replicas
		}
		for _, tn := range c.Tenants {
			nums[tn.Tenant+"/running"] = tn.Running
			nums[tn.Tenant+"/pending"] = tn.Pending
			nums[tn.Tenant+"/gpus_allocated"] = tn.GpusAllocated
			if tn.Deployments != nil {
				nums[tn.Tenant+"/deployments"] = *tn.Deployments
			}
		}
		out[c.Cluster] = nums
	}
	out["*"] = total
	return out
}

// TestOperatorMatchesOverview: the operator screen shows exactly the
// numbers GET /v1/overview answers the same caller at the same moment,
// per cluster, per tenant and in all, for the cluster admin and for a
// tenant's admin (their tenant alone); each number links to the list
// behind it, and that list holds as many jobs as the number says.
func TestOperatorMatchesOverview(t *testing.T) {
	b := newAPIBed(t)
	for _, user := range []string{"ops", "tadmin"} {
		t.Run(user, func(t *testing.T) {
			tok, _, err := b.store.CreateToken(t.Context(), user, "", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			c := b.client(t)
			b.signIn(t, c, user)
			resp, body := get(t, c, b.srv.URL+"/v1/overview", "Authorization", "Bearer "+tok)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /v1/overview as %s: %s %s", user, resp.Status, body)
			}
			var ov api.Overview
			dec := json.NewDecoder(strings.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ov); err != nil {
				t.Fatal(err)
			}
			resp, page := get(t, c, b.srv.URL+"/operator")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the operator screen: %s", resp.Status)
			}
			got, want := screenNumbers(t, page), overviewNumbers(ov)
			if len(got) != len(want) {
				t.Errorf("the screen has sections %v, the API clusters %v (and the total)", keys(got), keys(want))
			}
			for sec, nums := range want {
				for k, v := range nums {
					if g, ok := got[sec][k]; !ok || g != v {
						t.Errorf("%s %s: the screen shows %d (shown %v), the API says %d", sec, k, g, ok, v)
					}
				}
				for k := range got[sec] {
					if _, ok := nums[k]; !ok {
						t.Errorf("%s %s: the screen shows a number the API does not have", sec, k)
					}
				}
			}
			if user == "tadmin" && (strings.Contains(page, "globex") || !strings.Contains(page, "acme")) {
				t.Errorf("acme's admin's screen is not acme's alone")
			}
			// The list behind a number holds that many jobs.
			for _, cl := range ov.Clusters {
				for _, st := range []struct {
					state string
					n     int
				}{{"RUNNING", cl.Running}, {"PENDING", cl.Pending}} {
					link := "/operator/jobs?cluster=" + cl.Cluster + "&state=" + st.state
					if !strings.Contains(page, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`) {
						t.Errorf("%s's %s number links no list", cl.Cluster, st.state)
					}
					_, list := get(t, c, b.srv.URL+link)
					if n := strings.Count(list, `<a href="/jobs/`+cl.Cluster+`/`); n != st.n {
						t.Errorf("%s: %d jobs listed, the number says %d", link, n, st.n)
					}
				}
			}
		})
	}
	// A member is no operator: nor of the lists behind the numbers.
	mem := b.client(t)
	b.signIn(t, mem, "mem")
	for _, p := range []string{"/operator", "/operator/jobs?cluster=gpu1", "/operator/nodes/gpu1"} {
		if resp, _ := get(t, mem, b.srv.URL+p); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a member's %s: %s", p, resp.Status)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestNodeDrainResume: the cluster admin drains a node with a reason,
// asked first on a page of its own, and the drain reaches slurmrestd as
// them with the reason, audited by the core; a drain without a reason,
// or by a tenant's admin, reaches nothing.
func TestNodeDrainResume(t *testing.T) {
	b := newAPIBed(t)
	ops := b.client(t)
	b.signIn(t, ops, "ops")
	resp, nodes := get(t, ops, b.srv.URL+"/operator/nodes/gpu1")
	m := regexp.MustCompile(`href="/operator/nodes/gpu1/([^/"]+)/confirm/drain"`).FindStringSubmatch(nodes)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the nodes page (%s) offers no drain: %s", resp.Status, main(nodes))
	}
	node := m[1]
	resp, confirm := get(t, ops, b.srv.URL+"/operator/nodes/gpu1/"+node+"/confirm/drain")
	if resp.StatusCode != http.StatusOK || !strings.Contains(confirm, `action="/operator/nodes/gpu1/`+node+`/drain"`) || !strings.Contains(confirm, `name="reason" required`) {
		t.Fatalf("the drain's confirmation: %s", resp.Status)
	}
	action := b.srv.URL + "/operator/nodes/gpu1/" + node + "/drain"
	for name, form := range map[string]url.Values{"unconfirmed": {"reason": {"fan"}}, "no reason": {"confirm": {"yes"}, "reason": {"  "}}} {
		if resp, _ := post(t, ops, action, form, sameOrigin...); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s drain: %s", name, resp.Status)
		}
	}
	if n := len(b.beds["gpu1"].Controls()); n != 0 {
		t.Fatalf("refused drains reached slurmrestd: %d", n)
	}
	ta := b.client(t)
	b.signIn(t, ta, "tadmin")
	if resp, _ := post(t, ta, action, url.Values{"confirm": {"yes"}, "reason": {"fan"}}, sameOrigin...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant admin's drain: %s", resp.Status)
	}
	if resp, _ := post(t, ops, action, url.Values{"confirm": {"yes"}, "reason": {"fan"}}, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site drain: %s", resp.Status)
	}
	if n := len(b.beds["gpu1"].Controls()); n != 0 {
		t.Fatalf("refused drains reached slurmrestd: %d", n)
	}
	resp, _ = post(t, ops, action, url.Values{"confirm": {"yes"}, "reason": {"fan failing on slot 3"}}, sameOrigin...)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/operator/nodes/gpu1?done=drain&node="+node {
		t.Fatalf("the drain: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	ctl := b.beds["gpu1"].Controls()
	if len(ctl) != 1 || ctl[0].User != "ops" || !strings.Contains(string(ctl[0].Body), "strata: fan failing on slot 3") || !strings.Contains(string(ctl[0].Body), "DRAIN") {
		t.Fatalf("slurmrestd saw %+v", ctl)
	}
	log, _ := b.store.AuditLog(t.Context(), 10)
	// Newest first: the drain, then the tenant admin's, refused by the
	// core and audited as such (the cross-site one never reached it).
	if len(log) != 2 || log[0].Action != "drain" || log[0].Target != node || log[0].User != "ops" || log[0].Result != "ok" ||
		log[1].User != "tadmin" || log[1].Result != "refused" {
		t.Errorf("the audit log: %+v", log)
	}
	resp, _ = post(t, ops, b.srv.URL+"/operator/nodes/gpu1/"+node+"/resume", url.Values{"confirm": {"yes"}, "reason": {"fan replaced"}}, sameOrigin...)
	if resp.StatusCode != http.StatusSeeOther || len(b.beds["gpu1"].Controls()) != 2 {
		t.Errorf("the resume: %s", resp.Status)
	}
}

func newTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestOperatorJobsPages: a list longer than its page says which rows it
// shows of how many and links the pages beside it; walking the next
// links one job a page gives every job of the whole list once, in its
// order; a page past the end says so and links the first; and a limit
// or offset that is no number is the default page.
func TestOperatorJobsPages(t *testing.T) {
	b := newAPIBed(t)
	ops := b.client(t)
	b.signIn(t, ops, "ops")
	jobLink := regexp.MustCompile(`<a href="/jobs/gpu1/(\d+)">`)
	_, whole := get(t, ops, b.srv.URL+"/operator/jobs?cluster=gpu1")
	var all []string
	for _, m := range jobLink.FindAllStringSubmatch(whole, -1) {
		all = append(all, m[1])
	}
	if len(all) < 3 {
		t.Fatalf("the bed's gpu1 has %d jobs: three or more are needed", len(all))
	}
	if strings.Contains(whole, `class="pager"`) {
		t.Errorf("a list that fits one page has pages")
	}
	var walked []string
	next := "/operator/jobs?cluster=gpu1&limit=1"
	for i := 0; next != ""; i++ {
		if i > len(all) {
			t.Fatalf("more pages than jobs: at %s", next)
		}
		resp, page := get(t, ops, b.srv.URL+next)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", next, resp.Status)
		}
		for _, m := range jobLink.FindAllStringSubmatch(page, -1) {
			walked = append(walked, m[1])
		}
		if want := fmt.Sprintf("Jobs %d to %d of %d", i+1, i+1, len(all)); !strings.Contains(page, want) {
			t.Errorf("%s does not say %q", next, want)
		}
		if prev := strings.Contains(page, `rel="prev"`); prev != (i > 0) {
			t.Errorf("%s: a link to the previous page is %v", next, prev)
		}
		next = ""
		if m := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(page); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if !slices.Equal(walked, all) {
		t.Errorf("the pages one job each give %v, the whole list %v", walked, all)
	}
	_, past := get(t, ops, b.srv.URL+"/operator/jobs?cluster=gpu1&offset=100000")
	if jobLink.MatchString(past) || !strings.Contains(past, fmt.Sprintf("past the last of the %d jobs", len(all))) ||
		!strings.Contains(past, `href="/operator/jobs?cluster=gpu1"`) {
		t.Errorf("a page past the end: %s", main(past))
	}
	_, odd := get(t, ops, b.srv.URL+"/operator/jobs?cluster=gpu1&limit=x&offset=-3")
	if n := len(jobLink.FindAllString(odd, -1)); n != len(all) {
		t.Errorf("limit=x&offset=-3 lists %d jobs, want the default page's %d", n, len(all))
	}
}
