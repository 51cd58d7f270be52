package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/pgsql"
)

// The controller needs slurmrestd to pick its data parser before its first
// cycle. When slurmrestd is down at start (a reboot of the admin host, a
// slurmrestd upgrade), exiting would only make systemd restart reclaimd
// again and again, and the alert that fires would be "reclaimd down" rather
// than what is wrong. So it serves at once, says what it waits for in
// /healthz and strata_reclaim_slurmrestd_connected, and tries again.

// waiting is the controller's state before slurmrestd answered: what
// /healthz says, and the handler that takes over once the controller runs.
type waiting struct {
	url       string
	since     time.Time
	connected prometheus.Gauge
	// dbConnected is 1 once the store is open; 0 while a PostgreSQL
	// database that does not answer is waited for at start.
	dbConnected prometheus.Gauge

	mu      sync.Mutex
	lastErr error
	// dbWait is why the store is not open yet (nil once it is), and
	// dbTarget the database it waits for, without a password.
	dbWait   error
	dbTarget string
	next     atomic.Pointer[http.Handler] // the controller's, once it runs
	early    http.Handler                 // /healthz and /metrics while waiting
	// lease, on PostgreSQL, says whether this controller acts or stands
	// by; a standby is healthy (200) and says so. Set once the store is
	// open.
	lease func() lease.State
	// reads serves the /v1 reads from the store while this controller
	// does not act (a standby, or waiting for slurmrestd): set once the
	// store is open.
	reads http.Handler
}

// opened records that the store is open, with the lease (nil on SQLite)
// and the read API over it.
func (w *waiting) opened(ls func() lease.State, reads http.Handler) {
	w.mu.Lock()
	w.dbWait, w.lease, w.reads = nil, ls, reads
	w.mu.Unlock()
	w.dbConnected.Set(1)
}

func newWaiting(url string, reg *prometheus.Registry) *waiting {
	w := &waiting{url: url, since: time.Now(), connected: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_reclaim_slurmrestd_connected",
		Help: "1 once the controller reached slurmrestd and picked its data parser; 0 while it waits for it at start (its /healthz says why).",
	}), dbConnected: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_reclaim_database_connected",
		Help: "1 once the controller opened its store; 0 while it waits at start for a PostgreSQL database that does not answer (its /healthz says why).",
	}), dbWait: errors.New("not opened yet")}
	reg.MustRegister(w.connected, w.dbConnected)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		w.mu.Lock()
		err, dbWait, target, ls := w.lastErr, w.dbWait, w.dbTarget, w.lease
		w.mu.Unlock()
		if dbWait != nil {
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(rw, "waiting for the database %s since %s: %v\n", target, w.since.Format(time.RFC3339), dbWait)
			return
		}
		if ls != nil {
			if st := ls(); !st.Held {
				rw.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(rw).Encode(struct {
					Role  string      `json:"role"`
					Lease lease.State `json:"lease"`
				}{"standby", st})
				return
			}
		}
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(rw, "waiting for slurmrestd at %s since %s: %v\n", w.url, w.since.Format(time.RFC3339), err)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/v1/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		reads := w.reads
		w.mu.Unlock()
		if reads == nil {
			rw.Header().Set("Retry-After", "10")
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(rw).Encode(map[string]string{"error": "reclaimd waits for its database: no record can be read yet"})
			return
		}
		reads.ServeHTTP(rw, r)
	}))
	w.early = mux
	return w
}

// ServeHTTP serves the controller's routes once it runs, and /healthz and
// /metrics before.
func (w *waiting) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if h := w.next.Load(); h != nil {
		(*h).ServeHTTP(rw, r)
		return
	}
	w.early.ServeHTTP(rw, r)
}

// connect calls dial until it succeeds or ctx ends, logging each failure
// and beating the watchdog while it waits (waiting is not being stuck).
func connect[T any](ctx context.Context, w *waiting, log *slog.Logger, dial func(context.Context) (T, error)) (T, error) {
	c, err := daemon.Retry(ctx, daemon.StartBackoff, dial, func(err error, wait time.Duration) bool {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		log.Error("slurmrestd does not answer: reclaimd acts on nothing until it does, and tries again", "url", w.url, "retry_in", wait, "error", err)
		return true
	})
	if err == nil {
		w.connected.Set(1)
	}
	return c, err
}

// openStore opens the store, waiting for a PostgreSQL database that does
// not answer (a reboot of the database host, a fail-over, a start before
// the database's) as connect waits for slurmrestd: exiting would only make
// systemd restart reclaimd again and again. Only a failure to reach the
// server is waited for; a bad URL or password file, a refused login or a
// schema newer than this reclaimd ends the start, as before.
func openStore[T any](ctx context.Context, w *waiting, log *slog.Logger, target string, open func(context.Context) (T, error)) (T, error) {
	return daemon.Retry(ctx, daemon.StartBackoff, open, func(err error, wait time.Duration) bool {
		if !pgsql.Unreachable(err) {
			return false
		}
		w.mu.Lock()
		w.dbWait, w.dbTarget = err, target
		w.mu.Unlock()
		log.Error("the database does not answer: reclaimd acts on nothing until it does, and tries again", "database", target, "retry_in", wait, "error", err)
		return true
	})
}

// openTimeout bounds one try to open the store: connecting and migrating.
var openTimeout = 30 * time.Second
