// Package cluster keeps one snapshot per cluster: a poller (a daemon loop)
// reads the cluster's jobs (conditionally on their update time, so an
// unchanged cluster costs slurmctld almost nothing), nodes, partitions and
// fair-share tree from slurmrestd on an interval, and every user request
// is answered from the snapshot. The requests slurmrestd gets therefore
// do not grow with the portal's users or requests: they are counted per
// cluster (strata_portal_slurmrestd_requests_total) to show it.
//
// A cluster that stops answering keeps its last snapshot, marked stale
// with its age, while the other clusters are served as before.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Snapshot is what a poll read. Its slices are never changed once
// published: readers share them.
type Snapshot struct {
	At         time.Time // when the poll that made it finished
	Info       slurmrest.ServerInfo
	Jobs       []slurmrest.Job
	Nodes      []slurmrest.Node
	Partitions []slurmrest.Partition
	Shares     []slurmrest.Share
	// Associations, QOS and Users are slurmdbd's, read every SlowEvery
	// polls: what explains a pending job's limits.
	Associations []slurmrest.Association
	QOS          []slurmrest.QOS
	Users        []slurmrest.User
	// updated is the jobs' last update time, for the next conditional list.
	updated time.Time
}

// Health is a cluster's state as /v1/clusters shows it.
type Health struct {
	// Healthy: the last poll succeeded.
	Healthy bool
	// Stale: no snapshot, or one older than StaleAfter.
	Stale bool
	// Age of the snapshot; 0 when there is none.
	Age time.Duration
	// Err is the last poll's error, "" after a success.
	Err string
}

// Config configures a Poller.
type Config struct {
	Name string
	// Slurm connects to slurmrestd (URL, Tokens, User): the poller
	// connects at its first poll, and again after a failed connect, so
	// that a cluster down at start is only a stale cluster.
	Slurm      slurmrest.Config
	Interval   time.Duration
	StaleAfter time.Duration
	// SlowEvery: associations, QOS and users are read every this many
	// polls (and at the first); default 4.
	SlowEvery int
	// SoonAfter is how long after a Soon the poller reads the cluster
	// (default 1s, at most Interval): one early poll for every Soon in
	// that time, so early polls come at most once a SoonAfter.
	SoonAfter time.Duration
	Log       *slog.Logger
	Metrics   *Metrics
	Now       func() time.Time
	// Lease, when set, is shared by the portals of one database: the
	// portal that holds it polls slurmrestd and publishes its snapshot,
	// the others read that snapshot instead of polling (lease.go).
	Lease Lease
}

// Poller polls one cluster.
type Poller struct {
	cfg  Config
	snap atomic.Pointer[Snapshot]

	connMu sync.Mutex // held while connecting, which may take a timeout
	client *slurmrest.Client

	mu      sync.Mutex
	leader  bool // holds the lease (Config.Lease) since the last poll
	lastErr string
	polled  bool
	polls   int // successful polls so far
	onSnap  []func(*Snapshot)

	soon chan struct{} // Soon's, taken by Run
}

// New makes a poller; it reaches slurmrestd only when it polls.
func New(cfg Config) *Poller {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.SlowEvery <= 0 {
		cfg.SlowEvery = 4
	}
	if cfg.SoonAfter <= 0 {
		cfg.SoonAfter = time.Second
	}
	cfg.SoonAfter = min(cfg.SoonAfter, cfg.Interval)
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 4 * cfg.Interval
	}
	base := cfg.Slurm.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: 30 * time.Second}
	}
	hc := *base
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if cfg.Metrics != nil {
		rt = counting{rt: rt, c: cfg.Metrics.requests.WithLabelValues(cfg.Name)}
	}
	hc.Transport = rt
	cfg.Slurm.HTTPClient = &hc
	cfg.Slurm.Logger = cfg.Log
	p := &Poller{cfg: cfg, soon: make(chan struct{}, 1)}
	if cfg.Metrics != nil {
		cfg.Metrics.register(p)
	}
	return p
}

// Name is the cluster's name.
func (p *Poller) Name() string { return p.cfg.Name }

// Interval is the time between two polls: how often the portal reads
// what it shows of the cluster.
func (p *Poller) Interval() time.Duration { return p.cfg.Interval }

// OnSnapshot has f called with each snapshot the poller publishes, in
// the polling goroutine (Run's or Poll's caller) right after it is
// published: work done there once per poll, such as what every request
// would otherwise work out, stays off the request path. f must not poll.
func (p *Poller) OnSnapshot(f func(*Snapshot)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onSnap = append(p.onSnap, f)
}

// Snapshot is the last snapshot, nil before the first poll that succeeded.
func (p *Poller) Snapshot() *Snapshot { return p.snap.Load() }

// Health says how the cluster's snapshot stands now.
func (p *Poller) Health() Health {
	p.mu.Lock()
	h := Health{Healthy: p.polled && p.lastErr == "", Err: p.lastErr}
	p.mu.Unlock()
	s := p.snap.Load()
	if s == nil {
		h.Stale = true
		return h
	}
	h.Age = p.cfg.Now().Sub(s.At)
	h.Stale = h.Age > p.cfg.StaleAfter
	return h
}

// Client is the cluster's slurmrestd client, connecting if need be; the
// API acts as a user through Client().As(user).
func (p *Poller) Client(ctx context.Context) (*slurmrest.Client, error) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.client != nil {
		return p.client, nil
	}
	c, err := slurmrest.New(ctx, p.cfg.Slurm)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: connect to slurmrestd: %w", p.cfg.Name, err)
	}
	p.client = c
	return c, nil
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("cluster poll failed: serving its last snapshot", "cluster", p.cfg.Name, "error", err)
		}
		daemon.Beat(ctx)
		var early <-chan time.Time
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				break wait
			case <-p.soon:
				if early == nil {
					early = time.After(p.cfg.SoonAfter)
				}
			case <-early:
				break wait
			}
		}
	}
}

// Soon asks Run for a poll SoonAfter from now, ahead of the interval: a
// job the portal just submitted then shows (and its session turns usable)
// within about a second, not an interval. Soons within SoonAfter make one
// poll, so early polls follow writes made through the portal and come at
// most once a SoonAfter, whatever the number of readers.
func (p *Poller) Soon() {
	select {
	case p.soon <- struct{}{}:
	default:
	}
}

// Poll reads the cluster once and publishes a new snapshot; on an error
// the last one stays.
func (p *Poller) Poll(ctx context.Context) error {
	err := p.poll(ctx)
	p.mu.Lock()
	p.polled = true
	if err != nil {
		p.lastErr = err.Error()
	} else {
		p.lastErr = ""
	}
	p.mu.Unlock()
	if m := p.cfg.Metrics; m != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.polls.WithLabelValues(p.cfg.Name, result).Inc()
	}
	return err
}

func (p *Poller) poll(ctx context.Context) error {
	if p.cfg.Lease != nil {
		held, err := p.cfg.Lease.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", p.cfg.Name, err)
		}
		p.setLeader(held)
		if !held {
			return p.follow(ctx)
		}
	}
	c, err := p.Client(ctx)
	if err != nil {
		return err
	}
	prev := p.snap.Load()
	next := &Snapshot{Info: c.Info()}
	var since time.Time
	if prev != nil {
		since = prev.updated
		next.Jobs, next.Partitions, next.Shares = prev.Jobs, prev.Partitions, prev.Shares
		next.Associations, next.QOS, next.Users = prev.Associations, prev.QOS, prev.Users
	}
	list, err := c.Jobs(ctx, since)
	if err != nil {
		return fmt.Errorf("cluster %s: jobs: %w", p.cfg.Name, err)
	}
	next.updated = list.Updated
	if !list.Unchanged {
		next.Jobs = list.Jobs
		for _, u := range list.Unreadable {
			p.cfg.Log.Warn("job record unreadable: left out", "cluster", p.cfg.Name, "job_id", u.ID, "error", u.Err)
		}
	}
	if next.Nodes, err = c.Nodes(ctx); err != nil {
		return fmt.Errorf("cluster %s: nodes: %w", p.cfg.Name, err)
	}
	// Partitions and shares change seldom; a failure keeps the last ones.
	if parts, err := c.Partitions(ctx); err == nil {
		next.Partitions = parts
	} else {
		p.cfg.Log.Warn("partitions unread: keeping the last ones", "cluster", p.cfg.Name, "error", err)
	}
	if shares, err := c.Shares(ctx); err == nil {
		next.Shares = shares
	} else {
		p.cfg.Log.Warn("shares unread: keeping the last ones", "cluster", p.cfg.Name, "error", err)
	}
	p.mu.Lock()
	slow := p.polls%p.cfg.SlowEvery == 0
	p.mu.Unlock()
	if slow {
		p.slow(ctx, c, next)
	}
	next.At = p.cfg.Now()
	p.snap.Store(next)
	p.mu.Lock()
	p.polls++
	hooks := p.onSnap
	p.mu.Unlock()
	for _, f := range hooks {
		f(next)
	}
	if p.cfg.Lease != nil {
		return p.publish(ctx, next)
	}
	return nil
}

// slow reads what changes only when admins change the policy; a failure
// keeps the last ones.
func (p *Poller) slow(ctx context.Context, c *slurmrest.Client, next *Snapshot) {
	if a, err := c.Associations(ctx, slurmrest.AssociationFilter{}); err == nil {
		next.Associations = a
	} else {
		p.cfg.Log.Warn("associations unread: keeping the last ones", "cluster", p.cfg.Name, "error", err)
	}
	if q, err := c.QOS(ctx); err == nil {
		next.QOS = q
	} else {
		p.cfg.Log.Warn("QOS unread: keeping the last ones", "cluster", p.cfg.Name, "error", err)
	}
	if u, err := c.Users(ctx); err == nil {
		next.Users = u
	} else {
		p.cfg.Log.Warn("users unread: keeping the last ones", "cluster", p.cfg.Name, "error", err)
	}
}

// counting counts the requests sent to slurmrestd.
type counting struct {
	rt http.RoundTripper
	c  prometheus.Counter
}

func (t counting) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.Inc()
	return t.rt.RoundTrip(r)
}

// Metrics are the pollers' metrics, on a registry of the daemon's.
type Metrics struct {
	requests *prometheus.CounterVec
	polls    *prometheus.CounterVec
	reg      prometheus.Registerer

	mu      sync.Mutex
	pollers []*Poller
	started map[*Poller]time.Time // when each poller was made: the age before its first good poll
}

// NewMetrics registers the pollers' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_portal_slurmrestd_requests_total",
			Help: "Requests sent to slurmrestd, by cluster: the pollers' and the actions made as users."}, []string{"cluster"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_portal_polls_total",
			Help: "Polls of each cluster, by result (ok, error)."}, []string{"cluster", "result"}),
		reg: reg,
	}
	reg.MustRegister(m.requests, m.polls, prometheus.CollectorFunc(m.collectAge))
	return m
}

// Requests is the number of requests sent to the cluster's slurmrestd.
func (m *Metrics) Requests(cluster string) float64 {
	var out float64
	ch := make(chan prometheus.Metric, 1)
	go func() { m.requests.WithLabelValues(cluster).Collect(ch); close(ch) }()
	for metric := range ch {
		out += metricValue(metric)
	}
	return out
}

var ageDesc = prometheus.NewDesc("strata_portal_snapshot_age_seconds",
	"Age of each cluster's snapshot: the poller's lag; before the first poll that succeeded, the time since the portal started polling it.", []string{"cluster"}, nil)

func (m *Metrics) register(p *Poller) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pollers = append(m.pollers, p)
	if m.started == nil {
		m.started = map[*Poller]time.Time{}
	}
	m.started[p] = p.cfg.Now()
	m.requests.WithLabelValues(p.cfg.Name)
	// Every result from the start, so that a rate over them is defined
	// before the first failure (or success).
	m.polls.WithLabelValues(p.cfg.Name, "ok")
	m.polls.WithLabelValues(p.cfg.Name, "error")
}

func (m *Metrics) collectAge(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ps := append([]*Poller(nil), m.pollers...)
	started := make(map[*Poller]time.Time, len(m.started))
	for p, t := range m.started {
		started[p] = t
	}
	m.mu.Unlock()
	// A cluster never polled successfully has a series too, growing from
	// the start: an alert on the age fires for a cluster that never
	// answered, not only for one that stopped.
	for _, p := range ps {
		since := started[p]
		if s := p.Snapshot(); s != nil {
			since = s.At
		}
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, p.cfg.Now().Sub(since).Seconds(), p.cfg.Name)
	}
}

// ErrUnknown is returned for a cluster the portal does not serve.
var ErrUnknown = errors.New("no such cluster")

// Set is the clusters, in the configuration's order.
type Set struct {
	list   []*Poller
	byName map[string]*Poller
}

// NewSet makes a set of pollers.
func NewSet(ps ...*Poller) *Set {
	s := &Set{list: ps, byName: map[string]*Poller{}}
	for _, p := range ps {
		s.byName[p.Name()] = p
	}
	return s
}

// All returns the pollers in order.
func (s *Set) All() []*Poller { return s.list }

// Get returns the poller of a cluster.
func (s *Set) Get(name string) (*Poller, bool) {
	p, ok := s.byName[name]
	return p, ok
}

// Loops are the pollers as daemon loops.
func (s *Set) Loops() []daemon.Loop {
	var out []daemon.Loop
	for _, p := range s.list {
		out = append(out, daemon.Loop{Name: "poll " + p.Name(), Run: p.Run, Stall: 10*p.cfg.Interval + 5*time.Minute})
	}
	return out
}
