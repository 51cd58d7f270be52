package web

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// sessionsBed is the pages over a core with mem's JupyterLab session on
// gpu1 (its job 910101 running) and her terminal that ended; the
// launcher answers a fixed URL on a sessions host for the owner alone.
func sessionsBed(t *testing.T) *bed {
	t.Helper()
	now := time.Unix(1795983872, 0)
	m, err := tenantmap.Load("../service/testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	b := clustertest.New(t, "26.05", pagesGPU1...)
	p := cluster.New(cluster.Config{Name: "gpu1", Slurm: slurmrest.Config{URL: b.URL, Tokens: slurmrest.StaticToken("t")},
		Interval: time.Second, StaleAfter: time.Minute, Now: func() time.Time { return now }})
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	set, err := templates.Load("../../../etc/strata/templates")
	if err != nil {
		t.Fatal(err)
	}
	var c *core.Core
	bd := newBed(t, func(cfg *Config) {
		c = core.New(core.Config{Clusters: []core.Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m }, SessionIdleLimit: time.Hour,
			ReclaimdURL: fakeReclaimd(t, func() time.Time { return now.Add(90 * time.Minute) })}},
			Store: cfg.Store, Now: func() time.Time { return now }, Templates: func() *templates.Set { return set }})
		cfg.Source = CoreSessionSource(c, testLauncher(&c))
	})
	seedSessions(t, bd.store, now)
	return bd
}

// TestSessionStartForm: a session template's typed parameters make its
// form as they make Start a job's (rules as the inputs' attributes,
// defaults as values); a value out of its range is refused by the core's
// checks, kept and marked, and starts nothing; a good value reaches
// slurmrestd in the session's job, as mem, on the project chosen; gmem
// cannot start one on mem's project, even by posting its value.
func TestSessionStartForm(t *testing.T) {
	b, beds := submitBed(t, "../service/testdata/templates")
	alice := b.client(t)
	b.signIn(t, alice, "mem")
	_, list := get(t, alice, b.srv.URL+"/sessions")
	for _, want := range []string{`href="/sessions/gpunotebook/start"`, `href="/sessions/notebook/start"`} {
		if !strings.Contains(list, want) {
			t.Errorf("the sessions page lacks %q", want)
		}
	}
	if strings.Contains(list, `/sessions/small/start"`) {
		t.Errorf("the sessions page offers a batch template")
	}
	for _, lang := range []string{"en", "ko"} {
		resp, form := get(t, alice, b.srv.URL+"/sessions/gpunotebook/start", "Accept-Language", lang)
		for _, want := range []string{`action="/sessions/gpunotebook/start"`, `name="p.gpus" value="1" step="1" inputmode="numeric" min="1" max="2"`,
			`value="gpu1/acme-llm"`, `name="action" value="start"`, html.EscapeString(i18n.For(lang, "").T("session.start.named", "gpunotebook"))} {
			if !strings.Contains(form, want) {
				t.Errorf("%s: the session form (%s) lacks %q", lang, resp.Status, want)
			}
		}
		if strings.Contains(form, `value="check"`) || strings.Contains(form, "%!") {
			t.Errorf("%s: the session form offers a policy check or a badly formatted word", lang)
		}
	}
	bad := url.Values{"project": {"gpu1/acme-llm"}, "p.gpus": {"3"}, "action": {"start"}}
	resp, page := post(t, alice, b.srv.URL+"/sessions/gpunotebook/start", bad, sameOrigin...)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `name="p.gpus" value="3"`) || strings.Count(page, `aria-invalid="true"`) != 1 {
		t.Errorf("gpus 3 of at most 2 (%s): not refused beside its field: %s", resp.Status, main(page))
	}
	if n := len(beds["gpu1"].Submits()); n != 0 {
		t.Fatalf("a refused start submitted %d jobs", n)
	}
	good := url.Values{"project": {"gpu1/acme-llm"}, "p.gpus": {"2"}, "action": {"start"}}
	resp, _ = post(t, alice, b.srv.URL+"/sessions/gpunotebook/start", good, sameOrigin...)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sessions?done=start" {
		t.Fatalf("a good start: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	subs := beds["gpu1"].Submits()
	if len(subs) != 1 || subs[0].User != "mem" || !strings.Contains(string(subs[0].Body), "gpu:2") ||
		!strings.Contains(string(subs[0].Body), `"account":"acme-llm"`) || !strings.Contains(string(subs[0].Body), "STRATA_SESSION_ID=") {
		t.Fatalf("slurmrestd saw %+v", subs)
	}
	if got, _ := b.store.Sessions(t.Context(), "mem", time.Time{}); len(got) != 3 {
		t.Errorf("mem has %d sessions after a start, want 3", len(got))
	}

	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	resp, page = post(t, bob, b.srv.URL+"/sessions/gpunotebook/start", good, sameOrigin...)
	if resp.StatusCode != http.StatusNotFound || len(beds["gpu1"].Submits()) != 1 || strings.Contains(page, `value="gpu1/acme-llm"`) {
		t.Errorf("gmem starting a session on mem's project: %s, %d submissions", resp.Status, len(beds["gpu1"].Submits()))
	}
}

// TestSessionsPage: mem's sessions as cards in English and Korean, the
// ended one with its reason; opening one leads to its launch URL on the
// sessions' origin, only from the pages themselves; ending one is asked
// first; gmem finds none of hers by list, address, open, extend or end.
func TestSessionsPage(t *testing.T) {
	b := sessionsBed(t)
	alice := b.client(t)
	b.signIn(t, alice, "mem")
	const s1, s2 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	// reclaimd's warning, 90 minutes off if the GPUs stay idle: counted
	// down by the server, kept current by the script.
	warnAt := time.Unix(1795983872, 0).Add(90 * time.Minute).UTC().Format(time.RFC3339)
	countdown := `<time datetime="` + warnAt + `"`
	for lang, want := range map[string][]string{
		"en": {"My sessions", "JupyterLab", "Terminal", "Open in a new tab", "End session", "idle for 1h, the portal&#39;s idle limit", "Extend",
			"If it stays idle", "reclaimd warns you in " + countdown, `data-hm="{h} h {m} min"`, ">1 h 30 min</time>."},
		"ko": {"내 세션", "JupyterLab", "터미널", "새 탭에서 열기", "세션 종료", "연장",
			"유휴 상태가 계속되면", countdown, `data-hm="{h}시간 {m}분"`, ">1시간 30분</time> 후 reclaimd가 경고합니다."},
	} {
		resp, page := get(t, alice, b.srv.URL+"/sessions", "Accept-Language", lang)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: /sessions = %s", lang, resp.Status)
		}
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: the sessions page lacks %q", lang, w)
			}
		}
		if strings.Contains(page, "%!") {
			t.Errorf("%s: a word badly formatted: %s", lang, page[strings.Index(page, "<main"):])
		}
	}
	_, page := get(t, alice, b.srv.URL+"/sessions")
	if !strings.Contains(page, `href="/sessions/`+s1+`/open"`) || strings.Contains(page, `/sessions/`+s2+`/open`) ||
		strings.Contains(page, `action="/sessions/`+s2+`/extend"`) {
		t.Errorf("open and extend are on the running session only: %s", page[strings.Index(page, "<main"):])
	}
	// Start: the session templates of the shipped set, each from its
	// own form; a template that is not one has no form and starts nothing.
	if !strings.Contains(page, `href="/sessions/jupyterlab/start"`) || strings.Contains(page, `/sessions/ddp-train/start`) {
		t.Errorf("the sessions page does not offer the session templates alone")
	}
	if resp, _ := post(t, alice, b.srv.URL+"/sessions/ddp-train/start", url.Values{"project": {"gpu1/acme-llm"}}, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a batch template started as a session: %s", resp.Status)
	}
	if got, _ := b.store.Sessions(t.Context(), "mem", time.Time{}); len(got) != 2 {
		t.Errorf("a refused start left %d sessions, want the 2 there were", len(got))
	}
	resp, _ := get(t, alice, b.srv.URL+"/sessions/"+s1+"/open", "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "https://"+s1+".sessions.portal.test/v1/sessions/"+s1+"/launch?t=x" {
		t.Errorf("open: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, alice, b.srv.URL+"/sessions/"+s1+"/open", "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("open from another site: %s", resp.Status)
	}
	resp, confirm := get(t, alice, b.srv.URL+"/sessions/"+s1+"/confirm/end")
	if resp.StatusCode != http.StatusOK || !strings.Contains(confirm, `action="/sessions/`+s1+`/end"`) {
		t.Errorf("confirm end: %s", resp.Status)
	}
	if resp, _ := post(t, alice, b.srv.URL+"/sessions/"+s1+"/end", url.Values{}, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an end not confirmed: %s", resp.Status)
	}
	if resp, _ := post(t, alice, b.srv.URL+"/sessions/"+s1+"/extend", url.Values{"minutes": {"0"}}, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an extension of 0 minutes: %s", resp.Status)
	}
	if resp, _ := post(t, alice, b.srv.URL+"/sessions/"+s1+"/end", url.Values{"confirm": {"yes"}}, "Origin", "https://"+s1+".sessions.portal.test"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an end posted from the session's origin: %s", resp.Status)
	}

	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	_, list := get(t, bob, b.srv.URL+"/sessions")
	for _, mark := range []string{s1, s2, `class="card" aria-labelledby`, "idle for 1h"} {
		if strings.Contains(list, mark) {
			t.Errorf("bob's sessions page shows %q", mark)
		}
	}
	for _, u := range []string{"/sessions/" + s1 + "/open", "/sessions/" + s1 + "/confirm/end"} {
		if resp, body := get(t, bob, b.srv.URL+u, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusNotFound || strings.Contains(body, s1+".sessions") {
			t.Errorf("bob GET %s: %s", u, resp.Status)
		}
	}
	for _, f := range []struct {
		path string
		v    url.Values
	}{{"/sessions/" + s1 + "/end", url.Values{"confirm": {"yes"}}}, {"/sessions/" + s1 + "/extend", url.Values{"minutes": {"60"}}}} {
		if resp, _ := post(t, bob, b.srv.URL+f.path, f.v, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob POST %s: %s", f.path, resp.Status)
		}
	}
	if rec, _ := b.store.GetSession(t.Context(), s1); !rec.Ended.IsZero() {
		t.Errorf("bob's requests ended alice's session")
	}
}

// fakeReclaimd is reclaimd's API at the network edge: for job 910101
// (mem's JupyterLab session's, with GPUs), no decision yet and its next
// step if it stays idle, a warning at at(); no record of any other job.
func fakeReclaimd(t *testing.T, at func() time.Time) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1/jobs/910101/reclaim" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error": "no record"}`)
			return
		}
		fmt.Fprintf(w, `{"job_id": 910101, "upcoming": {"action": "warn", "at": %q}, "decisions": []}`, at().UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// testLauncher answers a fixed launch URL on a per-session host, for the
// session's owner alone.
func testLauncher(c **core.Core) Launcher {
	return func(r *http.Request, who auth.Identity, id string) (string, *core.Problem) {
		if _, p := (*c).SessionOwned(r.Context(), who, id); p != nil {
			return "", p
		}
		return "https://" + id + ".sessions.portal.test/v1/sessions/" + id + "/launch?t=x", nil
	}
}

// seedSessions gives mem a JupyterLab session on gpu1 (job 910101,
// running) and a terminal that ended at the portal's idle limit.
func seedSessions(t *testing.T, st *store.Store, now time.Time) {
	t.Helper()
	for _, s := range []store.Session{
		{ID: testSession, User: "mem", Cluster: "gpu1", JobID: 910101, Template: "jupyterlab", Server: "jupyterlab",
			Account: "acme-llm", Dir: "/tmp/s1", IdleLimit: time.Hour},
		{ID: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", User: "mem", Cluster: "gpu1", JobID: 910099, Template: "terminal", Server: "ttyd",
			Account: "acme-llm", Dir: "/tmp/s2"},
	} {
		if err := st.CreateSession(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		if err := st.SetSessionJob(t.Context(), s.ID, s.JobID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.EndSession(t.Context(), "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "idle for 1h, the portal's idle limit", now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// testSession is mem's running session in the pages' test beds.
const testSession = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
