package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// TestNoticesOf: what the open page is told, by case.
func TestNoticesOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	since := now.Add(-30 * time.Second)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	secs := func(d time.Duration) *int64 { v := int64(d / time.Second); return &v }
	id := func(n int64) *int64 { return &n }
	job := func(id int64, user, state string, start *time.Time) api.Job {
		return api.Job{Cluster: "gpu1", Id: id, User: user, State: state, StartTime: start, Name: "train"}
	}
	sess := func(mod func(*api.Session)) api.Session {
		s := api.Session{Id: "s1", Cluster: "gpu1", State: "RUNNING", Server: "jupyterlab", JobId: id(7)}
		mod(&s)
		return s
	}
	for _, tc := range []struct {
		name     string
		jobs     []api.Job
		sessions []api.Session
		want     []string // keys
		text     string   // in the first notice's words
	}{
		{name: "nothing", want: nil},
		{name: "a job that started since the last poll", jobs: []api.Job{job(1, "mem", "RUNNING", at(-10*time.Second))},
			want: []string{"job-start:gpu1/1"}, text: "Job gpu1 1 (train) has started."},
		{name: "one within the pollers' lag before it", jobs: []api.Job{job(1, "mem", "RUNNING", at(-30*time.Second-noticeLag+time.Second))},
			want: []string{"job-start:gpu1/1"}},
		{name: "one long running", jobs: []api.Job{job(1, "mem", "RUNNING", at(-time.Hour))}},
		{name: "still pending", jobs: []api.Job{job(1, "mem", "PENDING", nil)}},
		{name: "started and already ended", jobs: []api.Job{job(1, "mem", "COMPLETED", at(-10*time.Second))}},
		{name: "another user's (a tenant admin's view)", jobs: []api.Job{job(1, "gmem", "RUNNING", at(-10*time.Second))}},
		{name: "a session's job is told as the session", jobs: []api.Job{job(7, "mem", "RUNNING", at(-5*time.Second))},
			sessions: []api.Session{sess(func(*api.Session) {})}, want: []string{"session-start:s1"},
			text: "Your JupyterLab session on gpu1 has started: open it from My sessions."},
		{name: "a session near its end", sessions: []api.Session{sess(func(s *api.Session) { s.TimeLeftSeconds = secs(10 * time.Minute) })},
			want: []string{"session-end:s1"}, text: "Your JupyterLab session on gpu1 ends in 10 min: extend it on My sessions."},
		{name: "a session far from its end", sessions: []api.Session{sess(func(s *api.Session) { s.TimeLeftSeconds = secs(2 * time.Hour) })}},
		{name: "near the idle limit", sessions: []api.Session{sess(func(s *api.Session) {
			s.IdleSeconds, s.IdleLimitSeconds = secs(50*time.Minute), secs(time.Hour)
		})}, want: []string{"session-idle:s1"}, text: "Your JupyterLab session on gpu1 is idle: the portal ends it in 10 min unless you use it."},
		{name: "idle, far from the limit", sessions: []api.Session{sess(func(s *api.Session) {
			s.IdleSeconds, s.IdleLimitSeconds = secs(10*time.Minute), secs(time.Hour)
		})}},
		{name: "reclaimd's step near", sessions: []api.Session{sess(func(s *api.Session) {
			s.ReclaimNext = &api.SessionReclaimNext{Action: "cancel", At: now.Add(5 * time.Minute)}
		})}, want: []string{"session-step:s1:cancel"}},
		{name: "reclaimd's step due", sessions: []api.Session{sess(func(s *api.Session) {
			s.ReclaimNext = &api.SessionReclaimNext{Action: "warn", At: now.Add(-time.Minute)}
		})}, want: []string{"session-step:s1:warn"}, text: "reclaimd's next step (warn) comes in 0 min"},
		{name: "reclaimd's step far", sessions: []api.Session{sess(func(s *api.Session) {
			s.ReclaimNext = &api.SessionReclaimNext{Action: "cancel", At: now.Add(time.Hour)}
		})}},
		{name: "an ended session tells nothing", jobs: []api.Job{job(7, "mem", "RUNNING", at(-5*time.Second))},
			sessions: []api.Session{sess(func(s *api.Session) {
				s.State, s.EndedAt, s.TimeLeftSeconds = "ENDED", at(-time.Second), secs(time.Minute)
			})}},
		{name: "a pending session tells nothing", sessions: []api.Session{sess(func(s *api.Session) { s.State, s.TimeLeftSeconds = "PENDING", secs(time.Minute) })}},
		{name: "in order: starts, then ends", jobs: []api.Job{job(2, "mem", "RUNNING", at(-time.Second)), job(1, "mem", "RUNNING", at(-time.Second))},
			sessions: []api.Session{sess(func(s *api.Session) { s.JobId = id(9); s.TimeLeftSeconds = secs(time.Minute) })},
			want:     []string{"job-start:gpu1/1", "job-start:gpu1/2", "session-end:s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := noticesOf(i18n.For("en", ""), "mem", tc.jobs, tc.sessions, since, now)
			var keys []string
			for _, n := range got {
				keys = append(keys, n.Key)
				if n.Text == "" || strings.Contains(n.Text, "%!") || !strings.HasPrefix(n.Href, "/") {
					t.Errorf("notice %+v", n)
				}
			}
			if !slices.Equal(keys, tc.want) {
				t.Errorf("keys %q, want %q", keys, tc.want)
			}
			if tc.text != "" && (len(got) == 0 || !strings.Contains(got[0].Text, tc.text)) {
				t.Errorf("notices %+v, want the first to say %q", got, tc.text)
			}
			ko := noticesOf(i18n.For("ko", ""), "mem", tc.jobs, tc.sessions, since, now)
			for i := range ko {
				if ko[i].Key != got[i].Key || ko[i].Text == got[i].Text || strings.Contains(ko[i].Text, "%!") {
					t.Errorf("Korean notice %+v beside %+v", ko[i], got[i])
				}
			}
		})
	}
}

// TestNoticesPage: /notices lists the caller's own notices (a job that
// started, with its link), in the page without script and as the
// fragment the script asks for, with the server's time to ask from next;
// another tenant's member is told nothing of them.
func TestNoticesPage(t *testing.T) {
	b, beds := coreBed(t)
	now := time.Unix(1795983872, 0)
	// mem's pending job starts, as the next poll sees it.
	jobs := slices.Clone(pagesGPU1)
	jobs[1].State, jobs[1].Reason, jobs[1].StartTime = "RUNNING", "", now.Unix()-20
	beds["gpu1"].SetJobs(jobs...)
	b.poll(t)

	alice := b.client(t)
	b.signIn(t, alice, "mem")
	resp, page := get(t, alice, b.srv.URL+"/notices")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `href="/jobs/gpu1/910102"`) || !strings.Contains(page, "Job gpu1 910102 (llm-eval) has started.") ||
		!strings.Contains(page, `class="notices-allow" hidden`) {
		t.Fatalf("alice's notices page (%s): %s", resp.Status, main(page))
	}
	_, frag := get(t, alice, b.srv.URL+"/notices?fragment=1&since="+strconv.FormatInt(now.Unix()-60, 10))
	if strings.Contains(frag, "<html") || !strings.Contains(frag, `data-key="job-start:gpu1/910102"`) ||
		!strings.Contains(frag, `data-since="`+strconv.FormatInt(now.Unix(), 10)+`"`) {
		t.Errorf("the fragment: %s", frag)
	}
	// Asked from after it started (and the pollers' lag), nothing new.
	_, frag = get(t, alice, b.srv.URL+"/notices?fragment=1&since="+strconv.FormatInt(now.Unix()+int64(noticeLag/time.Second), 10))
	if strings.Contains(frag, "910102") {
		t.Errorf("a start told again after the poll that told it: %s", frag)
	}
	// Korean.
	_, ko := get(t, alice, b.srv.URL+"/notices", "Accept-Language", "ko")
	if !strings.Contains(ko, "작업 gpu1 910102(llm-eval)이(가) 시작되었습니다.") {
		t.Errorf("alice's notices in Korean: %s", main(ko))
	}
	// Every page of hers has the live region and the link; bob's show
	// none of hers.
	_, home := get(t, alice, b.srv.URL+"/")
	if !strings.Contains(home, `id="notices-live"`) || !strings.Contains(home, `aria-live="polite"`) || !strings.Contains(home, `href="/notices"`) {
		t.Errorf("alice's home has no notices region")
	}
	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	for _, u := range []string{"/notices", "/notices?fragment=1&since=1"} {
		_, p := get(t, bob, b.srv.URL+u)
		for _, m := range memMarks {
			if strings.Contains(p, m) {
				t.Errorf("bob's %s shows alice's %s", u, m)
			}
		}
	}
	// Signed out: the sign-in page, not a notice.
	if resp, _ := get(t, b.client(t), b.srv.URL+"/notices?fragment=1"); resp.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Errorf("signed out, /notices answers %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}

// poll has the bed's pollers read their slurmrestds again.
func (b *bed) poll(t *testing.T) {
	t.Helper()
	for _, p := range b.pollers {
		if err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
