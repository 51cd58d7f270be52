package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/clidoc"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/gensecret"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/config"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/simulate"
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
(/etc/strata/rendered/reclaim-rules.json) and the tenant map (/etc/strata/rendered/tenants.json,
both rendered by strata-policy); a job whose GPUs stay idle is warned, then
signalled to checkpoint, then requeued or cancelled as its rule says. Every step
is recorded in SQLite first and logged with its evidence; GET
/v1/jobs/{id}/reclaim explains it. Set "dry_run": true in the rules to decide and
record without acting. SIGHUP reloads the rules and the tenant map (a bad file
keeps the old one).`,
		Version:   buildinfo.Version(),
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
			gensecret.Command(gensecret.Spec{Name: "gen-token", Usage: "make the agents' shared secret (agents.token_file, agent.token_file) when it does not exist",
				What:  "the secret the controller and its agents share (copy the controller's file to every GPU node, same owner and mode)",
				Group: "strata-reclaimd", Files: func(c *cli.Context) ([]string, error) {
					cfg, err := config.Load(c.String("config"))
					if err != nil {
						return nil, err
					}
					files := []string{cfg.Agents.TokenFile}
					if cfg.Agent.TokenFile != cfg.Agents.TokenFile {
						files = append(files, cfg.Agent.TokenFile)
					}
					return files, nil
				}}),
		},
	}
	app.Commands = append(app.Commands, clidoc.Command(app, clidoc.Spec{Section: 8, Configs: []clidoc.Config{{Name: "reclaimd.yaml", Summary: "configuration of reclaimd, its controller and its node agents"}}}))
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

// judgeable refuses rules under which a rule could never judge a job
// with the configured source (see config.CheckRules).
func judgeable(cfg config.Config, r reclaimrules.Rules) error {
	if ds := cfg.CheckRulesFile(cfg.RulesFile, r); len(ds) > 0 {
		return ds
	}
	return nil
}

// loadJudgeableRules loads the rules and refuses them when one could never
// judge a job under cfg: at start-up and on every reload.
func loadJudgeableRules(cfg config.Config) (reclaimrules.Rules, error) {
	r, err := loadRules(cfg.RulesFile)
	if err != nil {
		return r, err
	}
	return r, judgeable(cfg, r)
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
	// A rule that could never judge at the trace's own sample interval
	// would report nothing reclaimed, which reads as "nothing to gain".
	iv := tr.SampleInterval
	if iv <= 0 {
		iv = decide.DefaultSampleInterval
	}
	if ds := config.CheckRulesForTrace(rulesPath, rules, iv); len(ds) > 0 {
		if data, err := os.ReadFile(rulesPath); err == nil {
			config.LocateRules(data, ds)
		}
		return fmt.Errorf("the rules cannot be simulated on this trace, sampled every %s:\n%w", iv, ds)
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
	if rerr == nil {
		rerr = judgeable(cfg, r)
	}
	tenants, terr := tenantmap.Load(cfg.TenantsFile)
	warnings, problems := checkSecrets(cfg)
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "WARNING: %s\n", w)
	}
	var serr error
	if len(problems) > 0 {
		serr = errors.New(strings.Join(problems, "\n"))
	}
	if err := errors.Join(rerr, terr, serr); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s is valid; %s has %d rules and %d recovery rules (dry run: %v); %s has %d tenants\n",
		c.String("config"), cfg.RulesFile, len(r.Rules), len(r.Recovery), r.DryRun, cfg.TenantsFile, len(tenants.Tenants))
	return nil
}
