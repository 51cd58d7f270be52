package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/pgsql"
)

// A PostgreSQL database, or a slurmrestd, that does not answer when the
// bridge starts (a reboot of the database or admin host, a fail-over, a
// slurmrestd upgrade, a start before theirs) is waited for, as reclaimd
// waits for its own: exiting would only make systemd restart the bridge
// again and again, and the alert that fires would be "bridge down" rather
// than what is wrong. So the bridge serves at once, says what it waits
// for in /healthz and strata_bridge_database_connected or
// strata_bridge_slurmrestd_connected, keeps the watchdog fed, and tries
// again (daemon.Retry's back-off). Of the database's failures only one to
// reach the server is waited for: a bad URL or password file, a refused
// login or a schema newer than this bridge ends the start, as before; so
// does a bad configuration, checked before anything starts.

// dbOpenTimeout bounds one try to open the store: connecting and
// migrating. slurmConnectTimeout bounds one try to reach slurmrestd (all
// its parsers' probes): less than the lease loop's shortest stall (ten
// lease TTLs, 30 s), as no beat comes during a try. The poll loop beats
// the watchdog every dbBeat while it waits for both.
var (
	dbOpenTimeout       = 30 * time.Second
	slurmConnectTimeout = 20 * time.Second
	dbBeat              = 5 * time.Second
)

// awaited is one thing the bridge waits for at start: its gauge, and why
// it is not there yet (nil once it is).
type awaited struct {
	noun      string // "the database", "slurmrestd", for the log
	key, name string // the log's key for name: the database without a password, slurmrestd's URL
	label     string // "the database <name>", "slurmrestd at <url>", for /healthz
	short     string // "its database", "slurmrestd", for the API's 503
	// waitOut says whether an error is waited out (a server that does
	// not answer) or ends the start.
	waitOut   func(error) bool
	connected prometheus.Gauge
	err       error
}

// dbWait is the bridge before its store is open and slurmrestd answered:
// what /healthz says, and the handler that takes over once both are.
type dbWait struct {
	since time.Time

	mu        sync.Mutex
	db, slurm *awaited
	next      atomic.Pointer[http.Handler]
	early     http.Handler
}

func newDBWait(target, slurmURL string, reg prometheus.Registerer, metrics http.Handler) *dbWait {
	w := &dbWait{since: time.Now(), db: &awaited{noun: "the database", key: "database", name: target, label: "the database " + target,
		short: "its database", waitOut: pgsql.Unreachable, connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_bridge_database_connected",
			Help: "1 once the bridge opened its store; 0 while it waits at start for a PostgreSQL database that does not answer (its /healthz says why).",
		}), err: errors.New("not opened yet")},
		// Every failure to reach slurmrestd is waited out: the
		// configuration and the token were checked before the daemon
		// started, and a token that slurmrestd refuses can be replaced
		// while the bridge waits (SIGHUP, or the file changing).
		slurm: &awaited{noun: "slurmrestd", key: "url", name: slurmURL, label: "slurmrestd at " + slurmURL, short: "slurmrestd",
			waitOut: func(error) bool { return true }, connected: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "strata_bridge_slurmrestd_connected",
				Help: "1 once the bridge reached slurmrestd and picked its data parser; 0 while it waits for it at start (its /healthz says why).",
			}), err: errors.New("not reached yet")}}
	reg.MustRegister(w.db.connected, w.slurm.connected)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.WriteHeader(http.StatusServiceUnavailable)
		for _, a := range w.waitingFor() {
			_, _ = fmt.Fprintf(rw, "waiting for %s since %s: %v\n", a.label, w.since.Format(time.RFC3339), a.err)
		}
	})
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) {
		var names []string
		for _, a := range w.waitingFor() {
			names = append(names, a.short)
		}
		rw.Header().Set("Retry-After", "10")
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(rw).Encode(map[string]string{
			"error": "the bridge waits for " + strings.Join(names, " and ") + ": nothing can be read or changed yet"})
	})
	w.early = mux
	return w
}

// waitingFor is what the bridge still waits for, copied.
func (w *dbWait) waitingFor() []awaited {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []awaited
	for _, a := range []*awaited{w.db, w.slurm} {
		if a.err != nil {
			out = append(out, *a)
		}
	}
	return out
}

// failed records why a (w.db or w.slurm) is not there yet, and logs it
// with the wait before the next try.
func (w *dbWait) failed(log *slog.Logger, a *awaited, err error, retryIn time.Duration) {
	w.mu.Lock()
	a.err = err
	w.mu.Unlock()
	log.Error(a.noun+" does not answer: the bridge acts on nothing until it does, and tries again", a.key, a.name,
		"retry_in", retryIn, "error", err)
}

// reached records that a is there.
func (w *dbWait) reached(a *awaited) {
	w.mu.Lock()
	a.err = nil
	w.mu.Unlock()
	a.connected.Set(1)
}

// opened hands the routes over to the bridge's own handler.
func (w *dbWait) opened(h http.Handler) {
	w.reached(w.db)
	w.reached(w.slurm)
	w.next.Store(&h)
}

// ServeHTTP serves the bridge's routes once the store is open and
// slurmrestd answered, and /healthz and /metrics before.
func (w *dbWait) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if h := w.next.Load(); h != nil {
		(*h).ServeHTTP(rw, r)
		return
	}
	w.early.ServeHTTP(rw, r)
}

// await calls try until it succeeds, fails with an error a does not wait
// out, or ctx ends; it records and logs each failure and beats the
// watchdog while it waits (waiting is not being stuck).
func await[T any](ctx context.Context, w *dbWait, a *awaited, log *slog.Logger, try func(context.Context) (T, error)) (T, error) {
	v, err := daemon.Retry(ctx, daemon.StartBackoff, try, func(err error, wait time.Duration) bool {
		if !a.waitOut(err) {
			return false
		}
		w.failed(log, a, err, wait)
		return true
	})
	if err == nil {
		w.reached(a)
	}
	return v, err
}

// metricsHandler serves reg.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
