package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/config"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
	"github.com/strata-hpc/strata/reclaimd/internal/simulate"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var log *slog.Logger
	app := &cli.App{
		Name:  "reclaimd",
		Usage: "reclaim allocated GPUs that sit idle, under per-tenant rules, and say why",
		Description: `reclaimd run      the controller: one per cluster, next to slurmrestd
reclaimd agent    the node agent: one per GPU node, samples the GPUs through NVML

Each cycle the controller reads the running GPU jobs (one conditional request to
slurmrestd), the samples of their GPUs from the agents, the rules
(/etc/strata/reclaim-rules.json) and the tenant map (/etc/strata/tenants.json,
both rendered by strata-policy); a job whose GPUs stay idle is warned, then
signalled to checkpoint, then requeued or cancelled as its rule says. Every step
is recorded in SQLite first and logged with its evidence; GET
/v1/jobs/{id}/reclaim explains it. Set "dry_run": true in the rules to decide and
record without acting. SIGHUP reloads the rules and the tenant map (a bad file
keeps the old one).`,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "/etc/strata/reclaimd.yaml", Usage: "configuration file"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Before: func(c *cli.Context) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
		Commands: []*cli.Command{
			cliargs.Bind(&cli.Command{Name: "run", Usage: "run the controller", Action: func(c *cli.Context) error { return cmdRun(ctx, c, log) }},
				configArg),
			cliargs.Bind(&cli.Command{Name: "agent", Usage: "run the node agent", Action: func(c *cli.Context) error { return cmdAgent(ctx, c, log) }},
				configArg),
			cliargs.Bind(&cli.Command{Name: "check-config", Usage: "load the configuration, the rules and the tenant map, report every problem", Action: cmdCheck},
				configArg),
			cliargs.Bind(&cli.Command{
				Name:  "simulate",
				Usage: "run the rules over a recorded trace: GPU-hours reclaimed, jobs touched, each job's timeline",
				Description: `Runs the same decision code over a trace so rules can be tuned before they act.
A trace is two CSV files (see the simulate package): jobs
(job_id,user,account,tenant,class,qos,partition,start,end,gpus with gpus as node:index;node:index)
and samples (time,node,gpu,util,mem_activity[,mem_used_mib]); or a ClusterCockpit job export
(--clustercockpit, flat series from per-job averages). The two CSV files may
also be given as arguments: reclaimd simulate --rules rules.json jobs.csv samples.csv`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "rules", Usage: "rules file (default: rules_file of the configuration)"},
					&cli.StringFlag{Name: "jobs", Usage: "jobs CSV"},
					&cli.StringFlag{Name: "samples", Usage: "samples CSV"},
					&cli.StringFlag{Name: "clustercockpit", Usage: "a ClusterCockpit GPU job export (CSV) instead of --jobs/--samples"},
					&cli.StringFlag{Name: "cluster-json", Usage: "with --clustercockpit: the cluster description, to map GPU ids to indexes"},
					&cli.DurationFlag{Name: "step", Value: 30 * time.Second, Usage: "cycle interval"},
					&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
				},
				Action: cmdSimulate,
			}, cliargs.Arg{Name: "JOBS", Flag: "jobs"}, cliargs.Arg{Name: "SAMPLES", Flag: "samples"}),
		},
	}
	cliargs.Enforce(app)
	return app.RunContext(ctx, args)
}

// configArg is the configuration a verb reads: an argument or --config.
var configArg = cliargs.Arg{Name: "CONFIG", Flag: "config"}

func loadRules(path string) (reclaimrules.Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return reclaimrules.Rules{}, err
	}
	r, err := reclaimrules.Parse(data)
	if err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func cmdSimulate(c *cli.Context) error {
	rulesPath := c.String("rules")
	if rulesPath == "" {
		cfg, err := config.Load(c.String("config"))
		if err != nil {
			return fmt.Errorf("no --rules, and the configuration gives none: %w", err)
		}
		rulesPath = cfg.RulesFile
	}
	rules, err := loadRules(rulesPath)
	if err != nil {
		return err
	}
	var tr simulate.Trace
	switch {
	case c.String("clustercockpit") != "":
		tr, err = simulate.LoadClusterCockpit(c.String("clustercockpit"), c.String("cluster-json"), c.Duration("step"))
	case c.String("jobs") != "" && c.String("samples") != "":
		tr, err = simulate.LoadTrace(c.String("jobs"), c.String("samples"))
	default:
		return cliexit.Usagef("simulate: give the jobs and samples CSV files (as arguments or --jobs and --samples), or --clustercockpit")
	}
	if err != nil {
		return err
	}
	rep := simulate.Run(tr, rules, simulate.Options{Step: c.Duration("step")})
	if c.Bool("json") {
		return rep.WriteJSON(c.App.Writer)
	}
	return rep.WriteText(c.App.Writer)
}

func cmdCheck(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	// The rules and the tenant map are checked both, so that one run
	// shows every problem.
	r, rerr := loadRules(cfg.RulesFile)
	tenants, terr := tenantmap.Load(cfg.TenantsFile)
	if err := errors.Join(rerr, terr); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s is valid; %s has %d rules (dry run: %v); %s has %d tenants\n",
		c.String("config"), cfg.RulesFile, len(r.Rules), r.DryRun, cfg.TenantsFile, len(tenants.Tenants))
	return nil
}

func cmdRun(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	rules, err := loadRules(cfg.RulesFile)
	if err != nil {
		return err
	}
	tenants, err := tenantmap.Open(cfg.TenantsFile)
	if err != nil {
		return err
	}
	var mu sync.RWMutex
	current := func() reclaimrules.Rules { mu.RLock(); defer mu.RUnlock(); return rules }
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			reloadTenants(tenants, log)
			r, err := loadRules(cfg.RulesFile)
			if err != nil {
				log.Error("rules reload failed: keeping the rules in force", "file", cfg.RulesFile, "error", err)
				continue
			}
			mu.Lock()
			rules = r
			mu.Unlock()
			log.Info("rules reloaded", "file", cfg.RulesFile, "rules", len(r.Rules), "dry_run", r.DryRun)
		}
	}()
	client, err := slurmrest.New(ctx, slurmrest.Config{URL: cfg.Slurm.URL, User: cfg.Slurm.User,
		Tokens: &slurmrest.FileToken{Path: cfg.Slurm.TokenFile}, Requeuer: slurmrest.ScontrolRequeuer{Path: cfg.Slurm.Scontrol}, Logger: log})
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, cfg.StateFile)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	var notifiers notify.All
	if cfg.Notify.Webhook != "" {
		notifiers = append(notifiers, notify.Webhook{URL: cfg.Notify.Webhook})
	}
	if cfg.Notify.Mail {
		m := notify.Mail{Sendmail: cfg.Notify.Sendmail, From: cfg.Notify.MailFrom, Domain: cfg.Notify.MailDomain}
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
	var col controller.Collector = &collect.Agents{URLTemplate: cfg.Agents.URLTemplate, Client: &http.Client{Timeout: cfg.Agents.Timeout}}
	if cfg.Source == "prometheus" {
		p := cfg.Prometheus
		col = &collect.Prometheus{URL: p.URL, Step: p.Step, Window: p.Window, NodeLabel: p.NodeLabel, MemActivityMetric: p.MemActivityMetric,
			Client: &http.Client{Timeout: p.Timeout}}
	}
	ccfg := controller.Config{Slurm: client, Store: st, Rules: current, Tenants: tenants.Map, SignalBatchOnly: cfg.Slurm.SignalBatchOnly,
		Collector: col, Log: log}
	if len(notifiers) > 0 {
		ccfg.Notifier = notifiers
	}
	ctl, err := controller.New(ccfg)
	if err != nil {
		return err
	}
	log.Info("reclaimd controller starting", "listen", cfg.Listen, "interval", cfg.Interval, "rules", len(rules.Rules), "dry_run", rules.DryRun,
		"tenants", len(tenants.Map().Tenants),
		"parser", client.Info().Parser)
	return serve(ctx, cfg.Listen, ctl.Handler(3*cfg.Interval), log, func(ctx context.Context) error { return ctl.Run(ctx, cfg.Interval) })
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
	acfg := agent.Config{Node: node, Source: src, Interval: cfg.Agent.Interval, Window: cfg.Agent.Window,
		Procs: agent.ProcFS{Root: cfg.Agent.ProcRoot}, Logger: log}
	if cfg.Agent.Record != "" {
		f, err := os.OpenFile(cfg.Agent.Record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
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
	log.Info("reclaimd agent starting", "node", node, "listen", cfg.Agent.Listen, "interval", cfg.Agent.Interval, "replay", cfg.Agent.Replay)
	return serve(ctx, cfg.Agent.Listen, a.Handler(), log, a.Run)
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
	go func() { errc <- loop(ctx) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	log.Info("stopped")
	return err
}
