// Package ha runs a bridge as active or standby on a shared PostgreSQL
// database: it renews the store's lease (store.Lease) every third of its
// time to live, and when this bridge takes the lease over it first
// finishes what the previous holder left applying (deploy.Resume), then
// lets the watcher and the API act (Active). A bridge that loses the
// lease stops acting at once: the watcher skips its cycles, the API
// refuses changes (503), and the deployer's fence stops an action in
// flight before its next call to the apiserver.
//
// On SQLite the lease is always held: the bridge is active from its
// first renewal, as it always was.
package ha

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/daemon"
)

// Metrics of the lease.
type Metrics struct {
	Held       prometheus.Gauge
	Generation prometheus.Gauge
	TakeOvers  prometheus.Counter
	Resumed    *prometheus.CounterVec
}

// NewMetrics registers the lease's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_bridge_lease_held",
			Help: "1 while this bridge holds the lease and acts (active), 0 while it is the standby.",
		}),
		Generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_bridge_lease_generation",
			Help: "The generation of the lease this bridge holds; 0 while it holds none.",
		}),
		TakeOvers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_bridge_lease_acquired_total",
			Help: "Times this bridge took the lease (a new generation): its start, and each take-over from another bridge.",
		}),
		Resumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_bridge_resumed_total",
			Help: "Deploys and rollbacks left applying by a bridge that stopped, finished by this one, by outcome.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.Held, m.Generation, m.TakeOvers, m.Resumed)
	return m
}

// Config of a Coordinator.
type Config struct {
	Lease    *store.Lease
	Deployer *deploy.Deployer
	Store    *store.Store
	Log      *slog.Logger
	Metrics  *Metrics
	// Every is how often the lease is renewed; default a third of its
	// time to live.
	Every time.Duration
}

// Coordinator holds the lease and says when this bridge may act.
type Coordinator struct {
	cfg Config

	mu       sync.Mutex
	ready    int64 // the generation whose left-over versions are finished
	resuming int64 // the generation being resumed; 0: none
}

// New makes a coordinator.
func New(cfg Config) *Coordinator {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if cfg.Every <= 0 {
		cfg.Every = cfg.Lease.TTL() / 3
	}
	return &Coordinator{cfg: cfg}
}

// Active says whether this bridge acts now: it holds the lease and has
// finished what the previous holder left.
func (c *Coordinator) Active() bool {
	gen := c.cfg.Lease.Generation()
	c.mu.Lock()
	defer c.mu.Unlock()
	return gen != 0 && gen == c.ready
}

// State is the lease as the database has it, for /healthz.
func (c *Coordinator) State(ctx context.Context) (store.LeaseState, error) {
	st, err := c.cfg.Lease.State(ctx)
	if !c.Active() {
		st.Role = store.RoleStandby
	}
	return st, err
}

// Run renews the lease until ctx ends, then releases it so that a
// standby takes over at its next try.
func (c *Coordinator) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c.Step(ctx, &wg)
		daemon.Beat(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := c.cfg.Lease.Release(rctx); err != nil {
				c.cfg.Log.Warn("the lease could not be released: the standby takes over once it runs out", "error", err)
			} else {
				c.cfg.Log.Info("lease released")
			}
			return nil
		case <-t.C:
		}
	}
}

// Step renews (or tries to take) the lease once, and starts finishing
// the left-over versions when this bridge holds a new generation; wg
// counts that work.
func (c *Coordinator) Step(ctx context.Context, wg *sync.WaitGroup) {
	before := c.cfg.Lease.Generation()
	_, err := c.cfg.Lease.Acquire(ctx)
	gen := c.cfg.Lease.Generation()
	if err != nil {
		c.cfg.Log.Warn("lease not renewed", "holder", c.cfg.Lease.Holder(), "generation", gen, "error", err)
	}
	c.cfg.Metrics.Generation.Set(float64(gen))
	c.mu.Lock()
	ready, resuming := c.ready, c.resuming
	c.mu.Unlock()
	switch gen {
	case 0:
		c.cfg.Metrics.Held.Set(0)
		if before != 0 {
			c.cfg.Log.Warn("lease lost: this bridge is the standby now and acts no more", "holder", c.cfg.Lease.Holder(), "generation", before)
		}
		return
	case ready:
		c.cfg.Metrics.Held.Set(1)
		return
	case resuming:
		return
	}
	c.cfg.Metrics.TakeOvers.Inc()
	c.cfg.Log.Info("lease taken: finishing what was left applying before acting", "holder", c.cfg.Lease.Holder(), "generation", gen)
	c.mu.Lock()
	c.resuming = gen
	c.mu.Unlock()
	wg.Go(func() { c.resume(ctx, gen) })
}

func (c *Coordinator) resume(ctx context.Context, gen int64) {
	defer func() {
		c.mu.Lock()
		c.resuming = 0
		c.mu.Unlock()
	}()
	results, err := c.cfg.Deployer.Resume(ctx)
	for _, r := range results {
		c.cfg.Metrics.Resumed.WithLabelValues(r.Outcome).Inc()
		// The watcher is done with the job: its deploy was finished here.
		if _, err := c.cfg.Store.MarkSeen(store.WithGeneration(context.WithoutCancel(ctx), gen), r.JobID, r.Outcome, r.Message, true,
			time.Now()); err != nil {
			c.cfg.Log.Warn("the resumed job's verdict could not be recorded: the watcher judges it again", "job_id", r.JobID, "error", err)
		}
	}
	if err != nil {
		c.cfg.Log.Error("finishing what was left applying failed: tried again at the next renewal", "generation", gen, "error", err)
		return
	}
	c.mu.Lock()
	c.ready = gen
	c.mu.Unlock()
	c.cfg.Metrics.Held.Set(1)
	c.cfg.Log.Info("active: acting for the cluster", "holder", c.cfg.Lease.Holder(), "generation", gen, "resumed", len(results))
}
