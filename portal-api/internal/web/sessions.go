package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// SessionSource is what the sessions page asks of the core beside
// Source: the caller's own sessions and their controls, and the launch
// URL that opens one on the sessions' origin.
type SessionSource interface {
	Sessions(ctx context.Context, id auth.Identity) (api.SessionList, error)
	Session(ctx context.Context, id auth.Identity, session string) (api.Session, error)
	ExtendSession(ctx context.Context, id auth.Identity, session string, minutes int) error
	EndSession(ctx context.Context, id auth.Identity, session string) error
	LaunchURL(r *http.Request, id auth.Identity, session string) (string, error)
	// StartSession starts a session of a session template, on the
	// request's cluster and project, with its parameters.
	StartSession(ctx context.Context, id auth.Identity, req api.SubmissionRequest) error
}

// Launcher makes a session's launch URL on the sessions' origin (the
// service's SessionLaunchURL).
type Launcher func(r *http.Request, who auth.Identity, id string) (string, *core.Problem)

// CoreSessionSource is CoreSource with the sessions page's calls: the
// core's, as the caller, and launch for opening a session.
func CoreSessionSource(c *core.Core, launch Launcher) Source {
	return sessionCore{coreSource: coreSource{c: c}, launch: launch}
}

type sessionCore struct {
	coreSource
	launch Launcher
}

func (s sessionCore) Sessions(ctx context.Context, id auth.Identity) (api.SessionList, error) {
	l, p := s.c.Sessions(ctx, id)
	return l, errOf(p)
}

func (s sessionCore) Session(ctx context.Context, id auth.Identity, session string) (api.Session, error) {
	v, p := s.c.Session(ctx, id, session)
	return v, errOf(p)
}

func (s sessionCore) ExtendSession(ctx context.Context, id auth.Identity, session string, minutes int) error {
	_, p := s.c.ExtendSession(ctx, id, session, minutes)
	return errOf(p)
}

func (s sessionCore) EndSession(ctx context.Context, id auth.Identity, session string) error {
	_, p := s.c.EndSession(ctx, id, session)
	return errOf(p)
}

func (s sessionCore) LaunchURL(r *http.Request, id auth.Identity, session string) (string, error) {
	if s.launch == nil {
		return "", &core.Problem{Status: http.StatusNotImplemented, Code: api.Unavailable, Message: "no session origin"}
	}
	u, p := s.launch(r, id, session)
	return u, errOf(p)
}

func (s sessionCore) StartSession(ctx context.Context, id auth.Identity, req api.SubmissionRequest) error {
	_, p := s.c.CreateSession(ctx, id, req)
	return errOf(p)
}

func (h *Handler) routeSessions(mux *http.ServeMux) {
	mux.HandleFunc("GET /sessions/{template}/start", h.signedIn(h.sessionForm))
	mux.HandleFunc("POST /sessions/{template}/start", h.signedIn(h.sessionStart))
	mux.HandleFunc("GET /sessions", h.signedIn(h.sessionsPage))
	mux.HandleFunc("GET /sessions/{id}/confirm/end", h.signedIn(h.sessionConfirm))
	mux.HandleFunc("POST /sessions/{id}/end", h.signedIn(h.sessionEnd))
	mux.HandleFunc("POST /sessions/{id}/extend", h.signedIn(h.sessionExtend))
	mux.HandleFunc("GET /sessions/{id}/open", h.signedIn(h.sessionOpen))
}

// sessionCard is a session as its card shows it, its words in the page's
// language.
type sessionCard struct {
	S        api.Session
	Kind     string // the catalogue's key of its server kind
	Open     bool   // running: it can be opened
	Ended    bool
	TimeLeft string
	Idle     string // idle for so long, of the limit (the portal's judge)
	IdleLeft string // until the portal's idle limit ends it
	Reclaim  string // reclaimd's latest word (sessions with GPUs)
	Why      string // a pending session's reason
	// Next is reclaimd's next step if the session's GPUs stay idle.
	Next *nextStep
}

// nextStep is reclaimd's next step on a session, as its card says it:
// the sentence around a countdown (Before, the countdown, After), the
// step's time, and the countdown's formats for the script that keeps it
// current (countdown.js).
type nextStep struct {
	Before, After string
	At            string // RFC 3339, for <time datetime>
	AtText        string // the time, as the page shows it
	Left          string // the countdown now, as the server sees it
	FormatHM      string // "{h} h {m} min" in the page's language
	FormatM       string // "{m} min"
	Due           string // the words once the time has come
}

// nextActions are the steps whose sentence the catalogue holds
// ("session.next.<action>").
var nextActions = []string{"warn", "notify", "signal", "requeue", "requeue-hold", "cancel"}

// nextOf is reclaimd's next step in the page's language; nil for none.
func nextOf(l i18n.L, n *api.SessionReclaimNext, now time.Time) *nextStep {
	if n == nil {
		return nil
	}
	key := "session.next.other"
	if slices.Contains(nextActions, n.Action) {
		key = "session.next." + strings.ReplaceAll(n.Action, "-", "_")
	}
	const mark = "\x00"
	var sentence string
	if key == "session.next.other" {
		sentence = l.T(key, n.Action, mark)
	} else {
		sentence = l.T(key, mark)
	}
	before, after, _ := strings.Cut(sentence, mark)
	left := l.T("session.next.due")
	if d := n.At.Sub(now); d > 0 {
		left = dur(l, int64(d/time.Second))
	}
	return &nextStep{Before: before, After: after, At: n.At.UTC().Format(time.RFC3339), AtText: n.At.UTC().Format("2006-01-02 15:04 UTC"),
		Left: left, FormatHM: l.T("session.hm", "{h}", "{m}"), FormatM: l.T("session.m", "{m}"), Due: l.T("session.next.due")}
}

type sessionsData struct {
	// Templates are the session templates the caller's projects may
	// start, each started from its own form.
	Templates []submitTemplate
	Cards     []sessionCard
	Error     bool
	Done      string
}

func dur(l i18n.L, secs int64) string {
	d := time.Duration(max(secs, 0)) * time.Second
	h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
	if h > 0 {
		return l.T("session.hm", strconv.FormatInt(h, 10), strconv.FormatInt(m, 10))
	}
	return l.T("session.m", strconv.FormatInt(m, 10))
}

func cardOf(l i18n.L, s api.Session, now time.Time) sessionCard {
	c := sessionCard{S: s, Kind: "session.kind." + string(s.Server), Ended: s.EndedAt != nil || s.State == "ENDED"}
	c.Open = !c.Ended && s.State == "RUNNING" // not yet ready: the proxy says it is starting
	if s.TimeLeftSeconds != nil && !c.Ended {
		c.TimeLeft = dur(l, *s.TimeLeftSeconds)
	}
	if s.IdleSeconds != nil && s.IdleLimitSeconds != nil && !c.Ended {
		c.Idle = l.T("session.idle_of", dur(l, *s.IdleSeconds), dur(l, *s.IdleLimitSeconds))
		c.IdleLeft = dur(l, *s.IdleLimitSeconds-*s.IdleSeconds)
	}
	if s.Reclaim != nil && !c.Ended {
		c.Reclaim = s.Reclaim.Action + ": " + s.Reclaim.Reason
	}
	if s.State == "PENDING" {
		c.Why = why(l, s.Reason)
	}
	if !c.Ended {
		c.Next = nextOf(l, s.ReclaimNext, now)
	}
	return c
}

func (h *Handler) sessionSource(w http.ResponseWriter, r *http.Request) (SessionSource, bool) {
	ss, ok := h.cfg.Source.(SessionSource)
	if !ok {
		h.problem(w, r, http.StatusNotImplemented, "error.unavailable.title", "session.unavailable")
	}
	return ss, ok
}

func (h *Handler) sessionsPage(w http.ResponseWriter, r *http.Request, v visitor) {
	ss, ok := h.sessionSource(w, r)
	if !ok {
		return
	}
	list, err := ss.Sessions(r.Context(), identityOf(v))
	d := sessionsData{Error: err != nil}
	var terr error
	if d.Templates, terr = h.templatesOf(r, v, "session"); terr != nil {
		h.log.Warn("sessions: templates unavailable", "user", v.sess.User, "error", terr)
		d.Error = true
	}
	switch r.URL.Query().Get("done") {
	case "end", "extend", "start":
		d.Done = "session.done." + r.URL.Query().Get("done")
	}
	for _, s := range list.Sessions {
		d.Cards = append(d.Cards, cardOf(v.l, s, h.now()))
	}
	h.render(w, r, http.StatusOK, "sessions", h.page(r, v, "session.title", "sessions", d))
}

// sessionOf is the caller's session of the path, or the page of a session
// that is not there (another user's is the same "not found").
func (h *Handler) sessionOf(w http.ResponseWriter, r *http.Request, v visitor) (SessionSource, api.Session, bool) {
	ss, ok := h.sessionSource(w, r)
	if !ok {
		return nil, api.Session{}, false
	}
	s, err := ss.Session(r.Context(), identityOf(v), r.PathValue("id"))
	if err != nil {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return nil, api.Session{}, false
	}
	return ss, s, true
}

func (h *Handler) sessionConfirm(w http.ResponseWriter, r *http.Request, v visitor) {
	if _, s, ok := h.sessionOf(w, r, v); ok {
		h.render(w, r, http.StatusOK, "session_confirm", h.page(r, v, "job.confirm.title", "sessions", cardOf(v.l, s, h.now())))
	}
}

func (h *Handler) sessionEnd(w http.ResponseWriter, r *http.Request, v visitor) {
	if r.PostFormValue("confirm") != "yes" {
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "session.confirm.missing")
		return
	}
	ss, s, ok := h.sessionOf(w, r, v)
	if !ok {
		return
	}
	if err := ss.EndSession(r.Context(), identityOf(v), s.Id); err != nil {
		h.log.Info("session end refused", "user", v.sess.User, "session", s.Id, "error", err)
		h.problem(w, r, http.StatusConflict, "error.forbidden.title", "session.refused")
		return
	}
	http.Redirect(w, r, "/sessions?done=end", http.StatusSeeOther)
}

func (h *Handler) sessionExtend(w http.ResponseWriter, r *http.Request, v visitor) {
	minutes, err := strconv.Atoi(r.PostFormValue("minutes"))
	if err != nil || minutes < 1 || minutes > 7*24*60 {
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "session.extend.bad")
		return
	}
	ss, s, ok := h.sessionOf(w, r, v)
	if !ok {
		return
	}
	if err := ss.ExtendSession(r.Context(), identityOf(v), s.Id, minutes); err != nil {
		h.log.Info("session extension refused", "user", v.sess.User, "session", s.Id, "error", err)
		h.problem(w, r, http.StatusConflict, "error.forbidden.title", "session.refused")
		return
	}
	http.Redirect(w, r, "/sessions?done=extend", http.StatusSeeOther)
}

// sessionOpen sends the owner's browser to the session on its own origin
// (a launch URL good once for a minute). A link, not a form: the pages'
// form-action forbids a form that leads to another origin. Only from the
// pages themselves (or typed in): another site's link is refused, as
// CrossOriginProtection refuses its posts.
func (h *Handler) sessionOpen(w http.ResponseWriter, r *http.Request, v visitor) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		h.problem(w, r, http.StatusForbidden, "error.cross_origin.title", "error.cross_origin")
		return
	}
	ss, s, ok := h.sessionOf(w, r, v)
	if !ok {
		return
	}
	u, err := ss.LaunchURL(r, identityOf(v), s.Id)
	if err != nil {
		h.log.Info("session not opened", "user", v.sess.User, "session", s.Id, "error", err)
		h.problem(w, r, http.StatusServiceUnavailable, "error.unavailable.title", "session.no_origin")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// sessionForm is a session template's form: its typed parameters as
// Start a job shows a batch template's, at their defaults.
func (h *Handler) sessionForm(w http.ResponseWriter, r *http.Request, v visitor) {
	if _, ok := h.sessionSource(w, r); !ok {
		return
	}
	t, ok := h.chosenOf(w, r, v, "session")
	if !ok {
		return
	}
	d := submitData{Template: t, Fields: fieldsOf(t.Template, nil, false), Project: t.Projects[0].Value,
		Action: "/sessions/" + t.Name + "/start", Session: true}
	h.render(w, r, http.StatusOK, "session_start", h.page(r, v, "session.start.title", "sessions", d))
}

// sessionStart starts a session of a session template with the form's
// parameters, on the chosen project, as the caller: the core checks the
// values as for a batch job, and its refusal (a value, the policy, the
// caller's role) comes back on the form, beside the field it refused.
func (h *Handler) sessionStart(w http.ResponseWriter, r *http.Request, v visitor) {
	ss, ok := h.sessionSource(w, r)
	if !ok {
		return
	}
	t, ok := h.chosenOf(w, r, v, "session")
	if !ok {
		return
	}
	h.postForm(w, r, v, t, submitData{Action: "/sessions/" + t.Name + "/start", Session: true}, "session_start",
		func(req api.SubmissionRequest, _ *submitData) (string, error) {
			if err := ss.StartSession(r.Context(), identityOf(v), req); err != nil {
				h.log.Info("session not started", "user", v.sess.User, "template", t.Name, "error", err)
				return "", err
			}
			return "/sessions?done=start", nil
		})
}

// Now is the core's clock: the pages count down by the same clock as the
// answers they show.
func (s coreSource) Now() time.Time { return s.c.Now() }

// now is the source's clock when it has one, else the system's.
func (h *Handler) now() time.Time {
	if c, ok := h.cfg.Source.(interface{ Now() time.Time }); ok {
		return c.Now()
	}
	return time.Now()
}
