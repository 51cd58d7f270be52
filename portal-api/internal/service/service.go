// Package service is the portal API's server: it implements the interface
// generated from openapi.yaml (internal/api), answers every read from the
// clusters' snapshots (internal/cluster), and acts in Slurm as the caller
// with a token minted for them, after writing the action's audit record.
//
// Around the generated routes it puts what every request passes through,
// in this order: a body cap, authentication (internal/auth), a per-user
// rate limit, the metrics of each route and status, and JSON errors with
// a stable code, a message and a hint. Who may see and do what is asked
// of internal/rbac alone; an object the caller may not read answers 404
// with the same text as one that does not exist.
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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/tenantmap"
	portalapi "github.com/strata-hpc/strata/portal-api"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// Cluster is one cluster the portal serves.
type Cluster struct {
	Poller *cluster.Poller
	// Tenants is the cluster's tenant map now (reloaded on SIGHUP).
	Tenants func() *tenantmap.Map
	// Policy is the cluster's job policy (jobpolicy.json) now; nil, or a
	// nil answer: the cluster takes no submissions through the portal.
	Policy func() *jobpolicy.Policy
	// ReclaimdURL is the cluster's reclaimd API; "": none.
	ReclaimdURL string
	// Bridge is the cluster's strata-bridge API; nil: none.
	Bridge *bridgeclient.Client
	// WorkDir is a submitted job's working directory unless its template
	// sets one; {user} is the user's name. "": /tmp.
	WorkDir string
	// OutputRoots are the shared folders beneath which a job's output
	// and working directory are shown; none: no job's output is.
	OutputRoots []string
	// SessionRoot holds the sessions' folders (<root>/<id>), on a file
	// system the portal and the nodes share; {user} is the user's name.
	// "": <WorkDir>/.strata/sessions.
	SessionRoot string
	// SessionIdleLimit ends a session without GPUs idle this long, by its
	// server's activity, unless its template gives its own; 0: never.
	SessionIdleLimit time.Duration
	// Priority are the cluster's priority/multifactor weights; nil: the
	// queue shows no priority factors.
	Priority *PriorityWeights
	// Prometheus scrapes the cluster's dcgm-exporters; nil: no GPU use
	// is shown.
	Prometheus *Prometheus
}

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
	clusters []Cluster
	byName   map[string]Cluster
	mux      *http.ServeMux
	limiters limiters
	indexes  indexes
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	log      *slog.Logger
	sessions sessions
	// recoveryCache holds each cluster's last read of its reclaimd.
	recoveryCache    recoveryCaches
	reclaimdRequests *prometheus.CounterVec
	queues           queues
	gpuNows          gpuNows
}

var _ api.ServerInterface = (*Server)(nil)

// prepare indexes a cluster's snapshot and explains its pending jobs,
// from the poller's goroutine after each poll (and at New for a snapshot
// there already): the work a request would otherwise do the first time
// it meets a snapshot or a job. A tenant map reloaded between polls is
// indexed at the next request and explained job by job until the next
// poll.
func (s *Server) prepare(c Cluster) {
	if x := s.indexes.of(c); x != nil {
		x.explainAll()
	}
}

// New makes the server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
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
	s := &Server{cfg: cfg, clusters: cfg.Clusters, byName: map[string]Cluster{}, log: cfg.Log,
		limiters: limiters{m: map[string]*rate.Limiter{}, r: rate.Limit(cfg.RatePerSecond), b: cfg.Burst}}
	s.indexes = indexes{}
	s.recoveryCache = newRecoveryCaches(cfg.Clusters)
	for _, c := range cfg.Clusters {
		s.byName[c.Poller.Name()] = c
		s.indexes[c.Poller.Name()] = &atomic.Pointer[index]{}
	}
	for _, c := range cfg.Clusters {
		s.prepare(c)
		c.Poller.OnSnapshot(func(*cluster.Snapshot) { s.prepare(c) })
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_portal_http_requests_total",
		Help: "API requests by route and status code."}, []string{"route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_portal_http_request_duration_seconds",
		Help: "API request latency by route.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}}, []string{"route"})
	cfg.Registry.MustRegister(s.requests, s.latency)
	s.reclaimdRequests = newReclaimdRequests(cfg.Registry)
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

// public routes need no identity.
var public = map[string]bool{"GET /healthz": true, "GET /metrics": true, "GET /v1/openapi.yaml": true}

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
	out := map[string]any{}
	fresh := 0
	for _, c := range s.clusters {
		h := c.Poller.Health()
		ch := map[string]any{"healthy": h.Healthy, "stale": h.Stale}
		if c.Poller.Snapshot() != nil {
			ch["age_seconds"] = h.Age.Seconds()
		}
		out[c.Poller.Name()] = ch
		if !h.Stale {
			fresh++
		}
	}
	code := http.StatusOK
	if fresh == 0 {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"clusters": out, "fresh": fresh})
}

func ptr[T any](v T) *T { return &v }

func nonZeroTime(t time.Time) *time.Time {
	if t.IsZero() || t.Unix() <= 0 {
		return nil
	}
	t = t.UTC()
	return &t
}
