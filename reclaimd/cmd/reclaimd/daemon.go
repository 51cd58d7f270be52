package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/config"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// reloads is what the controller re-reads on SIGHUP, each kept as it was
// when its new file is bad. A file more to reload is a field more here,
// made with daemon.Load in newReloads and listed in list.
type reloads struct {
	rules   *daemon.Value[reclaimrules.Rules]
	tenants *daemon.Value[*tenantmap.Map]
}

func newReloads(ctx context.Context, cfg config.Config, log *slog.Logger) (*reloads, error) {
	rules, err := daemon.Load(ctx, "rules", func(context.Context) (reclaimrules.Rules, error) { return loadJudgeableRules(cfg) })
	if err != nil {
		return nil, err
	}
	rules.OnReload(func(r reclaimrules.Rules) {
		log.Info("rules reloaded", "file", cfg.RulesFile, "rules", len(r.Rules), "dry_run", r.DryRun)
	})
	// Without a valid tenant map every tenant label and decision would be
	// wrong: reclaimd does not start.
	tenants, err := daemon.Load(ctx, "tenants", func(context.Context) (*tenantmap.Map, error) { return tenantmap.Load(cfg.TenantsFile) })
	if err != nil {
		return nil, err
	}
	tenants.OnReload(func(m *tenantmap.Map) {
		log.Info("tenant map reloaded", "file", cfg.TenantsFile, "tenants", len(m.Tenants))
	})
	return &reloads{rules: rules, tenants: tenants}, nil
}

func (r *reloads) list() []daemon.Reloader { return []daemon.Reloader{r.rules, r.tenants} }

// cycleStall is how long a controller cycle may make no progress before
// the watchdog lets systemd restart reclaimd: ten cycles, and never less
// than the five minutes slow agents, slurmrestd and mail can add up to.
func cycleStall(interval time.Duration) time.Duration { return max(10*interval, 5*time.Minute) }

// sampleStall is the same for the agent: NVML calls hang when a GPU falls
// off the bus, and only a restart gets the node's samples back.
func sampleStall(interval time.Duration) time.Duration { return max(10*interval, 2*time.Minute) }

func cmdRun(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	// Secrets first, before anything reaches the network; each is read
	// again when its file changes and on SIGHUP.
	slurmToken, err := openSecret("slurm.token_file", cfg.Slurm.TokenFile, log)
	if err != nil {
		return err
	}
	// The API's bearer token: every /v1 read names tenants' jobs.
	apiToken, err := openSecret("api.token_file", cfg.API.TokenFile, log)
	if err != nil {
		return err
	}
	var secret *secretfile.File // the agents': read again when it changes and on SIGHUP
	if cfg.Source == "agents" {
		if secret, err = openSecret("agents.token_file", cfg.Agents.TokenFile, log); err != nil {
			return err
		}
	}
	rl, err := newReloads(ctx, cfg, log)
	if err != nil {
		return err
	}
	reload := append(rl.list(), slurmToken, apiToken)
	var notifiers notify.All
	if cfg.Notify.Webhook != "" {
		notifiers = append(notifiers, notify.Webhook{URL: cfg.Notify.Webhook})
	}
	if cfg.Notify.Mail {
		m := notify.Mail{Sendmail: cfg.Notify.Sendmail, From: cfg.Notify.MailFrom, Domain: cfg.Notify.MailDomain, Admins: cfg.Notify.AdminMail}
		if cfg.Notify.MailTemplate != "" {
			text, err := os.ReadFile(cfg.Notify.MailTemplate)
			if err != nil {
				return err
			}
			if m.Template, err = notify.ParseTemplate(string(text)); err != nil {
				return fmt.Errorf("%s: %w", cfg.Notify.MailTemplate, err)
			}
		}
		notifiers = append(notifiers, m)
	}
	var col controller.Collector
	if cfg.Source == "agents" {
		reload = append(reload, secret)
		// One idle connection kept to each agent from cycle to cycle: the
		// default transport keeps 100 in all, so past a hundred nodes every
		// cycle would connect to most agents anew.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, 1
		tr.IdleConnTimeout = max(tr.IdleConnTimeout, 3*cfg.Interval)
		col = &collect.Agents{URLTemplate: cfg.Agents.URLTemplate, Client: &http.Client{Timeout: cfg.Agents.Timeout, Transport: tr},
			Secret: secret.Get}
	}
	if cfg.Source == "prometheus" {
		p := cfg.Prometheus
		col = &collect.Prometheus{URL: p.URL, Step: p.Step, Window: p.Window, NodeLabel: p.NodeLabel, MemActivityMetric: p.MemActivityMetric,
			MaxResponseBytes: int64(p.MaxResponseMiB) << 20, Client: &http.Client{Timeout: p.Timeout}}
	}
	metrics := controller.NewMetrics()
	buildinfo.Register(metrics.Registry, "reclaimd")
	ccfg := controller.Config{Rules: rl.rules.Get, Tenants: rl.tenants.Get, SignalBatchOnly: cfg.Slurm.SignalBatchOnly,
		Collector: col, Log: log, Metrics: metrics, APIToken: apiToken.Get,
		Recovery: controller.Recovery{LogRoot: cfg.Recovery.LogRoot, StderrLines: cfg.Recovery.StderrLines, Matcher: cfg.Recovery.Matcher(),
			ApplicationXids: cfg.Health.ApplicationXids}}
	if len(notifiers) > 0 {
		ccfg.Notifier = notifiers
	}
	if h := cfg.Health; h.Enabled {
		ccfg.Health = &controller.Health{FatalXids: h.FatalXids, MaxDrainedShare: h.MaxDrainedShare, MaxFaultAge: h.MaxFaultAge,
			Check: h.CheckCommand, CheckInterval: h.CheckInterval, CheckTimeout: h.CheckTimeout, DryRun: h.DryRun}
		for _, k := range h.DrainOn {
			ccfg.Health.DrainOn = append(ccfg.Health.DrainOn, source.FaultKind(k))
		}
	}
	// slurmrestd is reached in the loop, so that a slurmrestd down at start
	// leaves reclaimd running and saying so (connect.go); so is the
	// database.
	wait := newWaiting(cfg.Slurm.URL, metrics.Registry)
	// The database's password, when it has one, is a secret like the
	// tokens: read now and at every new connection. A database that does
	// not answer is waited for in the loop, serving /healthz; anything
	// else wrong with it ends the start here.
	openDB := func(ctx context.Context) (*store.Store, error) {
		// Bounded: a database host that drops packets would hold the
		// first try past systemd's start timeout, before READY=1.
		ctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		return store.OpenDatabase(ctx, store.Database{Setting: cfg.DatabaseSetting(), PasswordFile: cfg.DatabasePasswordFile, Rule: secretRule})
	}
	first, err := openDB(ctx)
	if err != nil && !pgsql.Unreachable(err) {
		return err
	}
	act := func(ctx context.Context, term lease.Term) error {
		client, err := connect(ctx, wait, log, func(ctx context.Context) (*slurmrest.Client, error) {
			return slurmrest.New(ctx, slurmrest.Config{URL: cfg.Slurm.URL, User: cfg.Slurm.User,
				Tokens: slurmrest.SecretToken{File: slurmToken}, Requeuer: slurmrest.ScontrolRequeuer{Path: cfg.Slurm.Scontrol}, Logger: log,
				MaxAnswerBytes: int64(cfg.Slurm.MaxAnswerMiB) << 20, MaxAnswerSetting: "slurm.max_answer_mib in reclaimd's configuration"})
		})
		if err != nil {
			return nil // stopped while waiting
		}
		ccfg.Slurm, ccfg.Term = client, term
		ctl, err := controller.New(ccfg)
		if err != nil {
			return err
		}
		h := ctl.Handler(3 * cfg.Interval)
		wait.next.Store(&h)
		defer wait.next.Store(nil) // a standby again: /healthz says so
		log.Info("reclaimd controller acting", "lease_generation", term.Gen)
		rules := rl.rules.Get()
		log.Info("reclaimd controller starting", "listen", cfg.Listen, "interval", cfg.Interval, "rules", len(rules.Rules), "dry_run", rules.DryRun,
			"tenants", len(rl.tenants.Get().Tenants), "parser", client.Info().Parser)
		return ctl.Run(ctx, cfg.Interval)
	}
	reclaim := func(ctx context.Context) error {
		st := first
		if st == nil {
			var err error
			if st, err = openStore(ctx, wait, log, cfg.DatabaseSetting(), openDB); err != nil {
				if ctx.Err() != nil {
					return nil // stopped while waiting
				}
				return err
			}
		}
		// Closed once the cycle in flight is over.
		defer func() { _ = st.Close() }()
		ccfg.Store = st
		// On PostgreSQL a standby may share the database: one controller
		// at a time acts, the holder of the lease (standby.go). While it
		// does not act, it still answers the portal's reads from the
		// store: the database is shared with the acting one.
		var ls *lease.Lease
		var state func() lease.State
		if cfg.DatabaseIsPostgres() {
			ls = newLease(st, cfg, log)
			ccfg.Lease, state = ls.State, ls.State
		} else {
			metrics.LeaseHeld.Set(1)
		}
		wait.opened(state, controller.ReadAPI(ccfg))
		if ls == nil {
			return act(ctx, lease.Always)
		}
		return ls.Keep(ctx, act, func(ctx context.Context, gen int64) {
			daemon.Beat(ctx) // standing by is not being stuck
			metrics.LeaseHeld.Set(map[bool]float64{true: 1}[gen != 0])
			metrics.LeaseGeneration.Set(float64(gen))
		})
	}
	return daemon.Run(ctx, daemon.Config{Log: log, Listen: cfg.Listen, Handler: wait,
		Loops:  []daemon.Loop{{Name: "reclaim", Run: reclaim, Stall: cycleStall(cfg.Interval)}},
		Reload: reload})
}

func cmdAgent(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	node := cfg.Agent.Node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		node, _, _ = strings.Cut(h, ".")
	}
	var src agent.Source
	if cfg.Agent.Replay != "" {
		rec, err := source.LoadRecording(cfg.Agent.Replay)
		if err != nil {
			return err
		}
		src = source.NewReplay(rec, time.Time{}, true)
	} else {
		n, err := source.NewNVML(gonvml.New())
		if err != nil {
			return fmt.Errorf("NVML: %w (on a node without GPUs, set agent.replay)", err)
		}
		defer func() { _ = n.Close() }()
		src = n
	}
	// The secret every snapshot is signed with: read again when it
	// changes and on SIGHUP.
	secret, err := openSecret("agent.token_file", cfg.Agent.TokenFile, log)
	if err != nil {
		return err
	}
	acfg := agent.Config{Node: node, Source: src, Interval: cfg.Agent.Interval, Window: cfg.Agent.Window,
		Procs: agent.ProcFS{Root: cfg.Agent.ProcRoot}, Logger: log, Secret: secret.Get}
	if cfg.Agent.FaultsFile != "" {
		acfg.Faults = &source.FaultFile{Path: cfg.Agent.FaultsFile}
	}
	if cfg.Agent.Record != "" {
		// Job ids and GPU use of every user: not for others to read.
		f, err := os.OpenFile(cfg.Agent.Record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return err
		}
		defer f.Close()
		acfg.Recorder = source.NewRecorder(f, time.Now())
	}
	a, err := agent.New(acfg)
	if err != nil {
		return err
	}
	buildinfo.Register(a.Registry(), "reclaimd-agent")
	log.Info("reclaimd agent starting", "node", node, "listen", cfg.Agent.Listen, "interval", cfg.Agent.Interval, "replay", cfg.Agent.Replay)
	// SIGHUP re-reads the secret, and nothing else.
	return daemon.Run(ctx, daemon.Config{Log: log, Listen: cfg.Agent.Listen, Handler: a.Handler(),
		Loops:  []daemon.Loop{{Name: "sample", Run: a.Run, Stall: sampleStall(cfg.Agent.Interval)}},
		Reload: []daemon.Reloader{secret}})
}
