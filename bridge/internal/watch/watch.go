// Package watch is strata-bridge's trigger: it polls slurmrestd for jobs
// (one conditional request per interval, with update_time, so an idle
// cluster costs slurmctld almost nothing), selects the jobs that completed
// with exit code 0 and that it has not judged yet, and hands each to the
// deployer, which serves it when it asked to be (a strata:serve= comment
// or strata-serve.yaml) and says why not otherwise. Every verdict is
// stored, so each job is deployed once however often it is listed and
// however often the bridge restarts.
//
// It never acts on stale data: when slurmrestd fails, the cycle is skipped
// and says so in the log, the status (/healthz) and the poll errors
// metric. Nor does it deploy into a cluster it cannot reach: when the
// Kubernetes apiserver is not ready, the cycle is skipped too (no deploy
// attempt is spent on it) and the status says so, so /healthz fails while
// Kubernetes is down.
package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Slurm is what the watcher needs of slurmrestd (*slurmrest.Client).
type Slurm interface {
	Jobs(ctx context.Context, since time.Time) (slurmrest.JobList, error)
}

// Verdicts on a job, as stored and counted.
const (
	VerdictNotRequested = "not-requested" // no marker: nothing to do
	VerdictRefused      = "refused"       // a check failed; an admin can deploy it after the fix
	VerdictError        = "error"         // the deploy failed; tried again next cycle up to MaxAttempts
	// verdictLeaseLost is no verdict: this bridge lost the lease during
	// the deploy, and records nothing.
	verdictLeaseLost = "lease-lost"
)

// Select returns the jobs that completed with exit code 0 and are not
// settled, oldest end first (so of two versions of one model that end in
// the same cycle the newer is applied last and stays current).
func Select(jobs []slurmrest.Job, settled map[int64]bool) []slurmrest.Job {
	var out []slurmrest.Job
	for _, j := range jobs {
		if settled[j.ID] || j.State.Base() != "COMPLETED" || j.ExitCode != 0 {
			continue
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b slurmrest.Job) int {
		return cmp.Or(a.EndTime.Compare(b.EndTime), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Config of a Watcher.
type Config struct {
	Slurm    Slurm
	Deployer *deploy.Deployer
	Store    *store.Store
	Interval time.Duration
	// MaxAttempts bounds the deploys of one job that fail for other
	// reasons than a refusal (the apiserver down); default 3.
	MaxAttempts int
	// KeepSeen is how long verdicts are kept (default 30 days): far longer
	// than slurmctld lists a finished job.
	KeepSeen time.Duration
	Log      *slog.Logger
	Metrics  *Metrics
	Now      func() time.Time
	// Active says whether this bridge acts (it holds the lease: see
	// internal/ha); a standby skips its cycles without asking slurmrestd
	// anything, so two bridges cost slurmctld what one does. nil: always.
	Active func() bool
}

// Watcher polls and deploys.
type Watcher struct {
	cfg Config

	mu     sync.Mutex
	since  time.Time
	jobs   []slurmrest.Job // the last full answer, kept while slurmctld says nothing changed
	status Status
}

// Status is the outcome of the last poll, for /healthz.
type Status struct {
	At       time.Time `json:"at"`
	OK       bool      `json:"ok"`
	Error    string    `json:"error,omitempty"`
	Jobs     int       `json:"jobs"`
	Selected int       `json:"selected"`
	Deployed int       `json:"deployed"`
	// Standby says the cycle was skipped: another bridge holds the lease.
	Standby bool `json:"standby,omitempty"`
}

// Metrics of the watcher.
type Metrics struct {
	LastPoll   prometheus.Gauge
	PollErrors prometheus.Counter
	Verdicts   *prometheus.CounterVec
}

// NewMetrics registers the watcher's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LastPoll: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_bridge_last_poll_timestamp_seconds",
			Help: "Time of the last poll of slurmrestd that succeeded, in seconds since the epoch.",
		}),
		PollErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_bridge_poll_errors_total",
			Help: "Polls of slurmrestd that failed; the cycle was skipped.",
		}),
		Verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_bridge_jobs_judged_total",
			Help: "Completed jobs the watcher judged, by verdict (not-requested, refused, error, or the deploy's outcome).",
		}, []string{"verdict"}),
	}
	for _, v := range []string{VerdictNotRequested, VerdictRefused, VerdictError, store.OutcomeReady, store.OutcomeTimeout, store.OutcomeFailed} {
		m.Verdicts.WithLabelValues(v)
	}
	reg.MustRegister(m.LastPoll, m.PollErrors, m.Verdicts)
	return m
}

// New makes a watcher.
func New(cfg Config) (*Watcher, error) {
	if cfg.Slurm == nil || cfg.Deployer == nil || cfg.Store == nil {
		return nil, errors.New("watch: Slurm, Deployer and Store are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.KeepSeen <= 0 {
		cfg.KeepSeen = 30 * 24 * time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return &Watcher{cfg: cfg}, nil
}

// Status is the outcome of the last poll.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Run polls at once and then every interval until ctx ends. Each poll,
// and each job a poll judges, beats the daemon's watchdog.
func (w *Watcher) Run(ctx context.Context) error {
	pruned := false
	for {
		active := w.cfg.Active == nil || w.cfg.Active()
		if active && !pruned {
			pruned = true
			if n, err := w.cfg.Store.PruneSeen(ctx, w.cfg.Now().Add(-w.cfg.KeepSeen)); err != nil {
				w.cfg.Log.Warn("pruning old verdicts failed", "error", err)
			} else if n > 0 {
				w.cfg.Log.Info("old verdicts pruned", "jobs", n)
			}
		}
		st, err := w.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			w.cfg.Log.Warn("poll failed: nothing was acted on this cycle", "error", err)
		}
		daemon.Beat(ctx) // a poll ended, failed or not: the loop is not stuck
		// A standby looks again within a second whether it became
		// active (it asks slurmrestd nothing meanwhile), so that it
		// polls at once after a take-over.
		wait := w.cfg.Interval
		if st.Standby {
			wait = min(wait, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Poll runs one cycle: read the jobs, select, deploy, record.
func (w *Watcher) Poll(ctx context.Context) (Status, error) {
	st := Status{At: w.cfg.Now()}
	if w.cfg.Active != nil && !w.cfg.Active() {
		st.OK, st.Standby = true, true
		w.mu.Lock()
		w.status = st
		w.since = time.Time{} // the active bridge may have seen anything since: list everything when this one takes over
		w.mu.Unlock()
		return st, nil
	}
	err := w.poll(ctx, &st)
	if err != nil {
		st.Error = err.Error()
	}
	st.OK = err == nil
	w.mu.Lock()
	w.status = st
	w.mu.Unlock()
	return st, err
}

func (w *Watcher) poll(ctx context.Context, st *Status) error {
	w.mu.Lock()
	since := w.since
	w.mu.Unlock()
	list, err := w.cfg.Slurm.Jobs(ctx, since)
	if err != nil {
		w.cfg.Metrics.PollErrors.Inc()
		return fmt.Errorf("slurmrestd: %w", err)
	}
	w.cfg.Metrics.LastPoll.Set(float64(st.At.UnixMilli()) / 1000)
	w.mu.Lock()
	if !list.Unchanged {
		w.jobs = list.Jobs
	}
	w.since = list.Updated
	jobs := w.jobs
	w.mu.Unlock()
	if err := w.cfg.Deployer.Ping(ctx); err != nil {
		return err
	}
	settled, err := w.cfg.Store.Settled(ctx)
	if err != nil {
		return fmt.Errorf("read verdicts: %w", err)
	}
	sel := Select(jobs, settled)
	st.Jobs, st.Selected = len(jobs), len(sel)
	for _, j := range sel {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		daemon.Beat(ctx) // each deploy may wait a whole rollout timeout
		verdict, msg, done := w.judge(ctx, j)
		if verdict == verdictLeaseLost {
			// Not this bridge's to judge any more: the holder of the
			// lease finishes the job (ha, deploy.Resume).
			return errors.New(msg)
		}
		w.cfg.Metrics.Verdicts.WithLabelValues(verdict).Inc()
		if verdict == store.OutcomeReady || verdict == store.OutcomeTimeout {
			st.Deployed++
		}
		seen, err := w.cfg.Store.MarkSeen(context.WithoutCancel(ctx), j.ID, verdict, msg, done, w.cfg.Now())
		if err != nil {
			return err
		}
		if verdict == VerdictError {
			w.cfg.Log.Warn("deploy of a completed job failed", "job_id", j.ID, "attempt", seen.Attempts, "of", w.cfg.MaxAttempts,
				"gave_up", seen.Done, "error", msg)
		}
	}
	return nil
}

// judge deploys one job and returns its verdict, a message, and whether
// the job is settled.
func (w *Watcher) judge(ctx context.Context, j slurmrest.Job) (verdict, msg string, done bool) {
	res, err := w.cfg.Deployer.Deploy(ctx, j, deploy.Options{Reason: "job completed and asked to be served"})
	var refusal *deploy.Refusal
	switch {
	case errors.Is(err, deploy.ErrNotRequested):
		return VerdictNotRequested, "", true
	case errors.As(err, &refusal):
		return VerdictRefused, refusal.Error(), true
	case errors.Is(err, store.ErrLeaseLost):
		return verdictLeaseLost, err.Error(), false
	case err != nil:
		prev, perr := w.cfg.Store.Seen(ctx, j.ID)
		attempts := 1
		if perr == nil {
			attempts = prev.Attempts + 1
		}
		return VerdictError, err.Error(), attempts >= w.cfg.MaxAttempts
	}
	return res.Outcome, res.Message, true
}
