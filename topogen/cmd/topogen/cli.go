package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/clidoc"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/topogen/internal/apply"
	"github.com/strata-hpc/strata/topogen/internal/config"
	"github.com/strata-hpc/strata/topogen/internal/diff"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/model"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// Exit codes, stable for cron and CI: 0 the same (or done), 1 an error, 2
// a usage error, 3 changes found, as every Strata command has them.
const (
	exitOK          = 0                   // done; for plan: nothing to change
	exitFailure     = 1                   // could not run (bad config, unreadable input, slurmctld unreachable)
	exitChanges     = cliexit.ExitChanges // plan: the live file differs from what topogen would write
	exitRolledBack  = 4                   // apply wrote the file, slurmctld did not take it, the old file is back
	exitRollbackErr = 5                   // apply could not restore the old file or slurmctld: act now
	exitInvalid     = 6                   // the candidate failed validation or the change budget; nothing was written
)

// exitErr is an error with one of the exit codes above.
func exitErr(code int, msg string) error { return cliexit.Error{Code: code, Msg: msg} }

// failure is err with exit code 1, still reachable to errors.As.
func failure(err error) error { return cliexit.Wrap(exitFailure, err) }

const exitCodesHelp = `EXIT CODES:
   0  done; plan: the live file already matches; validate: the file is valid
   1  could not run: bad config, unreadable input, slurmctld unreachable
   2  usage error: an argument or flag the command does not take (the message says what it takes)
   3  plan: the live file differs from what topogen would write (changes found)
   4  apply: slurmctld did not take the new file; the previous file is back in place
   5  apply: the rollback failed; slurmctld may be down: act now
   6  refused: the candidate (plan, apply) or the file (validate) failed validation, or apply's
      change budget refused it (a truncated scan looks like that); nothing was written`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var logger *slog.Logger
	app := &cli.App{
		Name:  "topogen",
		Usage: "keep Slurm's topology.conf / topology.yaml / gres.conf true to the fabric",
		Description: `topogen reads the fabric from an ibnetdiscover dump (run ibnetdiscover once on any host
with an HCA; no agents, no sudo on compute nodes) and the GPUs of each node from the JSON that
"topogen collect" writes there, builds one canonical model of it, and writes Slurm's topology.

A typical round:
   topogen render                  # print what topogen would write
   topogen plan                    # diff against the live file (exit 3 when they differ)
   topogen apply                   # validate, back up, write, reconfigure, verify, roll back on failure

Configuration: /etc/strata/topogen.yaml (see etc/strata/topogen.yaml); flags override it.`,
		Version:   buildinfo.Version(),
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "/etc/strata/topogen.yaml", Usage: "configuration file; a missing default file means built-in defaults"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Before: func(c *cli.Context) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return exitErr(exitFailure, fmt.Sprintf("--log-level: %v", err))
			}
			logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main maps errors to exit codes
		Commands: []*cli.Command{
			cliargs.Bind(&cli.Command{
				Name:  "render",
				Usage: "print (or write with -o) the topology, gres.conf, labels or the model as JSON",
				Flags: append(inputFlags(), &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write here instead of stdout"},
					&cli.StringFlag{Name: "what", Value: "topology", Usage: "topology, gres, json, labels (kubectl label script) or labels-yaml"}),
				Action: func(c *cli.Context) error { return cmdRender(c, logger) },
			}, dumpArg),
			cliargs.Bind(&cli.Command{
				Name:  "plan",
				Usage: "show how the live topology file differs from what topogen would write",
				Description: `Exit 0 when the live file already matches, 3 when it differs (changes found: apply would
write them), 6 when apply would refuse the candidate (invalid, or past the change budget: the
reasons are printed), 1 when topogen cannot run, 2 on a usage error.`,
				Flags:  inputFlags(),
				Action: func(c *cli.Context) error { return cmdPlan(c, logger) },
			}, dumpArg),
			cliargs.Bind(&cli.Command{
				Name:  "apply",
				Usage: "validate, back up, write, reconfigure slurmctld, verify, and roll back on failure",
				Description: `Exit 0 when applied (or nothing to change), 6 when the candidate is refused (invalid, or
past the change budget, or the live file cannot be measured; nothing written, --force overrides
the budget), 4 when slurmctld did not take it and the old file is back, 5 when the rollback failed,
1 when topogen cannot run, 2 on a usage error.`,
				Flags: append(inputFlags(),
					&cli.BoolFlag{Name: "skip-validation", Usage: "write a candidate that fails validation (tests only: slurmctld may stop)"},
					&cli.BoolFlag{Name: "force", Usage: "apply a candidate that drops more than 10% of the live file's nodes or switches, or comes from a dump with duplicate GUIDs"},
					&cli.StringFlag{Name: "from-file", Usage: "apply this topology file instead of rendering one"},
					&cli.DurationFlag{Name: "settle", Value: 3 * time.Second, Usage: "wait this long after reconfigure before checking slurmctld"}),
				Action: func(c *cli.Context) error { return cmdApply(ctx, c, logger) },
			}, dumpArg),
			cliargs.Bind(&cli.Command{
				Name:  "validate",
				Usage: "check a topology.conf the way apply does before writing it, and what it leaves out of Slurm's reach",
				Description: `validate reports, on stderr, what makes slurmctld stop or place jobs wrongly (the checks apply
makes), cluster nodes under no switch (topology/tree never gives them to a job) and, as a
warning, leaf switches with no common ancestor (no job spans them). The cluster's nodes come
from slurm.node_source, as for render; --nodes gives them, --no-node-check leaves them out.
Exit 0 when the file is valid (warnings or not), 6 when it is not, 1 when it cannot be read.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "the topology.conf to check (or give it as the argument)"},
					&cli.StringFlag{Name: "nodes", Usage: "the cluster's nodes as a host list (instead of slurm.node_source)"},
					&cli.BoolFlag{Name: "no-node-check", Usage: "do not compare the file with the cluster's node list (slurm.node_source: none)"},
				},
				Action: cmdValidate,
			}, cliargs.Arg{Name: "FILE", Flag: "file", Required: true}),
			cliargs.Bind(&cli.Command{
				Name:  "collect",
				Usage: "describe this node's GPUs (NVLink, fabric domain, affinity) through NVML as JSON",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write here (e.g. a shared nodes_dir) instead of stdout"},
					&cli.StringFlag{Name: "smi-xml", Usage: "read `nvidia-smi -q -x` output from this file instead of NVML"},
					&cli.StringFlag{Name: "smi-topo", Usage: "with --smi-xml: add `nvidia-smi topo -m` output from this file"},
					&cli.StringFlag{Name: "hostname", Usage: "node name to record (default: this host's short name)"},
				},
				Action: func(c *cli.Context) error { return cmdCollect(ctx, c) },
			}, cliargs.Arg{Name: "SMI_XML", Flag: "smi-xml"}),
			cliargs.Bind(&cli.Command{
				Name:   "check-config",
				Usage:  "load the configuration (the argument, --config or the default), report every problem, print the effective values",
				Action: cmdCheckConfig,
			}, cliargs.Arg{Name: "CONFIG", Flag: "config"}),
		},
	}
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + exitCodesHelp + "\n"
	app.Commands = append(app.Commands, clidoc.Command(app, clidoc.Spec{Section: 1, Configs: []clidoc.Config{{Name: "topogen.yaml", Summary: "configuration of topogen, which keeps Slurm's topology true to the fabric"}}}))
	cliargs.Enforce(app)
	return app.RunContext(ctx, args)
}

// dumpArg is the fabric dump render, plan and apply read: an argument or
// --ibnetdiscover.
var dumpArg = cliargs.Arg{Name: "DUMP", Flag: "ibnetdiscover"}

func inputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "tree, block or yaml (overrides slurm.format); a topology file of the other kind becomes\n\tthe topology.yaml (or topology.conf) beside it unless --topology-file names one"},
		&cli.StringFlag{Name: "ibnetdiscover", Usage: "ibnetdiscover dump (classic, -p or ibdiagnet2)"},
		&cli.StringFlag{Name: "guid-map", Usage: "file of '<guid> <hostname>' lines naming HCAs"},
		&cli.StringFlag{Name: "host-rule", Usage: "regexp whose first group is the host name in an HCA description"},
		&cli.StringFlag{Name: "include-hca", Usage: "only HCAs whose description matches (select one rail)"},
		&cli.StringFlag{Name: "exclude-hca", Usage: "leave out HCAs whose description matches (storage fabric)"},
		&cli.StringFlag{Name: "switch-names", Usage: "how switches are named (overrides fabric.switch_names): auto (the name in the switch's\n\tdescription when every switch has a distinct one, else S-<GUID>), guid (always S-<GUID>)\n\tor description (as auto, and a description with no name in it is taken whole)"},
		&cli.StringFlag{Name: "nodes-dir", Usage: "folder of JSON files from topogen collect"},
		&cli.StringFlag{Name: "nodes", Usage: "the cluster's nodes as a host list (instead of slurm.node_source)"},
		&cli.BoolFlag{Name: "no-node-check", Usage: "do not compare the fabric with the cluster's node list (slurm.node_source: none)"},
		&cli.StringFlag{Name: "topology-file", Usage: "the live topology file (overrides slurm.topology_file)"},
	}
}

func loadConfig(c *cli.Context) (config.Config, error) {
	path := c.String("config")
	cfg, err := config.Load(path)
	if errors.Is(err, os.ErrNotExist) && !c.IsSet("config") {
		cfg, err = config.Default(), nil
	}
	if err != nil {
		return cfg, failure(err)
	}
	set := func(flag string, dst *string) {
		if c.IsSet(flag) {
			*dst = c.String(flag)
		}
	}
	set("format", &cfg.Slurm.Format)
	set("ibnetdiscover", &cfg.Fabric.IBNetDiscover)
	set("guid-map", &cfg.Fabric.GUIDMap)
	set("host-rule", &cfg.Fabric.HostRule)
	set("include-hca", &cfg.Fabric.IncludeHCA)
	set("exclude-hca", &cfg.Fabric.ExcludeHCA)
	set("switch-names", &cfg.Fabric.SwitchNames)
	set("nodes-dir", &cfg.NVLink.NodesDir)
	set("topology-file", &cfg.Slurm.TopologyFile)
	if c.IsSet("format") && !c.IsSet("topology-file") {
		cfg.Slurm.TopologyFile = topologyFileFor(cfg.Slurm.Format, cfg.Slurm.TopologyFile)
	}
	if c.IsSet("nodes") || c.Bool("no-node-check") {
		cfg.Slurm.NodeSource = "none"
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return cfg, exitErr(exitFailure, "configuration: "+strings.Join(msgs, "; "))
	}
	return cfg, nil
}

// topologyFileFor is the topology file a --format given on the command
// line means when the configured file is of the other kind: Slurm reads
// topology.yaml or topology.conf from the same folder, so --format yaml
// with the default /etc/slurm/topology.conf means /etc/slurm/topology.yaml
// (and the other way round) instead of an error.
func topologyFileFor(format, file string) string {
	isYAML := strings.HasSuffix(file, ".yaml")
	switch {
	case format == "yaml" && !isYAML:
		return filepath.Join(filepath.Dir(file), "topology.yaml")
	case format != "yaml" && isYAML:
		return filepath.Join(filepath.Dir(file), "topology.conf")
	}
	return file
}

// buildModel builds the model of the configuration and the flags.
func buildModel(ctx context.Context, c *cli.Context, cfg config.Config, log *slog.Logger) (*model.Model, error) {
	nodes, err := givenNodes(c)
	if err != nil {
		return nil, failure(err)
	}
	m, err := model.Build(ctx, cfg, model.Options{Nodes: nodes, GPUNodes: c.String("what") == "gres", Log: log})
	var pe *graph.PlacementError
	if errors.As(err, &pe) {
		showFindings(c.App.ErrWriter, log, pe.Findings)
		return nil, failure(fmt.Errorf("%w: they are listed above", err))
	}
	if err != nil {
		return nil, failure(err)
	}
	return m, nil
}

// showFindings writes the findings of a fabric in which no host could be
// placed to stderr, one a line: the warnings always, the others when the
// log level is info or debug. The error alone only counts them, and an
// admin must see which filter or rule emptied the fabric.
func showFindings(w io.Writer, log *slog.Logger, fs []graph.Finding) {
	all := log.Enabled(context.Background(), slog.LevelInfo)
	fmt.Fprintln(w, "Findings of the fabric:")
	hidden := 0
	for _, f := range fs {
		if f.Severity != graph.Warning && !all {
			hidden++
			continue
		}
		fmt.Fprintln(w, "  "+f.String())
	}
	if hidden > 0 {
		fmt.Fprintf(w, "  (%d more of severity info: --log-level info or debug shows them)\n", hidden)
	}
}

// givenNodes is the node list --nodes gives; nil without it.
func givenNodes(c *cli.Context) ([]string, error) {
	if !c.IsSet("nodes") {
		return nil, nil
	}
	nodes, err := hostlist.Expand(c.String("nodes"))
	if err != nil {
		return nil, fmt.Errorf("--nodes: %w", err)
	}
	if len(nodes) == 0 {
		// nil would mean "no list" and switch the node check off.
		return nil, errors.New("--nodes names no node: give the cluster's host list, or leave the flag out to read slurm.node_source")
	}
	return nodes, nil
}

func cmdRender(c *cli.Context, log *slog.Logger) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	m, err := buildModel(c.Context, c, cfg, log)
	if err != nil {
		return err
	}
	var out []byte
	switch c.String("what") {
	case "topology":
		out = m.Candidate()
	case "gres":
		var cores map[string]int
		if cores, err = model.CoresPerNode(c.Context, cfg); err != nil {
			return failure(fmt.Errorf("cores per node: %w", err))
		}
		if cores == nil {
			log.Warn("the node source gives no core counts: gres.conf is written without Cores=", "node_source", cfg.Slurm.NodeSource)
		}
		out, err = render.GresConf(m.GPUNodes, render.GresOptions{CoresPerNode: cores}, m.Source)
	case "json":
		out, err = render.GraphJSON(m.Tree, m.Blocks)
	case "labels":
		out = render.LabelScript(render.NodeLabels(m.Tree, m.Blocks), m.Source)
	case "labels-yaml":
		out, err = render.LabelYAML(render.NodeLabels(m.Tree, m.Blocks))
	default:
		return exitErr(exitFailure, fmt.Sprintf("--what %q: want topology, gres, json, labels or labels-yaml", c.String("what")))
	}
	if err != nil {
		return failure(err)
	}
	if p := c.String("output"); p != "" {
		return atomicfile.Write(p, out, 0o644)
	}
	_, err = c.App.Writer.Write(out)
	return err
}

func cmdPlan(c *cli.Context, log *slog.Logger) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	m, err := buildModel(c.Context, c, cfg, log)
	if err != nil {
		return err
	}
	w := c.App.Writer
	warnOtherFile(cfg, log)
	cand := m.Candidate()
	if problems := candidateProblems(m); len(problems) > 0 {
		fmt.Fprintln(w, "The candidate topology is invalid:")
		for _, p := range problems {
			fmt.Fprintln(w, "  "+p)
		}
		return exitErr(exitInvalid, "")
	}
	live, err := apply.ReadTopology(cfg.Slurm.TopologyFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return failure(err)
	}
	existed := err == nil
	if existed && bytes.Equal(live, cand) {
		fmt.Fprintf(w, "%s is up to date.\n", cfg.Slurm.TopologyFile)
		return nil
	}
	fmt.Fprintf(w, "%s would change:\n", cfg.Slurm.TopologyFile)
	for _, l := range diff.Lines(live, cand) {
		fmt.Fprintln(w, l)
	}
	if cfg.Slurm.Format != "yaml" {
		old, _ := render.ParseTopoConf(live)
		nw, _ := render.ParseTopoConf(cand)
		if d := old.Placement().Diff(nw.Placement(), 50); len(d) > 0 {
			fmt.Fprintf(w, "\nPlacement changes (live vs new):\n")
			for _, l := range d {
				fmt.Fprintln(w, "  "+l)
			}
		}
	}
	if !existed {
		live = nil
	}
	// What apply would say of it: a plan that says "run apply" where apply
	// refuses would send the admin to a refusal.
	if problems := apply.Budget(live, cand, cfg.Slurm.Format == "yaml", 0, duplicateGUIDs(m)); len(problems) > 0 {
		fmt.Fprintln(w, "\ntopogen apply would refuse this (the change budget):")
		for _, p := range problems {
			fmt.Fprintln(w, "  "+p)
		}
		fmt.Fprintln(w, "Check the fabric dump (a scan cut short looks like this); if the fabric really is this now, apply with --force.")
		return exitErr(exitInvalid, "")
	}
	fmt.Fprintln(w, "\nRun `topogen apply` to put it in place.")
	return exitErr(exitChanges, "")
}

// candidateProblems validates the candidate of m as apply does: a
// topology.conf as it is; a topology.yaml by its tree and its blocks, each
// as the topology.conf it stands for.
func candidateProblems(m *model.Model) []string {
	if m.Config.Slurm.Format != "yaml" {
		return apply.Validate(m.Candidate(), m.Nodes)
	}
	var problems []string
	if m.Tree != nil {
		problems = append(problems, apply.Validate(render.TreeConf(m.Tree, m.Source), m.Nodes)...)
	}
	if m.Blocks != nil {
		for _, p := range apply.Validate(render.BlockConf(*m.Blocks, m.Source), m.Nodes) {
			problems = append(problems, "NVLink blocks: "+p)
		}
	}
	return problems
}

// duplicateGUIDs are the GUIDs the fabric dump declared more than once.
func duplicateGUIDs(m *model.Model) []string {
	var dups []string
	if m.Tree != nil {
		for _, f := range m.Tree.Findings {
			if f.Kind == graph.KindDuplicateGUID {
				dups = append(dups, f.Subject)
			}
		}
	}
	return dups
}

// warnOtherFile warns when both topology.conf and topology.yaml exist:
// Slurm reads topology.yaml and ignores topology.conf.
func warnOtherFile(cfg config.Config, log *slog.Logger) {
	dir := filepath.Dir(cfg.Slurm.TopologyFile)
	other := filepath.Join(dir, "topology.yaml")
	if cfg.Slurm.Format == "yaml" {
		other = filepath.Join(dir, "topology.conf")
	}
	if _, err := os.Stat(other); err != nil {
		return
	}
	if cfg.Slurm.Format == "yaml" {
		log.Warn("topology.conf exists beside topology.yaml: Slurm ignores it; remove it to avoid confusion", "path", other)
	} else {
		log.Warn("topology.yaml exists: Slurm reads it and ignores the topology.conf topogen writes; set slurm.format: yaml or remove it", "path", other)
	}
}

func cmdApply(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	var cand, expect []byte
	var nodes, dupGUIDs []string
	if f := c.String("from-file"); f != "" {
		if cand, err = apply.ReadTopology(f); err != nil {
			return failure(err)
		}
		if nodes, err = givenNodes(c); err == nil {
			nodes, err = model.SlurmNodes(ctx, cfg, nodes)
		}
		if err != nil {
			return failure(err)
		}
	} else {
		m, err := buildModel(ctx, c, cfg, log)
		if err != nil {
			return err
		}
		cand, nodes, dupGUIDs = m.Candidate(), m.Nodes, duplicateGUIDs(m)
		if cfg.Slurm.Format == "yaml" {
			// topology.yaml holds the tree (the default topology, which
			// scontrol show topology reports) and the blocks: validate both
			// as topology.conf, verify against the default one.
			if problems := candidateProblems(m); len(problems) > 0 {
				fmt.Fprintln(c.App.Writer, "Not applied: the candidate topology is invalid:")
				for _, p := range problems {
					fmt.Fprintln(c.App.Writer, "  "+p)
				}
				return exitErr(exitInvalid, "")
			}
			if m.Tree != nil {
				expect = render.TreeConf(m.Tree, m.Source)
			} else {
				expect = render.BlockConf(*m.Blocks, m.Source)
			}
		}
	}
	if cfg.Slurm.Format == "yaml" && expect == nil {
		return exitErr(exitFailure, "--from-file with format yaml: topogen cannot check a topology.yaml it did not render")
	}
	warnOtherFile(cfg, log)
	ctl := apply.Scontrol{Path: cfg.Slurm.Scontrol, RestartCommand: cfg.Slurm.RestartCommand}
	opt := apply.Options{Path: cfg.Slurm.TopologyFile, Candidate: cand, Expect: expect, YAML: cfg.Slurm.Format == "yaml", KnownNodes: nodes, SkipValidation: c.Bool("skip-validation"),
		Settle: c.Duration("settle"), Ctl: ctl, Log: log, DuplicateGUIDs: dupGUIDs, Force: c.Bool("force")}
	if cfg.Slurm.RestartCommand != "" {
		opt.Restarter = ctl
	}
	res, err := apply.Apply(ctx, opt)
	w := c.App.Writer
	switch {
	case errors.Is(err, apply.ErrInvalid):
		fmt.Fprintln(w, "Not applied: the candidate topology is invalid:")
		for _, p := range res.Problems {
			fmt.Fprintln(w, "  "+p)
		}
		return exitErr(exitInvalid, "")
	case errors.Is(err, apply.ErrBudget):
		fmt.Fprintln(w, "Not applied: the change budget refused the candidate:")
		for _, p := range res.Problems {
			fmt.Fprintln(w, "  "+p)
		}
		fmt.Fprintln(w, "Nothing was written. Check the fabric dump; if the fabric really is this now, apply with --force.")
		return exitErr(exitInvalid, "")
	case errors.Is(err, apply.ErrRolledBack):
		fmt.Fprintf(w, "Rolled back: %v\nThe previous %s is in place; the rejected one was saved nowhere else.\n", err, cfg.Slurm.TopologyFile)
		return exitErr(exitRolledBack, "")
	case errors.Is(err, apply.ErrRollbackFailed):
		return exitErr(exitRollbackErr, err.Error())
	case err != nil:
		return failure(err)
	}
	if !res.Changed {
		fmt.Fprintf(w, "%s is up to date; nothing applied.\n", cfg.Slurm.TopologyFile)
		return nil
	}
	fmt.Fprintf(w, "Applied %s (backup: %s); slurmctld reports the new topology.\n", cfg.Slurm.TopologyFile, orNone(res.Backup))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none, there was no file"
	}
	return s
}

func cmdCheckConfig(c *cli.Context) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	// The slurmrestd token, when this host has it, is held to the rule of
	// internal/secretfile: refused when others may read it.
	if cfg.Slurm.NodeSource == "slurmrestd" {
		w, err := (secretfile.Rule{}).Check(cfg.Slurm.REST.TokenFile)
		switch {
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("slurm.rest.token_file: %w", err)
		case w != "":
			fmt.Fprintf(c.App.ErrWriter, "WARNING: slurm.rest.token_file: %s\n", w)
		}
	}
	path := c.String("config")
	what := path + " is valid"
	if data, err := os.ReadFile(path); errors.Is(err, os.ErrNotExist) {
		what = "No configuration file was read (" + path + " does not exist): topogen runs on its built-in defaults"
	} else if err == nil && setsNothing(data) {
		what = path + " sets nothing (it is empty or all comments): topogen runs on its built-in defaults"
	}
	fmt.Fprintf(c.App.Writer, "%s: format %s, topology file %s, nodes from %s, fabric dump %s, node descriptions in %s\n",
		what, cfg.Slurm.Format, cfg.Slurm.TopologyFile, cfg.Slurm.NodeSource, cfg.Fabric.IBNetDiscover, cfg.NVLink.NodesDir)
	return nil
}

// setsNothing reports whether a YAML file holds no key: blank lines,
// comments and document markers only.
func setsNothing(data []byte) bool {
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(l, "\uFEFF"))
		if l != "" && l[0] != '#' && l != "---" && l != "..." {
			return false
		}
	}
	return true
}
