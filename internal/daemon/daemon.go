// Package daemon is the one way a Strata daemon runs: its loops and its
// HTTP server in one group, stopped together on SIGINT or SIGTERM (or when
// any of them fails), SIGHUP reloads that keep the old configuration when
// the new one is bad, and systemd's notify protocol (READY=1 once serving,
// RELOADING=1 and READY=1 around a reload, STOPPING=1, and watchdog pings
// only while every watched loop makes progress).
//
// Run returns only when every loop has returned and the server has shut
// down, so whatever the loops use (a SQLite store) may be closed by the
// caller as soon as Run returns, never under a cycle still running.
//
// A daemon's main builds its parts, then hands them to Run:
//
//	rules, err := daemon.Load(ctx, "rules", func(context.Context) (reclaimrules.Rules, error) { return loadRules(path) })
//	...
//	defer st.Close() // after Run: no cycle is running any more
//	return daemon.Run(ctx, daemon.Config{
//		Log: log, Listen: cfg.Listen, Handler: h,
//		Loops:  []daemon.Loop{{Name: "poll", Run: w.Run, Stall: 10 * time.Minute}},
//		Reload: []daemon.Reloader{rules},
//	})
//
// A loop beats the watchdog with Beat(ctx) once per cycle; rules.Get()
// is the value in force.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sync/errgroup"
)

// DefaultShutdownTimeout bounds the HTTP server's graceful shutdown, and
// is how long Run waits for the loops before it logs which ones it still
// waits for.
const DefaultShutdownTimeout = 10 * time.Second

// Loop is one long-running part of a daemon: a poller, a sampling loop.
type Loop struct {
	Name string // for logs: "reclaim", "sample", "poll"
	// Run works until ctx ends, then returns nil. A loop that returns
	// before (with or without an error) stops the daemon.
	Run func(ctx context.Context) error
	// Stall puts the loop under systemd's watchdog: Run calls Beat with
	// the context it was given at least once every Stall (once per
	// cycle), and when it does not, the daemon stops pinging the watchdog
	// and systemd restarts it. Zero: the loop is not watched. Choose it
	// longer than the longest cycle that is still healthy.
	Stall time.Duration
}

// Reloader re-reads one piece of configuration on SIGHUP. When the new
// one is bad, Reload returns an error and keeps what it had: the daemon
// logs the error and runs on with the old one.
type Reloader interface {
	Reload(ctx context.Context) error
}

// ReloadFunc makes a function a Reloader.
type ReloadFunc func(ctx context.Context) error

// Reload calls f.
func (f ReloadFunc) Reload(ctx context.Context) error { return f(ctx) }

// Config is what Run runs.
type Config struct {
	Log *slog.Logger // slog.Default()

	// Listen is the HTTP server's address; Listener, when set, is used
	// instead (tests pass one on port 0). With neither, no server runs.
	Listen   string
	Listener net.Listener
	Handler  http.Handler

	Loops []Loop
	// Reload is called in order on every SIGHUP; all of them run even
	// when one fails. A part that reads one more file on SIGHUP adds its
	// Reloader here (Load makes one from a load function).
	Reload []Reloader

	ShutdownTimeout time.Duration // DefaultShutdownTimeout

	// HTTPTimeouts bound what a client may hold of the server; zero
	// fields take the defaults (DefaultHTTPTimeouts).
	HTTPTimeouts HTTPTimeouts
}

// HTTPTimeouts bound each phase of an HTTP connection, so that a client
// that connects and sends nothing, sends a body byte by byte, or keeps an
// idle connection open, holds a file descriptor and a goroutine for
// seconds, not for ever.
type HTTPTimeouts struct {
	ReadHeader time.Duration // the request line and headers
	Read       time.Duration // the whole request, body included
	// Write bounds the handler and its response, from the end of the
	// headers. A daemon whose handlers wait on a slow action (a rollout)
	// sets it above that wait, or the client gets a closed connection
	// instead of the answer.
	Write time.Duration
	Idle  time.Duration // a kept-alive connection between requests
}

// DefaultHTTPTimeouts suit Strata's APIs: small JSON requests, and
// answers that take at most a few seconds.
var DefaultHTTPTimeouts = HTTPTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: time.Minute, Idle: time.Minute}

func (t HTTPTimeouts) withDefaults() HTTPTimeouts {
	d := DefaultHTTPTimeouts
	for _, f := range []struct{ v, def *time.Duration }{{&t.ReadHeader, &d.ReadHeader}, {&t.Read, &d.Read}, {&t.Write, &d.Write}, {&t.Idle, &d.Idle}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// Run runs the loops and the server until ctx ends, SIGINT or SIGTERM
// arrives, or one of them fails; then it stops them all and waits for
// every one. Its error is the first failure, nil after a signal.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	n := notifier{log: log}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	ln := cfg.Listener
	if ln == nil && cfg.Listen != "" {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	var watched []*heartbeat
	for _, l := range cfg.Loops {
		var hb *heartbeat
		lctx := gctx
		if l.Stall > 0 {
			hb = &heartbeat{loop: l.Name, stall: l.Stall, last: time.Now()}
			watched = append(watched, hb)
			lctx = context.WithValue(gctx, heartbeatKey{}, hb)
		}
		g.Go(func() error {
			err := l.Run(lctx)
			if err == nil && gctx.Err() == nil {
				err = errors.New("it stopped on its own")
			}
			if err != nil && gctx.Err() == nil {
				return fmt.Errorf("%s loop: %w", l.Name, err)
			}
			return nil
		})
	}
	var srv *http.Server
	if ln != nil {
		to := cfg.HTTPTimeouts.withDefaults()
		srv = &http.Server{Handler: cfg.Handler, ReadHeaderTimeout: to.ReadHeader, ReadTimeout: to.Read,
			WriteTimeout: to.Write, IdleTimeout: to.Idle}
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), cfg.ShutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				log.Warn("http server did not shut down in time: closing its connections", "timeout", cfg.ShutdownTimeout, "error", err)
				_ = srv.Close()
			}
			return nil
		})
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-hup:
				reload(gctx, log, &n, cfg.Reload)
			}
		}
	})

	addr := ""
	if ln != nil {
		addr = ln.Addr().String()
	}
	log.Info("daemon ready", "listen", addr, "loops", len(cfg.Loops))
	n.send(sd.SdNotifyReady)
	if interval, err := sd.SdWatchdogEnabled(false); err != nil {
		log.Warn("systemd watchdog settings unreadable: not pinging", "error", err)
	} else if interval > 0 {
		g.Go(func() error { n.watchdog(gctx, interval/2, watched); return nil })
	}

	<-gctx.Done()
	n.send(sd.SdNotifyStopping)
	log.Info("daemon stopping: waiting for the loops to finish their cycle")
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(cfg.ShutdownTimeout):
		// Never return under a running loop: the caller closes the stores
		// next. systemd's TimeoutStopSec is the last word.
		log.Warn("loops still running after the shutdown timeout: still waiting", "timeout", cfg.ShutdownTimeout)
		err = <-done
	}
	if err != nil {
		log.Error("daemon stopped", "error", err)
		return err
	}
	log.Info("daemon stopped")
	return nil
}

// reload runs every reloader, logging each failure, between RELOADING=1
// and READY=1.
func reload(ctx context.Context, log *slog.Logger, n *notifier, rs []Reloader) {
	n.send(sd.SdNotifyReloading + "\n" + sd.SdNotifyMonotonicUsec())
	failed := 0
	for _, r := range rs {
		if err := r.Reload(ctx); err != nil {
			failed++
			log.Error("reload failed: keeping the configuration in force", "error", err)
		}
	}
	log.Info("reloaded", "reloaded", len(rs)-failed, "failed", failed)
	n.send(sd.SdNotifyReady)
}

// notifier sends to systemd's notify socket; without NOTIFY_SOCKET it does
// nothing. A failure is logged once per kind of message, not per ping.
type notifier struct {
	log    *slog.Logger
	mu     sync.Mutex
	warned bool
}

func (n *notifier) send(state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.warned {
			n.warned = true
			n.log.Warn("systemd notify failed", "state", state, "error", err)
		}
	}
}

// watchdog pings every period while every watched loop beat within its
// Stall.
func (n *notifier) watchdog(ctx context.Context, period time.Duration, loops []*heartbeat) {
	t := time.NewTicker(period)
	defer t.Stop()
	stuck := map[string]bool{}
	for {
		healthy := true
		now := time.Now()
		for _, hb := range loops {
			age := hb.age(now)
			switch {
			case age > hb.stall && !stuck[hb.loop]:
				stuck[hb.loop] = true
				n.log.Error("loop made no progress: not pinging the watchdog, so systemd restarts the daemon",
					"loop", hb.loop, "since", age.Round(time.Millisecond), "stall", hb.stall)
			case age <= hb.stall && stuck[hb.loop]:
				delete(stuck, hb.loop)
				n.log.Info("loop made progress again", "loop", hb.loop)
			}
			healthy = healthy && age <= hb.stall
		}
		if healthy {
			n.send(sd.SdNotifyWatchdog)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type heartbeatKey struct{}

type heartbeat struct {
	loop  string
	stall time.Duration
	mu    sync.Mutex
	last  time.Time
}

func (h *heartbeat) age(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return now.Sub(h.last)
}

// Beat tells the daemon's watchdog that the loop that was given ctx made
// progress (finished a cycle, or a step of a long one). Outside a watched
// loop it does nothing, so loops call it unconditionally.
func Beat(ctx context.Context) {
	if h, ok := ctx.Value(heartbeatKey{}).(*heartbeat); ok {
		h.mu.Lock()
		h.last = time.Now()
		h.mu.Unlock()
	}
}
