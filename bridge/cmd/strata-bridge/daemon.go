package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/bridge/internal/api"
	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/ha"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/bridge/internal/watch"
	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// registry is the daemon's private registry, with strata_build_info and
// the Go and process collectors.
func registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	buildinfo.Register(reg, "bridge")
	return reg
}

// healthDetail is what /healthz says: the last poll, and the lease.
type healthDetail struct {
	watch.Status
	Lease store.LeaseState `json:"lease"`
}

// health fails when the lease cannot be read, or, on the active bridge,
// when no poll succeeded within staleAfter, or the last one failed. A
// standby that reads the lease is healthy: it stands by.
func health(w *watch.Watcher, co *ha.Coordinator, staleAfter time.Duration, now func() time.Time) func() (any, error) {
	return func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ls, err := co.State(ctx)
		st := healthDetail{Status: w.Status(), Lease: ls}
		switch {
		case err != nil:
			return st, err
		case ls.Role == store.RoleStandby:
			return st, nil
		case st.Standby:
			return st, errors.New("active, but no poll since the take-over yet")
		}
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
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	// Every file the configuration names, secrets others can read
	// included, is checked as check-config checks it, before anything
	// starts.
	warnings, _, err := preflight(c.String("config"), cfg)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn("configuration warning", "warning", w)
	}
	// The API's token and slurmrestd's: read again when their file
	// changes, and on SIGHUP, each held to the rule at every read.
	token := &secretfile.File{Path: cfg.API.TokenFile, What: "api.token_file", Rule: secretRule, Log: log}
	if _, err := token.Get(); err != nil {
		return err
	}
	slurmToken := &secretfile.File{Path: cfg.Slurm.TokenFile, What: "slurm.token_file", Rule: secretRule, Log: log}
	if _, err := slurmToken.Get(); err != nil {
		return err
	}
	reg := registry()
	dm := deploy.NewMetrics(reg)
	metrics := metricsHandler(reg)
	e := &env{cfg: cfg}
	// Closed once Run has waited for the loops, deploys in flight
	// included.
	defer e.close()

	// The store: a PostgreSQL database that does not answer is waited for
	// in the lease loop, serving /healthz (dbwait.go); anything else wrong
	// with it ends the start here. slurmrestd is waited for there too, from
	// its first try.
	storeName := cfg.Store.Path
	if cfg.Store.Postgres() {
		storeName = cfg.Store.Database
	}
	wait := newDBWait(storeName, cfg.Slurm.URL, reg, metrics)
	openDB := func(ctx context.Context) (*store.Store, error) {
		// Bounded: a database host that drops packets would hold the
		// first try past systemd's start timeout, before READY=1.
		ctx, cancel := context.WithTimeout(ctx, dbOpenTimeout)
		defer cancel()
		return openStore(ctx, cfg)
	}
	first, err := openDB(ctx)
	switch {
	case err != nil && !pgsql.Unreachable(err):
		return err
	case err != nil:
		wait.failed(log, wait.db, err, daemon.StartBackoff.First)
	default:
		wait.reached(wait.db)
	}
	e.store = first
	if err := e.connect(ctx, log, false, nil); err != nil {
		return err
	}
	dial := func(ctx context.Context) (*slurmrest.Client, error) {
		// Bounded: a slurmrestd host that drops packets would hold each
		// try for as many HTTP timeouts as there are parsers to probe.
		ctx, cancel := context.WithTimeout(ctx, slurmConnectTimeout)
		defer cancel()
		return dialSlurm(ctx, cfg, log, slurmrest.SecretToken{File: slurmToken})
	}

	// Everything SIGHUP re-reads; a bad file keeps the one in force. A
	// file more to reload is one more daemon.Value here.
	serving := daemon.NewValue("serving quotas", e.serving, func(context.Context) (*servingquota.File, error) {
		return servingquota.Load(cfg.Policy.ServingFile)
	}).OnReload(func(f *servingquota.File) {
		log.Info("serving.json reloaded", "file", cfg.Policy.ServingFile, "tenants", len(f.Tenants))
	})
	reload := []daemon.Reloader{serving, token, slurmToken}

	// What acts, made once the store is open and slurmrestd answered: the
	// lease (on PostgreSQL one bridge of those sharing the database acts,
	// the others stand by; on SQLite it is always held), the deployer, the
	// watcher and the API.
	var (
		co      *ha.Coordinator
		w       *watch.Watcher
		started = make(chan struct{})
	)
	begin := func(st *store.Store) error {
		lease := st.NewLease(holder("strata-bridge run"), cfg.Store.LeaseTTL)
		st.SetLease(lease)
		dcfg := deployerConfig(cfg, e.kube, st, serving.Get, log, dm)
		dcfg.Jobs = e.slurm
		dcfg.Lease = lease
		dep, err := deploy.New(dcfg)
		if err != nil {
			return err
		}
		co = ha.New(ha.Config{Lease: lease, Deployer: dep, Store: st, Log: log, Metrics: ha.NewMetrics(reg)})
		if w, err = watch.New(watch.Config{Slurm: e.slurm, Deployer: dep, Store: st, Interval: cfg.Slurm.PollInterval, Log: log,
			Metrics: watch.NewMetrics(reg), Active: co.Active}); err != nil {
			return err
		}
		wait.opened(api.Handler(api.Config{Deployer: dep, Store: st, Health: health(w, co, 3*cfg.Slurm.PollInterval, time.Now),
			Metrics: metrics, Token: token.Get, AllowedHosts: apiHosts(cfg), Log: log}))
		log.Info("strata-bridge starting", "listen", cfg.Listen, "slurmrestd", cfg.Slurm.URL, "parser", e.slurm.Info().Parser,
			"poll_interval", cfg.Slurm.PollInterval, "field_manager", cfg.Kubernetes.FieldManager, "store", storeName,
			"lease_holder", lease.Holder())
		close(started)
		return nil
	}
	leaseLoop := func(ctx context.Context) error {
		sl, err := await(ctx, wait, wait.slurm, log, dial)
		if err != nil {
			return nil // stopped while waiting: it waits out every other error
		}
		e.slurm = sl
		if e.store == nil {
			st, err := await(ctx, wait, wait.db, log, openDB)
			if err != nil {
				if ctx.Err() != nil {
					return nil // stopped while waiting
				}
				return err
			}
			e.store = st
		}
		if err := begin(e.store); err != nil {
			return err
		}
		return co.Run(ctx)
	}
	// The poll loop starts once the store is open and slurmrestd
	// answered, beating the watchdog while it waits.
	pollLoop := func(ctx context.Context) error {
		t := time.NewTicker(dbBeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-started:
				return w.Run(ctx)
			case <-t.C:
				daemon.Beat(ctx)
			}
		}
	}
	return daemon.Run(ctx, daemon.Config{Log: log, Listen: cfg.Listen, Handler: wait,
		Loops: []daemon.Loop{{Name: "lease", Run: leaseLoop, Stall: 10 * cfg.Store.LeaseTTL},
			{Name: "poll", Run: pollLoop, Stall: pollStall(cfg)}},
		Reload: reload, ShutdownTimeout: 20 * time.Second,
		// A deploy answers after its rollout: the write bound must outlast it.
		HTTPTimeouts: daemon.HTTPTimeouts{Write: cfg.Kubernetes.RolloutTimeout + time.Minute}})
}

// pollStall is how long the poll loop may go without progress before the
// watchdog lets systemd restart the daemon: one deploy may wait a whole
// rollout timeout, so the stall is that plus a few polls.
func pollStall(cfg *config.Config) time.Duration {
	return max(cfg.Kubernetes.RolloutTimeout+10*cfg.Slurm.PollInterval, 5*time.Minute)
}
