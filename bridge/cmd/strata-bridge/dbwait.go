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

	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/pgsql"
)

// A PostgreSQL database that does not answer when the bridge starts (a
// reboot of the database host, a fail-over, a start before the
// database's) is waited for, as reclaimd waits for its own: exiting would
// only make systemd restart the bridge again and again, and the alert
// that fires would be "bridge down" rather than what is wrong. So the
// bridge serves at once, says what it waits for in /healthz and
// strata_bridge_database_connected, keeps the watchdog fed, and tries
// again. Only a failure to reach the server is waited for: a bad URL or
// password file, a refused login or a schema newer than this bridge ends
// the start, as before.

// dbRetry is the first wait between tries to open the store; it doubles
// up to dbRetryMax. dbOpenTimeout bounds one try: connecting and
// migrating.
var (
	dbRetry       = 2 * time.Second
	dbRetryMax    = time.Minute
	dbOpenTimeout = 30 * time.Second
	dbBeat        = 5 * time.Second
)

// dbWait is the bridge before its store is open: what /healthz says, and
// the handler that takes over once it is.
type dbWait struct {
	target    string // the database, without a password
	since     time.Time
	connected prometheus.Gauge

	mu    sync.Mutex
	err   error // the last try's
	next  atomic.Pointer[http.Handler]
	early http.Handler
}

func newDBWait(target string, reg prometheus.Registerer, metrics http.Handler) *dbWait {
	w := &dbWait{target: target, since: time.Now(), connected: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_bridge_database_connected",
		Help: "1 once the bridge opened its store; 0 while it waits at start for a PostgreSQL database that does not answer (its /healthz says why).",
	}), err: fmt.Errorf("not opened yet")}
	reg.MustRegister(w.connected)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		w.mu.Lock()
		err := w.err
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(rw, "waiting for the database %s since %s: %v\n", w.target, w.since.Format(time.RFC3339), err)
	})
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Retry-After", "10")
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(rw).Encode(map[string]string{"error": "the bridge waits for its database: nothing can be read or changed yet"})
	})
	w.early = mux
	return w
}

// failed records why the store is not open yet.
func (w *dbWait) failed(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

// opened hands the routes over to the bridge's own handler.
func (w *dbWait) opened(h http.Handler) {
	w.next.Store(&h)
	w.connected.Set(1)
}

// ServeHTTP serves the bridge's routes once the store is open, and
// /healthz and /metrics before.
func (w *dbWait) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if h := w.next.Load(); h != nil {
		(*h).ServeHTTP(rw, r)
		return
	}
	w.early.ServeHTTP(rw, r)
}

// waitStore calls open until it succeeds, fails other than by the
// database being unreachable, or ctx ends; it logs each failure and beats
// the watchdog between tries (waiting is not being stuck).
func waitStore(ctx context.Context, w *dbWait, log *slog.Logger, open func(context.Context) (*store.Store, error)) (*store.Store, error) {
	wait := dbRetry
	for {
		st, err := open(ctx)
		if err == nil || !pgsql.Unreachable(err) {
			return st, err
		}
		w.failed(err)
		log.Error("the database does not answer: the bridge acts on nothing until it does, and tries again", "database", w.target,
			"retry_in", wait, "error", err)
		if err := sleepBeating(ctx, wait); err != nil {
			return nil, err
		}
		wait = min(2*wait, dbRetryMax)
	}
}

// sleepBeating waits d, or until ctx ends, beating the watchdog at once
// and every dbBeat: a wait longer than the lease loop's stall (ten lease
// TTLs, 30 s at the shortest) is not a stall.
func sleepBeating(ctx context.Context, d time.Duration) error {
	daemon.Beat(ctx)
	end := time.NewTimer(d)
	defer end.Stop()
	t := time.NewTicker(dbBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return nil
		case <-t.C:
			daemon.Beat(ctx)
		}
	}
}

// metricsHandler serves reg.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
