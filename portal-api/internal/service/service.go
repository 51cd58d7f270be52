// Package service is the portal's JSON API: it implements the interface
// generated from openapi.yaml (internal/api) as a thin layer over the
// portal's core (internal/core), which answers every read and takes every
// action for the authenticated caller. A route decodes its request, calls
// the core with the caller, and writes the core's value or problem as
// JSON; the session proxy's routes and cookie are here too, since they
// are HTTP through and through.
//
// Around the generated routes it puts what every request passes through,
// in this order: a body cap, authentication (internal/auth), a per-user
// rate limit, the metrics of each route and status, and JSON errors with
// a stable code, a message and a hint. Who may see and do what is asked
// of internal/rbac, in the core alone; an object the caller may not read
// answers 404 with the same text as one that does not exist.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/strata-hpc/strata/internal/daemon"
	portalapi "github.com/strata-hpc/strata/portal-api"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/priority"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// The core's types, under the names the server has always had.
type (
	// Cluster is one cluster the portal serves.
	Cluster = core.Cluster
	// PriorityWeights are a cluster's priority/multifactor weights.
	PriorityWeights = priority.Weights
	// Prometheus is a cluster's Prometheus that scrapes dcgm-exporter.
	Prometheus = core.Prometheus
)

// Config is what the server needs.
type Config struct {
	Clusters []Cluster
	Auth     *auth.Authenticator
	Store    *store.Store
	// Templates are the job templates now; nil: none.
	Templates func() *templates.Set
	// RatePerSecond and Burst limit each user's requests.
	RatePerSecond float64
	Burst         int
	MaxBodyBytes  int64
	Registry      prometheus.Registerer
	// Metrics serves /metrics; nil: no /metrics.
	Metrics http.Handler
	Log     *slog.Logger
	Now     func() time.Time
	// HTTPClient reaches the clusters' reclaimd; nil: 10 s timeout.
	HTTPClient *http.Client
	// Sessions configures the session routes and proxy (sessions.go).
	Sessions SessionConfig
	// ReclaimdTimeout bounds one read of a reclaimd by the overview (all
	// its routes) or the attempts route; 0: 5 s.
	ReclaimdTimeout time.Duration
}

// Server is the portal API.
type Server struct {
	cfg      Config
	core     *core.Core
	mux      *http.ServeMux
	limiters limiters
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	log      *slog.Logger
	sessions sessions
	launched launches
}

var _ api.ServerInterface = (*Server)(nil)

// New makes the server and its core.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond, cfg.Burst = 20, 40
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, log: cfg.Log,
		limiters: limiters{m: map[string]*rate.Limiter{}, r: rate.Limit(cfg.RatePerSecond), b: cfg.Burst}}
	s.core = core.New(core.Config{Clusters: cfg.Clusters, Store: cfg.Store, Templates: cfg.Templates, Registry: cfg.Registry, Log: cfg.Log,
		Now: cfg.Now, HTTPClient: cfg.HTTPClient, SessionTransport: cfg.Sessions.Transport, IdleInterval: cfg.Sessions.IdleInterval,
		KeepEnded: cfg.Sessions.KeepEnded, ReclaimdTimeout: cfg.ReclaimdTimeout})
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_portal_http_requests_total",
		Help: "API requests by route and status code."}, []string{"route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_portal_http_request_duration_seconds",
		Help: "API request latency by route.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}}, []string{"route"})
	cfg.Registry.MustRegister(s.requests, s.latency)
	s.mux = http.NewServeMux()
	api.HandlerWithOptions(s, api.StdHTTPServerOptions{BaseRouter: s.mux, ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
		writeError(w, http.StatusBadRequest, api.BadRequest, err.Error(), "see /v1/openapi.yaml for the parameters of this route")
	}})
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics)
	}
	s.mountSessions()
	return s
}

// Core is the server's core: the pages call it as the routes do.
func (s *Server) Core() *core.Core { return s.core }

// IdleLoop is the daemon loop that ends idle sessions without GPUs and
// records how every open session ended (the core's).
func (s *Server) IdleLoop() daemon.Loop { return s.core.IdleLoop() }

// InstanceLoop is the daemon loop that keeps the portal's instance alive
// in the database and settles the audit records stopped portals left
// open (the core's).
func (s *Server) InstanceLoop() daemon.Loop { return s.core.InstanceLoop() }

// CheckSessions looks at every open session once (the core's).
func (s *Server) CheckSessions(ctx context.Context) { s.core.CheckSessions(ctx) }

// public routes need no identity.
var public = map[string]bool{"GET /healthz": true, "GET /metrics": true, "GET /v1/openapi.yaml": true, launchRoute: true}

type identityKey struct{}

func identity(ctx context.Context) auth.Identity {
	id, _ := ctx.Value(identityKey{}).(auth.Identity)
	return id
}

// ServeHTTP routes a request through the body cap, authentication, the
// rate limit and the route, and counts it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// Handler finds the route (for the metrics and the check below);
	// ServeHTTP then sets its path values.
	_, pattern := s.mux.Handler(r)
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	defer func() {
		s.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		s.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}()
	proxied := proxyRoutes[pattern]
	if o := s.cfg.Sessions.Origin; o != nil {
		// The session origin serves sessions and nothing else; the
		// pages' origin serves no session.
		if host, on := o.match(r.Host); on {
			id := proxiedSession(r.URL.Path)
			if (!proxied && !sessionOriginRoutes[pattern]) || (o.PerSession && host != id) {
				rec.Header().Set("Cache-Control", "no-store")
				writeError(rec, http.StatusNotFound, api.NotFound, fmt.Sprintf("no route %s %s on the sessions' origin", r.Method, r.URL.Path),
					"the portal's pages and API are on its own address")
				return
			}
		} else if proxied || pattern == launchRoute {
			s.sessionElsewhere(rec, proxiedSession(r.URL.Path))
			return
		}
	} else if pattern == launchRoute {
		writeProblem(rec, noSessionOrigin())
		return
	}
	if !proxied {
		// A session's server takes its own uploads; the API takes JSON.
		r.Body = http.MaxBytesReader(rec, r.Body, s.cfg.MaxBodyBytes)
	}
	if pattern == "" {
		writeError(rec, http.StatusNotFound, api.NotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), "see /v1/openapi.yaml for the routes")
		return
	}
	if !public[pattern] {
		id, err := s.authenticate(r, proxied)
		if err != nil {
			// Requests without a valid credential are limited by where
			// they come from (the trusted-proxy rule decides the address),
			// so guessing tokens or flooding the issuer check costs the
			// caller, not the portal.
			if !s.limiters.allow("addr " + s.cfg.Auth.ClientAddr(r).String()) {
				rec.Header().Set("Retry-After", "1")
				writeError(rec, http.StatusTooManyRequests, api.RateLimited, "too many requests", "slow down: requests without credentials have a rate by address")
				return
			}
			var ae *auth.Error
			msg, hint := "not authenticated", ""
			if errors.As(err, &ae) {
				msg, hint = ae.Msg, ae.Hint
			}
			if auth.IsUnavailable(err) {
				writeError(rec, http.StatusServiceUnavailable, api.Unavailable, msg, hint)
				return
			}
			s.log.Info("request refused: not authenticated", "route", route, "remote", r.RemoteAddr, "error", err)
			rec.Header().Set("WWW-Authenticate", `Bearer realm="strata-portal-api"`)
			writeError(rec, http.StatusUnauthorized, api.Unauthenticated, msg, hint)
			return
		}
		// A session's page loads its assets by the hundred: the proxy caps
		// each session's open connections instead of the API's rate.
		if !proxied && !s.limiters.allow(id.User) {
			rec.Header().Set("Retry-After", "1")
			writeError(rec, http.StatusTooManyRequests, api.RateLimited, "too many requests", "slow down: each user has a request rate")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
	}
	s.mux.ServeHTTP(rec, r)
}

type statusRecorder struct {
	http.ResponseWriter
	code    int
	written bool
}

func (w *statusRecorder) WriteHeader(code int) {
	if !w.written {
		w.code, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	w.written = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection: the session
// proxy flushes streams and hijacks WebSockets through it.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// limiters are the per-user rate limiters.
type limiters struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
	r  rate.Limit
	b  int
}

// maxLimiters bounds the map: past it, it starts afresh (every user gets
// a full burst once more), rather than grow without end.
const maxLimiters = 100000

func (l *limiters) allow(user string) bool {
	l.mu.Lock()
	lim, ok := l.m[user]
	if !ok {
		if len(l.m) >= maxLimiters {
			l.m = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(l.r, l.b)
		l.m[user] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing to do
}

// respond writes the core's value with code, or its problem.
func respond[T any](w http.ResponseWriter, code int, v T, p *core.Problem) {
	if p != nil {
		writeProblem(w, p)
		return
	}
	writeJSON(w, code, v)
}

// writeProblem writes a problem of the core as the API's error.
func writeProblem(w http.ResponseWriter, p *core.Problem) {
	writeJSON(w, p.Status, p.API())
}

func writeError(w http.ResponseWriter, code int, c api.ErrorCode, msg, hint string) {
	e := api.Error{Code: c, Message: msg}
	if hint != "" {
		e.Hint = &hint
	}
	writeJSON(w, code, e)
}

// GetSpec serves openapi.yaml.
func (s *Server) GetSpec(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(portalapi.Spec)
}

// GetHealth says whether any cluster is served from a fresh snapshot. It
// is public, so it says no more than that: the errors are in /v1/clusters.
func (s *Server) GetHealth(w http.ResponseWriter, r *http.Request) {
	clusters, fresh := s.core.Health()
	code := http.StatusOK
	if fresh == 0 {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"clusters": clusters, "fresh": fresh})
}

func ptr[T any](v T) *T { return &v }
