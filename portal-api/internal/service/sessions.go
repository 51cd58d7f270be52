package service

import (
	"cmp"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/sessionproxy"
)

// SessionConfig configures the session routes, the proxy in front of the
// sessions' servers and the idle loop.
type SessionConfig struct {
	// CookieKey signs the proxy's browser cookies (at least 32 bytes);
	// nil: a random key of this process, so a restarted portal asks the
	// browser for a new cookie (POST /v1/sessions/{id}/cookie).
	CookieKey []byte
	// CookieLifetime is how long a cookie is good for; it is renewed
	// while used. 0: 1h.
	CookieLifetime time.Duration
	// Transport reaches the sessions' servers; nil: the proxy's own, with
	// no proxy from the environment. Whatever it is, only the session's
	// host:port is dialled.
	Transport *http.Transport
	// MaxConns caps each session's open requests and WebSockets (0:
	// sessionproxy.DefaultMaxConns).
	MaxConns int
	// IdleInterval is how often the idle loop looks at open sessions
	// (0: 1m).
	IdleInterval time.Duration
	// KeepEnded is how long an ended session stays in GET /v1/sessions
	// (0: 24h); GET /v1/sessions/{id} shows it for as long as the
	// database keeps it.
	KeepEnded time.Duration
	// Origin is where browsers reach the sessions' servers, apart from
	// the pages (ParseSessionOrigin). nil: browsers cannot open sessions
	// (no session cookie is made or taken); API clients still reach the
	// proxy with a bearer token.
	Origin *SessionOrigin
}

// sessions is the server's session proxy and its cookies.
type sessions struct {
	proxy    *sessionproxy.Proxy
	key      []byte
	lifetime time.Duration
}

// sessionCookie is the browser's credential of one session's proxy.
const sessionCookie = "strata_session"

// proxyRoutes are the mux patterns of the proxy.
var proxyRoutes = map[string]bool{"/v1/sessions/{session}/proxy/": true, "/v1/sessions/{session}/proxy": true}

func (s *Server) mountSessions() {
	sc := s.cfg.Sessions
	s.sessions.key = sc.CookieKey
	if len(s.sessions.key) == 0 {
		s.sessions.key = make([]byte, 32)
		_, _ = rand.Read(s.sessions.key) // crypto/rand does not fail
	}
	s.sessions.lifetime = cmp.Or(sc.CookieLifetime, time.Hour)
	p, err := sessionproxy.New(sessionproxy.Config{Lookup: s.lookupSession, MaxConns: sc.MaxConns, DropCookies: []string{sessionCookie},
		Transport: sc.Transport, Error: proxyError, Logger: s.log, Registry: s.cfg.Registry})
	if err != nil {
		panic("session proxy: " + err.Error()) // only a negative MaxConns, a programming error
	}
	s.sessions.proxy = p
	h := http.HandlerFunc(s.serveProxy)
	for route := range proxyRoutes {
		s.mux.Handle(route, h)
	}
	s.mux.HandleFunc(launchRoute, s.serveLaunch)
}

// proxyError writes the proxy's refusals as every other error of the API.
func proxyError(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	writeError(w, status, api.ErrorCode(code), msg, "")
}
