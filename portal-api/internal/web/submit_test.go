package web

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// submitBed is the pages over the real core with templates from dir and
// gpu1's job policy (gpu2 has none: it takes no submissions), over two
// replayed slurmrestds, with mem's sessions of seedSessions, and gpu1's
// bridge and reclaimd at the network edge.
func submitBed(t *testing.T, dir string) (*bed, map[string]*clustertest.Bed) {
	t.Helper()
	return submitBedWith(t, dir, pagesGPU1, pagesGPU2)
}

// submitBedWith is submitBed with the clusters' jobs given.
func submitBedWith(t *testing.T, dir string, gpu1, gpu2 []clustertest.Job) (*bed, map[string]*clustertest.Bed) {
	t.Helper()
	now := time.Unix(1795983872, 0)
	m, err := tenantmap.Load("../service/testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := jobpolicy.Load("../service/testdata/jobpolicy.json")
	if err != nil {
		t.Fatal(err)
	}
	set, err := templates.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	beds := map[string]*clustertest.Bed{}
	fb, bridge := newFakeBridge(t)
	var clusters []core.Cluster
	for _, c := range []struct {
		name, release string
		jobs          []clustertest.Job
	}{{"gpu1", "26.05", gpu1}, {"gpu2", "24.11", gpu2}} {
		b := clustertest.New(t, c.release, c.jobs...)
		// A listing of 2,000 jobs (TestBrowserWeight) takes the replay
		// long under the race detector on a busy machine.
		p := cluster.New(cluster.Config{Name: c.name, Slurm: slurmrest.Config{URL: b.URL, Tokens: slurmrest.StaticToken("t"),
			HTTPClient: &http.Client{Timeout: 5 * time.Minute}},
			Interval: time.Second, StaleAfter: time.Minute, Now: func() time.Time { return now }})
		if err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
		beds[c.name] = b
		cl := core.Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }}
		if c.name == "gpu1" {
			cl.Policy = func() *jobpolicy.Policy { return policy }
			// reclaimd's warning 90 minutes after the browser's now.
			cl.ReclaimdURL = fakeReclaimd(t, func() time.Time { return time.Now().Add(90 * time.Minute) })
			cl.Bridge = bridge
		}
		clusters = append(clusters, cl)
	}
	var c *core.Core
	b := newBed(t, func(cfg *Config) {
		c = core.New(core.Config{Clusters: clusters, Store: cfg.Store, Now: func() time.Time { return now },
			Templates: func() *templates.Set { return set }})
		cfg.Source = CoreSessionSource(c, testLauncher(&c))
	})
	seedSessions(t, b.store, now)
	b.bridge = fb
	return b, beds
}

var sameOrigin = []string{"Sec-Fetch-Site", "same-origin"}

// TestSubmitPage: alice (mem) finds the batch templates her projects may
// use; the form carries each parameter's rules; a check shows the
// policy's refusal with its line in English and Korean and submits
// nothing; a submission with bad values keeps what she typed and says
// which value is refused; a good one reaches slurmrestd as her; bob
// (gmem) cannot submit to her project, even by posting its value.
func TestSubmitPage(t *testing.T) {
	b, beds := submitBed(t, "../service/testdata/templates")
	alice := b.client(t)
	b.signIn(t, alice, "mem")

	resp, list := get(t, alice, b.srv.URL+"/submit")
	if resp.StatusCode != http.StatusOK || !strings.Contains(list, `href="/submit/small"`) {
		t.Fatalf("the template list: %s", resp.Status)
	}
	if strings.Contains(list, `href="/submit/notebook"`) {
		t.Errorf("a session template is offered as a batch job")
	}
	resp, form := get(t, alice, b.srv.URL+"/submit/small")
	for _, want := range []string{`name="p.gpus" value="1" step="1" inputmode="numeric" min="1" max="8"`, `pattern="[a-z0-9\-]{1,20}"`,
		`value="gpu1/acme-llm"`, `value="gpu2/acme-llm"`, `name="action" value="check"`, `for="p-tag"`} {
		if !strings.Contains(form, want) {
			t.Errorf("the form (%s) lacks %q", resp.Status, want)
		}
	}
	if strings.Contains(form, "globex") {
		t.Errorf("alice's form offers globex's project")
	}

	over := url.Values{"project": {"gpu1/acme-llm"}, "p.gpus": {"6"}, "p.steps": {"10"}, "p.tag": {"mine-1"}, "action": {"check"}}
	for _, lang := range []string{"en", "ko"} {
		resp, page := post(t, alice, b.srv.URL+"/submit/small", over, append(sameOrigin, "Accept-Language", lang)...)
		l := i18n.For(lang, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, html.EscapeString(l.T("submit.check.refused"))) ||
			!strings.Contains(page, "policy.yaml:52") || !strings.Contains(page, "acme-llm") {
			t.Errorf("%s: the refused check (%s) does not show the refusal and its line: %s", lang, resp.Status, main(page))
		}
		// The refusal in the page's language, from its fields: not the
		// policy's English message.
		sentence := l.T("refusal.gpus", l.T("reason.kind.account")+" acme-llm", "4", "6")
		if !strings.Contains(page, html.EscapeString(sentence)) || strings.Contains(page, "may use at most 4 GPUs") != (lang == "en") {
			t.Errorf("%s: the refused check does not say %q in its language: %s", lang, sentence, main(page))
		}
		if !strings.Contains(page, `name="p.gpus" value="6"`) || !strings.Contains(page, `value="mine-1"`) {
			t.Errorf("%s: the check lost the values given", lang)
		}
	}
	fine := url.Values{"project": {"gpu1/acme-llm"}, "p.gpus": {"2"}, "p.steps": {"10"}, "p.tag": {"mine-1"}, "action": {"check"}}
	_, page := post(t, alice, b.srv.URL+"/submit/small", fine, sameOrigin...)
	if !strings.Contains(page, html.EscapeString(i18n.For("en", "").T("submit.check.ok"))) || !strings.Contains(page, "gres/gpu:2") {
		t.Errorf("the good check: %s", main(page))
	}
	if n := len(beds["gpu1"].Submits()); n != 0 {
		t.Fatalf("a check submitted %d jobs", n)
	}

	bad := url.Values{"project": {"gpu1/acme-llm"}, "p.gpus": {"99"}, "p.steps": {"10"}, "p.tag": {"A B"}, "action": {"submit"}}
	resp, page = post(t, alice, b.srv.URL+"/submit/small", bad, sameOrigin...)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `value="A B"`) || !strings.Contains(page, `name="p.gpus" value="99"`) ||
		strings.Count(page, `aria-invalid="true"`) != 2 {
		t.Errorf("bad values (%s): the form does not keep them or mark them: %s", resp.Status, main(page))
	}
	resp, page = post(t, alice, b.srv.URL+"/submit/small", url.Values{"project": {"gpu1/acme-llm"}, "p.gpus": {"6"}, "p.steps": {"10"},
		"p.tag": {"x"}, "action": {"submit"}}, sameOrigin...)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "policy.yaml:52") ||
		!strings.Contains(page, html.EscapeString(i18n.For("en", "").T("refusal.gpus", "account acme-llm", "4", "6"))) {
		t.Errorf("an over-limit submission (%s) does not say the refusal from its fields: %s", resp.Status, main(page))
	}
	if n := len(beds["gpu1"].Submits()); n != 0 {
		t.Fatalf("refused submissions reached slurmrestd: %d", n)
	}

	fine.Set("action", "submit")
	resp, _ = post(t, alice, b.srv.URL+"/submit/small", fine, sameOrigin...)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !regexp.MustCompile(`^/submit/small\?cluster=gpu1&job=\d+$`).MatchString(loc) {
		t.Fatalf("a good submission: %s to %q", resp.Status, loc)
	}
	subs := beds["gpu1"].Submits()
	if len(subs) != 1 || subs[0].User != "mem" || !strings.Contains(string(subs[0].Body), "STRATA_PARAM_TAG=mine-1") ||
		!strings.Contains(string(subs[0].Body), `"account":"acme-llm"`) {
		t.Fatalf("slurmrestd saw %+v", subs)
	}
	_, done := get(t, alice, b.srv.URL+loc)
	if !strings.Contains(done, `href="/jobs/gpu1/`) {
		t.Errorf("the page after submitting does not link the job")
	}
	// A cross-site post submits nothing.
	resp, _ = post(t, alice, b.srv.URL+"/submit/small", fine, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden || len(beds["gpu1"].Submits()) != 1 {
		t.Errorf("a cross-site submission: %s", resp.Status)
	}

	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	_, bform := get(t, bob, b.srv.URL+"/submit/small")
	if strings.Contains(bform, "acme") {
		t.Errorf("bob's form offers acme's project")
	}
	for _, action := range []string{"check", "submit"} {
		fine.Set("action", action)
		resp, page := post(t, bob, b.srv.URL+"/submit/small", fine, sameOrigin...)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(page, "policy.yaml") || strings.Contains(page, "gres/gpu") {
			t.Errorf("bob's %s to alice's project: %s", action, resp.Status)
		}
	}
	if n := len(beds["gpu1"].Submits()); n != 1 {
		t.Errorf("bob's posts reached slurmrestd: %d submissions", n)
	}
	// And a template no project of his may use is not found.
	if resp, _ := get(t, bob, b.srv.URL+"/submit/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown template: %s", resp.Status)
	}
}

// main is a page's <main>, for a test's message.
func main(page string) string {
	if i := strings.Index(page, "<main"); i >= 0 {
		page = page[i:]
	}
	if i := strings.Index(page, "</main>"); i >= 0 {
		page = page[:i]
	}
	return page
}

// TestSubmitFormsShipped draws the form of every batch template shipped
// in etc/strata/templates, in both languages: a labelled field for each
// parameter with its rules as attributes, its help text, and every
// pattern a browser compiles (internal/templates refuses any other); a
// template's words cannot become markup.
func TestSubmitFormsShipped(t *testing.T) {
	r, err := ParseTemplates(assetsTemplates())
	if err != nil {
		t.Fatal(err)
	}
	set, err := templates.Load("../../../etc/strata/templates")
	if err != nil {
		t.Fatal(err)
	}
	c := core.New(core.Config{Templates: func() *templates.Set { return set }})
	list := c.Templates(t.Context(), auth.Identity{User: "alice"}).Templates
	hostile := api.Template{Name: "evil", Class: "batch", Type: "batch", Description: `<script>alert(1)</script>`,
		Parameters: []api.TemplateParam{{Name: "x", Type: "string", Default: ptr(`"><img src=x onerror=alert(1)>`), Pattern: ptr(`[a-z]+`),
			Description: ptr(`<b>bold</b>`)}}}
	h := &Handler{pages: r}
	batch := 0
	for _, tpl := range append(list, hostile) {
		if tpl.Type != "batch" {
			continue
		}
		batch++
		st := submitTemplate{Template: tpl, Projects: []projectChoice{{Value: "gpu1/acme-llm", Cluster: "gpu1", Tenant: "acme", Project: "llm", Account: "acme-llm"}}}
		for _, lang := range []string{"en", "ko"} {
			l := i18n.For(lang, "")
			v := visitor{l: l, sess: sessOf("alice"), lang: lang}
			rec, req := httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/submit/"+tpl.Name, nil)
			h.render(rec, req, http.StatusOK, "submit",
				h.page(req, v, "submit.title", "submit", submitData{Template: &st, Fields: fieldsOf(tpl, nil, false), Project: "gpu1/acme-llm"}))
			page := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("%s/%s: %d", tpl.Name, lang, rec.Code)
			}
			for _, p := range tpl.Parameters {
				if !strings.Contains(page, `<label for="p-`+p.Name+`">`) || !strings.Contains(page, `id="p-`+p.Name+`"`) {
					t.Errorf("%s/%s: parameter %s has no labelled field", tpl.Name, lang, p.Name)
				}
				if p.Description != nil && !strings.Contains(page, html.EscapeString(*p.Description)) {
					t.Errorf("%s/%s: parameter %s's help is not shown", tpl.Name, lang, p.Name)
				}
				if p.Min != nil && p.Type == "integer" && !strings.Contains(page, `min="`+strconv.FormatInt(*p.Min, 10)+`"`) {
					t.Errorf("%s/%s: parameter %s's min is not an attribute", tpl.Name, lang, p.Name)
				}
				if p.Pattern != nil {
					// As the browser reads the attribute: entities decoded.
					m := regexp.MustCompile(`id="p-` + p.Name + `"[^>]* pattern="([^"]*)"`).FindStringSubmatch(page)
					if m == nil || html.UnescapeString(m[1]) != *p.Pattern {
						t.Errorf("%s/%s: parameter %s's pattern is not its attribute: %q", tpl.Name, lang, p.Name, m)
					}
				}
				if p.Values != nil {
					for _, c := range *p.Values {
						if !strings.Contains(page, `<option value="`+c+`"`) {
							t.Errorf("%s/%s: parameter %s's choice %s is missing", tpl.Name, lang, p.Name, c)
						}
					}
				}
				if p.Required && !regexp.MustCompile(`id="p-`+p.Name+`"[^>]*required`).MatchString(page) {
					t.Errorf("%s/%s: required parameter %s is not required", tpl.Name, lang, p.Name)
				}
			}
			if !strings.Contains(page, l.T("submit.check")) || strings.Contains(page, "%!") {
				t.Errorf("%s/%s: the check button or a message is wrong", tpl.Name, lang)
			}
			if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") || strings.Contains(page, "<b>bold") {
				t.Errorf("%s/%s: a template's words became markup", tpl.Name, lang)
			}
		}
	}
	if batch < 5 {
		t.Errorf("only %d batch templates drawn: the shipped ones are not all there", batch)
	}
}
