package web

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// Notices tell the open page what changed for its user: a job or a
// session that started since the page last asked, and a session near its
// end, near the portal's idle limit, or near reclaimd's next step. They
// are computed from the core's answers for the caller (Jobs, Sessions),
// so they hold nothing the caller's other pages would not.
const (
	// noticeSoon is how near an end or a step is told.
	noticeSoon = 15 * time.Minute
	// noticeRecent is how far back a start is told when the page gives
	// no time of its last poll (the page without script, a page's first
	// poll).
	noticeRecent = 15 * time.Minute
	// noticeLag widens "since the last poll" by the pollers' lag: a job
	// that started just before a poll may reach the snapshot after it.
	// The script tells each notice once, by its key.
	noticeLag = 2 * time.Minute
)

// notice is one thing to tell.
type notice struct {
	// Key names the event: the script tells each key once.
	Key string
	// Kind is job_started, session_started, session_ending, session_idle
	// or session_step.
	Kind string
	Text string
	Href string
}

var noticeOrder = []string{"job_started", "session_started", "session_ending", "session_idle", "session_step"}

// noticesOf is what to tell user: their jobs and sessions that started
// after since (less noticeLag), and their sessions whose end, idle limit
// or reclaimd's next step is within noticeSoon of now. Jobs of other
// users (a tenant admin's view) are not theirs to be told of.
func noticesOf(l i18n.L, user string, jobs []api.Job, sessions []api.Session, since, now time.Time) []notice {
	after := since.Add(-noticeLag)
	started := func(j api.Job) bool {
		return j.State == "RUNNING" && j.StartTime != nil && j.StartTime.After(after) && !j.StartTime.After(now.Add(noticeLag))
	}
	type ref struct {
		cluster string
		id      int64
	}
	byRef := map[ref]api.Job{}
	for _, j := range jobs {
		if j.User == user {
			byRef[ref{j.Cluster, j.Id}] = j
		}
	}
	var out []notice
	sessionJobs := map[ref]bool{}
	for _, s := range sessions {
		if s.JobId != nil {
			sessionJobs[ref{s.Cluster, *s.JobId}] = true
		}
		if s.EndedAt != nil || s.State != "RUNNING" {
			continue
		}
		kind := l.T("session.kind." + string(s.Server))
		if s.JobId != nil {
			if j, ok := byRef[ref{s.Cluster, *s.JobId}]; ok && started(j) {
				out = append(out, notice{Key: "session-start:" + s.Id, Kind: "session_started", Href: "/sessions",
					Text: l.T("notices.session_started", kind, s.Cluster)})
			}
		}
		if s.TimeLeftSeconds != nil && time.Duration(*s.TimeLeftSeconds)*time.Second <= noticeSoon {
			out = append(out, notice{Key: "session-end:" + s.Id, Kind: "session_ending", Href: "/sessions",
				Text: l.T("notices.session_ending", kind, s.Cluster, dur(l, *s.TimeLeftSeconds))})
		}
		if s.IdleSeconds != nil && s.IdleLimitSeconds != nil {
			if left := *s.IdleLimitSeconds - *s.IdleSeconds; time.Duration(left)*time.Second <= noticeSoon {
				out = append(out, notice{Key: "session-idle:" + s.Id, Kind: "session_idle", Href: "/sessions",
					Text: l.T("notices.session_idle", kind, s.Cluster, dur(l, left))})
			}
		}
		if n := s.ReclaimNext; n != nil && n.At.Sub(now) <= noticeSoon {
			out = append(out, notice{Key: "session-step:" + s.Id + ":" + n.Action, Kind: "session_step", Href: "/sessions",
				Text: l.T("notices.session_step", kind, s.Cluster, n.Action, dur(l, int64(max(n.At.Sub(now), 0)/time.Second)))})
		}
	}
	for _, j := range jobs {
		if j.User != user || sessionJobs[ref{j.Cluster, j.Id}] || !started(j) {
			continue
		}
		out = append(out, notice{Key: fmt.Sprintf("job-start:%s/%d", j.Cluster, j.Id), Kind: "job_started",
			Href: fmt.Sprintf("/jobs/%s/%d", j.Cluster, j.Id), Text: l.T("notices.job_started", j.Cluster, strconv.FormatInt(j.Id, 10), j.Name)})
	}
	slices.SortFunc(out, func(a, b notice) int {
		return cmp.Or(cmp.Compare(slices.Index(noticeOrder, a.Kind), slices.Index(noticeOrder, b.Kind)), cmp.Compare(a.Key, b.Key))
	})
	return out
}

type noticesData struct {
	Notices []notice
	// Since is the server's time of this answer (Unix seconds): the
	// script sends it back as the next poll's since.
	Since int64
	Error bool
}

func (h *Handler) routeNotices(mux *http.ServeMux) {
	mux.HandleFunc("GET /notices", h.signedIn(h.notices))
}

// notices answers the page of notices (without script: the starts of the
// last noticeRecent and what is near now) or, with fragment=1, the list
// alone for the script, since its last poll (since=<Unix seconds>).
func (h *Handler) notices(w http.ResponseWriter, r *http.Request, v visitor) {
	now := h.now()
	since := now.Add(-noticeRecent)
	if s, err := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64); err == nil && s > 0 {
		since = time.Unix(s, 0)
	}
	id := identityOf(v)
	d := noticesData{Since: now.Unix()}
	jobs, err := h.cfg.Source.Jobs(r.Context(), id)
	if err != nil {
		h.log.Warn("notices: jobs unavailable", "user", id.User, "error", err)
		d.Error = true
	}
	var sessions []api.Session
	if ss, ok := h.cfg.Source.(SessionSource); ok {
		if l, err := ss.Sessions(r.Context(), id); err == nil {
			sessions = l.Sessions
		} else {
			h.log.Warn("notices: sessions unavailable", "user", id.User, "error", err)
			d.Error = true
		}
	}
	d.Notices = noticesOf(v.l, id.User, jobs.Jobs, sessions, since, now)
	p := h.page(r, v, "notices.title", "notices", d)
	if r.URL.Query().Get("fragment") == "1" {
		if err := h.pages.Fragment(w, "notices", "notices_list", p); err != nil {
			h.log.Error("fragment not rendered", "error", err)
		}
		return
	}
	h.render(w, r, http.StatusOK, "notices", p)
}
