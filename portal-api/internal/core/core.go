// Package core is what the portal knows and does, for every way a person
// reaches it: the JSON API (internal/service) and the web pages call the
// same methods, with the same caller, and get the same answers. It answers
// every read from the clusters' snapshots (internal/cluster), acts in Slurm
// as the caller with a token minted for them after writing the action's
// audit record, and asks reclaimd, the bridge and Prometheus on the
// caller's behalf.
//
// Every method takes the authenticated caller (auth.Identity) and returns
// a typed value (the API's types, internal/api) or a *Problem: an HTTP
// status, a stable code, a message and a hint, which each front end shows
// in its own way. Who may see and do what is asked of internal/rbac here
// and nowhere else; an object the caller may not read is a Problem with
// the same text as one that does not exist. Nothing here writes HTTP.
package core

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/priority"
	"github.com/strata-hpc/strata/portal-api/internal/reclaimclient"
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
	// ReclaimdURL is the cluster's reclaimd API; "": none. ReclaimdToken
	// gives the bearer token it wants (reclaimd_token_file).
	ReclaimdURL   string
	ReclaimdToken func() ([]byte, error)
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
	Priority *priority.Weights
	// Prometheus scrapes the cluster's dcgm-exporters; nil: no GPU use
	// is shown.
	Prometheus *Prometheus
}

// Config is what the core needs.
type Config struct {
	Clusters []Cluster
	Store    *store.Store
	// Templates are the job templates now; nil: none.
	Templates func() *templates.Set
	// Registry takes the core's metrics; nil: a registry of its own.
	Registry prometheus.Registerer
	Log      *slog.Logger
	Now      func() time.Time
	// HTTPClient reaches the clusters' reclaimd and Prometheus; nil: 10 s
	// timeout.
	HTTPClient *http.Client
	// SessionTransport reaches the sessions' servers for their activity;
	// nil: one of the core's own. Only the session's host:port is dialled.
	SessionTransport *http.Transport
	// IdleInterval is how often the idle loop looks at open sessions
	// (0: 1m).
	IdleInterval time.Duration
	// BeatInterval and SettleInterval pace InstanceLoop: the instance's
	// beat (0: store.InstanceBeat) and the settling of the audit records
	// stopped portals left open (0: 30s).
	BeatInterval, SettleInterval time.Duration
	// KeepEnded is how long an ended session stays in Sessions (0: 24h);
	// Session shows it for as long as the database keeps it.
	KeepEnded time.Duration
	// ReclaimdTimeout bounds one read of a reclaimd by the overview (all
	// its routes) or the attempts; 0: 5 s.
	ReclaimdTimeout time.Duration
}

// Core is the portal's one path to its data and its actions.
type Core struct {
	cfg      Config
	clusters []Cluster
	byName   map[string]Cluster
	indexes  indexes
	log      *slog.Logger
	// activity polls the sessions' servers; it dials only the address
	// its request's context names.
	activity *http.Client
	// input throttles the recording of terminal input: the last time
	// written to the store, per session.
	inputMu sync.Mutex
	input   map[string]time.Time
	// recoveryCache holds each cluster's last read of its reclaimd.
	recoveryCache recoveryCaches
	reclaimd      map[string]*reclaimclient.Client
	queues        priority.Cache
	gpuNows       gpuNows
	sessionsOpen  *sessionGauge
}

// Problem is a refusal or a failure, as every front end shows it: the
// HTTP status it answers with, a stable code, a message that says what
// went wrong, and a hint that says what to do next. PolicyLine is the
// policy file's line that refused a submission; Details are every problem
// when there are several (one per refused parameter).
type Problem struct {
	Status     int
	Code       api.ErrorCode
	Message    string
	Hint       string
	PolicyLine string
	Details    []string
	// Refusal is the policy's refusal as fields, when the policy refused.
	Refusal *api.PolicyRefusal
}

// Error is the message.
func (p *Problem) Error() string { return p.Message }

// API is the problem as the JSON API's error body.
func (p *Problem) API() api.Error {
	e := api.Error{Code: p.Code, Message: p.Message}
	if p.Hint != "" {
		e.Hint = ptr(p.Hint)
	}
	if p.PolicyLine != "" {
		e.PolicyLine = ptr(p.PolicyLine)
	}
	if p.Details != nil {
		e.Details = ptr(p.Details)
	}
	e.Refusal = p.Refusal
	return e
}

// AsProblem is err's Problem, or an internal one that says err; nil
// (no problem) for a nil err, or for a nil *Problem held in err.
func AsProblem(err error) *Problem {
	if err == nil {
		return nil
	}
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	return problem(http.StatusInternalServerError, api.Internal, err.Error(), "try again; tell the portal's admins if it persists")
}

// StatusOf is the HTTP status err answers with: 0 for a nil err (or a
// nil *Problem), the Problem's for one, 500 for any other error.
func StatusOf(err error) int {
	if p := AsProblem(err); p != nil {
		return p.Status
	}
	return 0
}

func problem(status int, code api.ErrorCode, msg, hint string) *Problem {
	return &Problem{Status: status, Code: code, Message: msg, Hint: hint}
}

func noCluster(name string) *Problem {
	return problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no cluster %q", name), "GET /v1/clusters lists them")
}

// New makes the core. Call Prepare with each cluster's poller running, or
// let New do it: it indexes each cluster's snapshot after each poll.
func New(cfg Config) *Core {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Core{cfg: cfg, clusters: cfg.Clusters, byName: map[string]Cluster{}, log: cfg.Log, indexes: indexes{},
		input: map[string]time.Time{}, activity: activityClient(cfg.SessionTransport), reclaimd: map[string]*reclaimclient.Client{}}
	s.recoveryCache = newRecoveryCaches(cfg.Clusters)
	requests := reclaimclient.NewRequests(cfg.Registry)
	for _, c := range cfg.Clusters {
		s.byName[c.Poller.Name()] = c
		s.indexes[c.Poller.Name()] = &atomic.Pointer[index]{}
		if c.ReclaimdURL != "" {
			s.reclaimd[c.Poller.Name()] = reclaimclient.New(reclaimclient.Config{Cluster: c.Poller.Name(), URL: c.ReclaimdURL,
				Token: c.ReclaimdToken, HTTP: cfg.HTTPClient, Requests: requests})
		}
	}
	s.sessionsOpen = newSessionGauge(cfg.Registry, s.ClusterNames())
	for _, c := range cfg.Clusters {
		s.prepare(c)
		c.Poller.OnSnapshot(func(*cluster.Snapshot) { s.prepare(c) })
	}
	return s
}

// prepare indexes a cluster's snapshot and explains its pending jobs,
// from the poller's goroutine after each poll (and at New for a snapshot
// there already): the work a request would otherwise do the first time
// it meets a snapshot or a job. A tenant map reloaded between polls is
// indexed at the next request and explained job by job until the next
// poll.
func (s *Core) prepare(c Cluster) {
	if x := s.indexes.of(c); x != nil {
		x.explainAll()
	}
}

// Now is the core's clock.
func (s *Core) Now() time.Time { return s.cfg.Now() }

// ClusterNames are the clusters served, in the configuration's order.
func (s *Core) ClusterNames() []string {
	out := make([]string, 0, len(s.clusters))
	for _, c := range s.clusters {
		out = append(out, c.Poller.Name())
	}
	return out
}

// Health says, for the public health check, whether each cluster is
// served from a fresh snapshot, and how many are.
func (s *Core) Health() (clusters map[string]map[string]any, fresh int) {
	clusters = map[string]map[string]any{}
	for _, c := range s.clusters {
		h := c.Poller.Health()
		ch := map[string]any{"healthy": h.Healthy, "stale": h.Stale}
		if c.Poller.Snapshot() != nil {
			ch["age_seconds"] = h.Age.Seconds()
		}
		clusters[c.Poller.Name()] = ch
		if !h.Stale {
			fresh++
		}
	}
	return clusters, fresh
}

func ptr[T any](v T) *T { return &v }

func nonZeroTime(t time.Time) *time.Time {
	if t.IsZero() || t.Unix() <= 0 {
		return nil
	}
	t = t.UTC()
	return &t
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// round2 rounds to two decimals: more than sprio shows, less than noise.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// defaultReclaimdTimeout bounds one read of reclaimd's API
// (Config.ReclaimdTimeout).
const defaultReclaimdTimeout = 5 * time.Second

func (s *Core) reclaimdTimeout() time.Duration {
	return cmp.Or(s.cfg.ReclaimdTimeout, defaultReclaimdTimeout)
}
