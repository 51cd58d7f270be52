package main

import (
	"context"
	"encoding/json"
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
)

// The controller needs slurmrestd to pick its data parser before its first
// cycle. When slurmrestd is down at start (a reboot of the admin host, a
// slurmrestd upgrade), exiting would only make systemd restart reclaimd
// again and again, and the alert that fires would be "reclaimd down" rather
// than what is wrong. So it serves at once, says what it waits for in
// /healthz and strata_reclaim_slurmrestd_connected, and tries again.

// connectRetry is the first wait between tries; it doubles up to
// connectRetryMax.
var (
	connectRetry    = 2 * time.Second
	connectRetryMax = time.Minute
)

// waiting is the controller's state before slurmrestd answered: what
// /healthz says, and the handler that takes over once the controller runs.
type waiting struct {
	url       string
	since     time.Time
	connected prometheus.Gauge

	mu      sync.Mutex
	lastErr error
	next    atomic.Pointer[http.Handler] // the controller's, once it runs
	early   http.Handler                 // /healthz and /metrics while waiting
	// lease, on PostgreSQL, says whether this controller acts or stands
	// by; a standby is healthy (200) and says so.
	lease func() lease.State
	// reads serves the /v1 reads from the store while this controller
	// does not act (a standby, or waiting for slurmrestd): set before
	// serving.
	reads http.Handler
}

func newWaiting(url string, reg *prometheus.Registry) *waiting {
	w := &waiting{url: url, since: time.Now(), connected: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_reclaim_slurmrestd_connected",
		Help: "1 once the controller reached slurmrestd and picked its data parser; 0 while it waits for it at start (its /healthz says why).",
	})}
	reg.MustRegister(w.connected)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		if w.lease != nil {
			if st := w.lease(); !st.Held {
				rw.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(rw).Encode(struct {
					Role  string      `json:"role"`
					Lease lease.State `json:"lease"`
				}{"standby", st})
				return
			}
		}
		w.mu.Lock()
		err := w.lastErr
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(rw, "waiting for slurmrestd at %s since %s: %v\n", w.url, w.since.Format(time.RFC3339), err)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/v1/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.reads == nil {
			http.NotFound(rw, r)
			return
		}
		w.reads.ServeHTTP(rw, r)
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
// and beating the watchdog between tries (waiting is not being stuck).
func connect[T any](ctx context.Context, w *waiting, log *slog.Logger, dial func(context.Context) (T, error)) (T, error) {
	wait := connectRetry
	for {
		c, err := dial(ctx)
		if err == nil {
			w.connected.Set(1)
			return c, nil
		}
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		log.Error("slurmrestd does not answer: reclaimd acts on nothing until it does, and tries again", "url", w.url, "retry_in", wait, "error", err)
		daemon.Beat(ctx)
		select {
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, connectRetryMax)
	}
}
