package service

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/sessionproxy"
)

// SessionOrigin is where browsers reach the sessions' servers: an origin
// apart from the pages', so that a session's own script (a notebook, an
// extension) runs with neither the page session's cookie nor the pages'
// same-origin trust. Either one host for every session
// (https://sessions.portal.example.org) or one host per session
// (https://*.sessions.portal.example.org: <id>.sessions.portal.example.org,
// with wildcard DNS and certificate), which also keeps sessions apart
// from each other.
type SessionOrigin struct {
	Scheme string
	// Host is the host name (lower case), without the "*." of a
	// per-session origin; Port is "" for the scheme's default.
	Host, Port string
	PerSession bool
}

// ParseSessionOrigin reads sessions.origin: an https URL with a host and
// no path, its host optionally "*." and a domain (one host per session).
func ParseSessionOrigin(s string) (*SessionOrigin, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("%q is not an origin such as https://sessions.portal.example.org", s)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%q: the scheme is https (http on loopback only)", s)
	}
	o := &SessionOrigin{Scheme: u.Scheme, Host: strings.ToLower(u.Hostname()), Port: u.Port()}
	if rest, ok := strings.CutPrefix(o.Host, "*."); ok {
		o.Host, o.PerSession = rest, true
	}
	if o.Host == "" || strings.Contains(o.Host, "*") || (o.PerSession && net.ParseIP(o.Host) != nil) {
		return nil, fmt.Errorf("%q: give a host name, or *. and a domain for one host per session", s)
	}
	return o, nil
}

// hostOf is the origin's host for session id (with its port).
func (o *SessionOrigin) hostOf(id string) string {
	h := o.Host
	if o.PerSession {
		h = id + "." + h
	}
	if o.Port != "" {
		h = net.JoinHostPort(h, o.Port)
	}
	return h
}

// ProxyURL is session id's server as browsers open it.
func (o *SessionOrigin) ProxyURL(id string) string {
	return o.Scheme + "://" + o.hostOf(id) + sessionproxy.Prefix + id + "/proxy/"
}

// match tells whether a request's Host is on the session origin, and for
// a per-session origin whose session it is.
func (o *SessionOrigin) match(hostport string) (id string, ok bool) {
	h := strings.ToLower(hostport)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(h, ".")
	if !o.PerSession {
		return "", h == o.Host
	}
	id, ok = strings.CutSuffix(h, "."+o.Host)
	return id, ok && id != "" && !strings.Contains(id, ".")
}

// launchRoute is where a browser lands on the session origin with a
// launch token: it gets the session's cookie there and goes on to the
// server.
const launchRoute = "GET /v1/sessions/{session}/launch"

// sessionOriginRoutes are the only routes the session origin serves.
var sessionOriginRoutes = map[string]bool{launchRoute: true, "POST /v1/sessions/{session}/cookie": true}

// launchLifetime is how long a launch URL may wait for its one use: it
// is made when the owner asks to open the session and used at once.
const launchLifetime = time.Minute

const launchMAC = "strata-session-launch-v1\x00"

// launches are the launch tokens used, until they expire: each opens a
// session once.
type launches struct {
	mu   sync.Mutex
	used map[string]time.Time
}

// spend records a token's use; false when it was used before.
func (l *launches) spend(tok string, exp, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used == nil {
		l.used = map[string]time.Time{}
	}
	for k, e := range l.used {
		if !now.Before(e) {
			delete(l.used, k)
		}
	}
	if _, ok := l.used[tok]; ok {
		return false
	}
	l.used[tok] = exp
	return true
}

// SessionLaunchURL is a URL on the session origin, good once for a
// minute, that gives the owner's browser the session's cookie there and
// opens the session's server. The pages hand it to the browser when the
// owner opens a session (a POST on the pages' origin, so no other site
// can make one). Without a session origin browsers cannot open sessions.
func (s *Server) SessionLaunchURL(r *http.Request, who auth.Identity, id string) (string, *core.Problem) {
	o := s.cfg.Sessions.Origin
	if o == nil {
		return "", noSessionOrigin()
	}
	rec, p := s.core.SessionOwned(r.Context(), who, id)
	if p != nil {
		return "", p
	}
	exp := s.cfg.Now().Add(launchLifetime).Truncate(time.Second)
	payload := "launch|" + rec.ID + "|" + rec.User + "|" + strconv.FormatInt(exp.Unix(), 10)
	tok := base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(s.launchMAC([]byte(payload)))
	return o.Scheme + "://" + o.hostOf(rec.ID) + sessionproxy.Prefix + rec.ID + "/launch?t=" + tok, nil
}

func (s *Server) launchMAC(payload []byte) []byte {
	mac := hmac.New(sha256.New, s.sessions.key)
	mac.Write([]byte(launchMAC))
	mac.Write(payload)
	return mac.Sum(nil)
}

// checkLaunch returns the user of a launch token for session id: signed
// here, for that session, not expired, not used before.
func (s *Server) checkLaunch(tok, id string) (string, bool) {
	p64, m64, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > 1024 {
		return "", false
	}
	payload, ok1 := decode64(p64)
	got, ok2 := decode64(m64)
	if !ok1 || !ok2 || !hmac.Equal(got, s.launchMAC(payload)) {
		return "", false
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 4 || parts[0] != "launch" || parts[1] != id {
		return "", false
	}
	sec, err := strconv.ParseInt(parts[3], 10, 64)
	exp, now := time.Unix(sec, 0), s.cfg.Now()
	if err != nil || !now.Before(exp) || !s.launched.spend(tok, exp, now) {
		return "", false
	}
	return parts[2], true
}

// serveLaunch is launchRoute: the token's user, if the session is still
// theirs, gets the session's cookie on this origin and is sent on to the
// server by a page of this origin that refreshes to it at once (the token
// leaves the address bar, and no-referrer keeps it from the session's
// server). Not a 303: a redirect goes on with the navigation that the
// pages began, and where the session origin is another site than the
// pages' (a host of its own, as isolation would have it) the browser then
// withholds the SameSite=Strict cookie it has just been given, so the
// first request to the server came without it. The refresh is a
// navigation of this origin's own page, which carries the cookie.
func (s *Server) serveLaunch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	user, ok := s.checkLaunch(r.URL.Query().Get("t"), id)
	if !ok {
		writeError(w, http.StatusForbidden, api.Forbidden, "this link to the session is expired, used or not valid",
			"open the session again from the portal's sessions page")
		return
	}
	rec, p := s.core.SessionOwned(r.Context(), auth.Identity{User: user, Via: viaCookie}, id)
	if p != nil {
		writeProblem(w, p)
		return
	}
	// Made from a page session, not a personal token: a revocation of
	// the user ends it (cookieRevoked).
	s.setCookie(w, r, rec.ID, cookieClaims{user: rec.User, made: s.cfg.Now()})
	to := sessionproxy.Prefix + rec.ID + "/proxy/"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
	w.Header().Set("Refresh", "0; url="+to)
	// The id is 32 hex digits (SessionOwned found it): nothing to escape.
	_, _ = fmt.Fprintf(w, launchPage, to, to)
}

// launchPage is serveLaunch's answer, with the server's address twice:
// the refresh, and a link for a browser that does not follow it.
const launchPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0; url=%s"><title>Opening the session</title></head>
<body><p><a href="%s">Open the session</a></p></body></html>
`

// noSessionOrigin is the answer where a browser would reach a session
// but the portal has no session origin: a session's script on the pages'
// origin would act with the page session, so browsers are refused.
func noSessionOrigin() *core.Problem {
	return &core.Problem{Status: http.StatusNotImplemented, Code: api.Unavailable,
		Message: "browsers cannot open sessions here: the portal has no session origin",
		Hint:    "the portal's operator sets sessions.origin (a host apart from the pages'); API clients reach the proxy with a bearer token"}
}

// sessionElsewhere is the pages' origin's answer on a session's proxy
// once the sessions have an origin of their own.
func (s *Server) sessionElsewhere(w http.ResponseWriter, id string) {
	w.Header().Set("Cache-Control", "no-store")
	writeError(w, http.StatusNotFound, api.NotFound, "sessions are not served on this origin",
		"open the session at "+s.cfg.Sessions.Origin.ProxyURL(id))
}

// withSessionURL makes a session's url the one on the session origin.
func (s *Server) withSessionURL(v *api.Session) {
	if o := s.cfg.Sessions.Origin; o != nil && v != nil && v.Id != "" {
		v.Url = o.ProxyURL(v.Id)
	}
}

// secure: the origin is https (the portal may be behind a proxy that
// ends TLS, so the request's own TLS does not tell).
func (o *SessionOrigin) secure() bool { return o != nil && o.Scheme == "https" }
