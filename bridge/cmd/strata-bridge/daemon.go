package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/bridge/internal/api"
	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/watch"
	"github.com/strata-hpc/strata/internal/servingquota"
)

// Version is set by the build.
var Version = "dev"

// registry is the daemon's private registry with strata_build_info and
// the Go and process collectors.
func registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_build_info",
		Help: "Build of this Strata part; the value is always 1.",
	}, []string{"part", "version", "goversion"})
	build.WithLabelValues("bridge", Version, runtime.Version()).Set(1)
	reg.MustRegister(build, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// health fails when no poll succeeded within staleAfter, or the last one
// failed.
func health(w *watch.Watcher, staleAfter time.Duration, now func() time.Time) func() (any, error) {
	return func() (any, error) {
		st := w.Status()
		switch {
		case st.At.IsZero():
			return st, errors.New("no poll of slurmrestd yet")
		case !st.OK:
			return st, fmt.Errorf("the last poll failed: %s", st.Error)
		case now().Sub(st.At) > staleAfter:
			return st, fmt.Errorf("the last poll, at %s, is older than %s", st.At.Format(time.RFC3339), staleAfter)
		}
		return st, nil
	}
}

func cmdRun(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	reg := registry()
	dm := deploy.NewMetrics(reg)
	e, err := open(ctx, c, log, true, true, dm)
	if err != nil {
		return err
	}
	defer e.close()
	cfg := e.cfg

	// serving.json is reloaded on SIGHUP; a bad file keeps the one in force.
	var mu sync.RWMutex
	serving := e.serving
	current := func() *servingquota.File { mu.RLock(); defer mu.RUnlock(); return serving }
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			f, err := servingquota.Load(cfg.Policy.ServingFile)
			if err != nil {
				log.Error("serving.json reload failed: keeping the one in force", "file", cfg.Policy.ServingFile, "error", err)
				continue
			}
			mu.Lock()
			serving = f
			mu.Unlock()
			log.Info("serving.json reloaded", "file", cfg.Policy.ServingFile, "tenants", len(f.Tenants))
		}
	}()
	dcfg := deployerConfig(cfg, e.kube, e.store, current, log, dm)
	dcfg.Jobs = e.slurm
	dep, err := deploy.New(dcfg)
	if err != nil {
		return err
	}
	w, err := watch.New(watch.Config{Slurm: e.slurm, Deployer: dep, Store: e.store, Interval: cfg.Slurm.PollInterval, Log: log,
		Metrics: watch.NewMetrics(reg)})
	if err != nil {
		return err
	}
	h := api.Handler(api.Config{Deployer: dep, Store: e.store, Health: health(w, 3*cfg.Slurm.PollInterval, time.Now),
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	log.Info("strata-bridge starting", "listen", cfg.Listen, "slurmrestd", cfg.Slurm.URL, "parser", e.slurm.Info().Parser,
		"poll_interval", cfg.Slurm.PollInterval, "field_manager", cfg.Kubernetes.FieldManager, "store", cfg.Store.Path)
	return serve(ctx, cfg.Listen, h, log, w.Run)
}

// serve runs loop and an HTTP server until ctx ends, then shuts the server
// down with a deadline.
func serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger, loop func(context.Context) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); errc <- loop(lctx) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	sctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_ = srv.Shutdown(sctx)
	select {
	case <-done:
	case <-sctx.Done():
		log.Warn("the poll loop did not stop in time")
	}
	log.Info("stopped")
	return err
}
