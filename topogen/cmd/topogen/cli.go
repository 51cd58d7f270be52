package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliexit"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/topogen/internal/apply"
	"github.com/strata-hpc/strata/topogen/internal/config"
	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// Exit codes, stable for cron and CI.
const (
	exitOK          = 0 // done; for plan: nothing to change
	exitFailure     = 1 // could not run (bad config, unreadable input, slurmctld unreachable)
	exitChanges     = 2 // plan: the live file differs from what topogen would write
	exitInvalid     = 3 // the candidate topology failed validation; nothing was written
	exitRolledBack  = 4 // apply wrote the file, slurmctld did not take it, the old file is back
	exitRollbackErr = 5 // apply could not restore the old file or slurmctld: act now
)

// exitErr is an error with one of the exit codes above.
func exitErr(code int, msg string) error { return cliexit.Error{Code: code, Msg: msg} }

const exitCodesHelp = `EXIT CODES:
   0  done (plan: the live file already matches)
   1  could not run: bad config, unreadable input, slurmctld unreachable
   2  plan: the live file differs from what topogen would write
   3  the candidate topology failed validation; nothing was written
   4  apply: slurmctld did not take the new file; the previous file is back in place
   5  apply: the rollback failed; slurmctld may be down: act now`

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
   topogen plan                    # diff against the live file (exit 2 when they differ)
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
			{
				Name:  "render",
				Usage: "print (or write with -o) the topology, gres.conf, labels or the model as JSON",
				Flags: append(inputFlags(), &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write here instead of stdout"},
					&cli.StringFlag{Name: "what", Value: "topology", Usage: "topology, gres, json, labels (kubectl label script) or labels-yaml"}),
				Action: func(c *cli.Context) error { return cmdRender(c, logger) },
			},
			{
				Name:   "plan",
				Usage:  "show how the live topology file differs from what topogen would write",
				Flags:  inputFlags(),
				Action: func(c *cli.Context) error { return cmdPlan(c, logger) },
			},
			{
				Name:  "apply",
				Usage: "validate, back up, write, reconfigure slurmctld, verify, and roll back on failure",
				Flags: append(inputFlags(),
					&cli.BoolFlag{Name: "skip-validation", Usage: "write a candidate that fails validation (tests only: slurmctld may stop)"},
					&cli.StringFlag{Name: "from-file", Usage: "apply this topology file instead of rendering one"},
					&cli.DurationFlag{Name: "settle", Value: 3 * time.Second, Usage: "wait this long after reconfigure before checking slurmctld"}),
				Action: func(c *cli.Context) error { return cmdApply(ctx, c, logger) },
			},
			{
				Name:      "validate",
				Usage:     "check a topology.conf the way apply does before writing it",
				ArgsUsage: "FILE",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "nodes", Usage: "the cluster's nodes as a host list, to catch unknown ones"}},
				Action:    cmdValidate,
			},
			{
				Name:  "collect",
				Usage: "describe this node's GPUs (NVLink, fabric domain, affinity) through NVML as JSON",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write here (e.g. a shared nodes_dir) instead of stdout"},
					&cli.StringFlag{Name: "smi-xml", Usage: "read `nvidia-smi -q -x` output from this file instead of NVML"},
					&cli.StringFlag{Name: "smi-topo", Usage: "with --smi-xml: add `nvidia-smi topo -m` output from this file"},
					&cli.StringFlag{Name: "hostname", Usage: "node name to record (default: this host's short name)"},
				},
				Action: func(c *cli.Context) error { return cmdCollect(ctx, c) },
			},
			{
				Name:   "check-config",
				Usage:  "load the configuration, report every problem, print the effective values",
				Action: cmdCheckConfig,
			},
		},
	}
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + exitCodesHelp + "\n"
	return app.RunContext(ctx, args)
}

func inputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "tree, block or yaml (overrides slurm.format)"},
		&cli.StringFlag{Name: "ibnetdiscover", Usage: "ibnetdiscover dump (classic, -p or ibdiagnet2)"},
		&cli.StringFlag{Name: "guid-map", Usage: "file of '<guid> <hostname>' lines naming HCAs"},
		&cli.StringFlag{Name: "host-rule", Usage: "regexp whose first group is the host name in an HCA description"},
		&cli.StringFlag{Name: "include-hca", Usage: "only HCAs whose description matches (select one rail)"},
		&cli.StringFlag{Name: "exclude-hca", Usage: "leave out HCAs whose description matches (storage fabric)"},
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
		return cfg, exitErr(exitFailure, err.Error())
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
	set("nodes-dir", &cfg.NVLink.NodesDir)
	set("topology-file", &cfg.Slurm.TopologyFile)
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

// model is everything topogen knows about the cluster for one run.
type model struct {
	cfg      config.Config
	nodes    []string // Slurm's nodes; nil when unknown
	tree     *graph.Graph
	blocks   *graph.BlockPlan
	gpuNodes []nvml.Node
	source   string
}

func buildModel(ctx context.Context, c *cli.Context, cfg config.Config, log *slog.Logger) (*model, error) {
	m := &model{cfg: cfg}
	var err error
	if m.nodes, err = slurmNodes(ctx, c, cfg); err != nil {
		return nil, exitErr(exitFailure, err.Error())
	}
	needTree := cfg.Slurm.Format == "tree" || cfg.Slurm.Format == "yaml"
	needBlocks := cfg.Slurm.Format == "block" || (cfg.Slurm.Format == "yaml" && dirHasJSON(cfg.NVLink.NodesDir))
	var sources []string
	if needTree {
		if m.tree, err = buildTree(cfg, m.nodes, log); err != nil {
			return nil, exitErr(exitFailure, err.Error())
		}
		sources = append(sources, filepath.Base(cfg.Fabric.IBNetDiscover))
		for _, f := range m.tree.Findings {
			logFinding(log, f)
		}
	}
	if needBlocks || c.String("what") == "gres" {
		if m.gpuNodes, err = readNodes(cfg.NVLink.NodesDir); err != nil {
			return nil, exitErr(exitFailure, err.Error())
		}
	}
	if needBlocks {
		plan, err := graph.Blocks(m.gpuNodes, graph.BlockOptions{Prefix: cfg.NVLink.BlockPrefix, Degraded: cfg.NVLink.Degraded, Sizes: cfg.NVLink.BlockSizes})
		if err != nil {
			return nil, exitErr(exitFailure, err.Error())
		}
		for _, f := range plan.Findings {
			logFinding(log, f)
		}
		m.blocks = &plan
		sources = append(sources, fmt.Sprintf("%d node descriptions", len(m.gpuNodes)))
	}
	m.source = strings.Join(sources, " and ")
	if m.source == "" {
		m.source = "node descriptions"
	}
	return m, nil
}

func logFinding(log *slog.Logger, f graph.Finding) {
	lvl := slog.LevelInfo
	if f.Severity == graph.Warning {
		lvl = slog.LevelWarn
	}
	log.Log(context.Background(), lvl, f.Message, "kind", f.Kind, "subject", f.Subject)
}

func buildTree(cfg config.Config, nodes []string, log *slog.Logger) (*graph.Graph, error) {
	f, err := os.Open(cfg.Fabric.IBNetDiscover)
	if err != nil {
		return nil, fmt.Errorf("fabric dump: %w (capture one with: ibnetdiscover > %s)", err, cfg.Fabric.IBNetDiscover)
	}
	defer f.Close()
	fab, err := ib.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Fabric.IBNetDiscover, err)
	}
	// Every line the parser skipped, with its number: nothing is dropped
	// without a word.
	for _, d := range fab.Diagnostics {
		log.Warn("fabric dump line skipped", "file", cfg.Fabric.IBNetDiscover, "line", d.Line, "reason", d.Msg, "text", d.Text)
	}
	opt := graph.Options{SlurmNodes: nodes, SwitchNames: cfg.Fabric.SwitchNames, ExcludeGUIDs: map[string]bool{}}
	if opt.HostRule, err = compile(cfg.Fabric.HostRule); err != nil {
		return nil, err
	}
	if opt.IncludeHCA, err = compile(cfg.Fabric.IncludeHCA); err != nil {
		return nil, err
	}
	if opt.ExcludeHCA, err = compile(cfg.Fabric.ExcludeHCA); err != nil {
		return nil, err
	}
	for _, g := range cfg.Fabric.ExcludeGUIDs {
		opt.ExcludeGUIDs[normGUID(g)] = true
	}
	if cfg.Fabric.GUIDMap != "" {
		gm, err := os.Open(cfg.Fabric.GUIDMap)
		if err != nil {
			return nil, fmt.Errorf("GUID map: %w", err)
		}
		defer gm.Close()
		if opt.Names, err = ib.ParseGUIDMap(gm); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Fabric.GUIDMap, err)
		}
	}
	return graph.Build(fab, opt)
}

func normGUID(g string) string {
	g = strings.ToLower(strings.TrimSpace(g))
	for _, p := range []string{"h-", "s-", "0x"} {
		g = strings.TrimPrefix(g, p)
	}
	return fmt.Sprintf("%016s", g)
}

func compile(re string) (*regexp.Regexp, error) {
	if re == "" {
		return nil, nil
	}
	return regexp.Compile(re)
}

func dirHasJSON(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return len(m) > 0
}

func readNodes(dir string) ([]nvml.Node, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no node descriptions (*.json) in %s: run `topogen collect -o %s/$(hostname -s).json` on each GPU node", dir, dir)
	}
	sort.Strings(files)
	var out []nvml.Node
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		n, err := nvml.Read(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// slurmNodes returns the cluster's node list from the configured source.
func slurmNodes(ctx context.Context, c *cli.Context, cfg config.Config) ([]string, error) {
	if c.IsSet("nodes") {
		return hostlist.Expand(c.String("nodes"))
	}
	switch cfg.Slurm.NodeSource {
	case "slurm.conf":
		data, err := os.ReadFile(cfg.Slurm.SlurmConf)
		if err != nil {
			return nil, fmt.Errorf("node list: %w (set slurm.node_source: none to skip the check)", err)
		}
		return nodesFromSlurmConf(data)
	case "slurmrestd":
		ns, err := restNodes(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("node list: %w", err)
		}
		out := make([]string, 0, len(ns))
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out, nil
	}
	return nil, nil
}

// restNodes lists the cluster's nodes through slurmrestd.
func restNodes(ctx context.Context, cfg config.Config) ([]slurmrest.Node, error) {
	client, err := slurmrest.New(ctx, slurmrest.Config{URL: cfg.Slurm.REST.URL, User: cfg.Slurm.REST.User,
		Tokens: &slurmrest.FileToken{Path: cfg.Slurm.REST.TokenFile}})
	if err != nil {
		return nil, err
	}
	return client.Nodes(ctx)
}

// nodesFromSlurmConf lists the NodeName= entries of a slurm.conf.
func nodesFromSlurmConf(data []byte) ([]string, error) {
	names, _, err := slurmConfNodes(data)
	return names, err
}

// slurmConfNodes lists the NodeName= entries of a slurm.conf and the
// physical cores of each, where the line says (Boards × SocketsPerBoard ×
// CoresPerSocket, Sockets × CoresPerSocket, or CPUs / ThreadsPerCore).
func slurmConfNodes(data []byte) ([]string, map[string]int, error) {
	var names []string
	cores := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		kv := map[string]string{}
		first := ""
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			if first == "" {
				first = strings.ToLower(k)
			}
			kv[strings.ToLower(k)] = v
		}
		if first != "nodename" || strings.EqualFold(kv["nodename"], "DEFAULT") {
			continue
		}
		hs, err := hostlist.Expand(kv["nodename"])
		if err != nil {
			return nil, nil, fmt.Errorf("slurm.conf line %d: %w", i+1, err)
		}
		names = append(names, hs...)
		num := func(k string, def int) int {
			n, err := strconv.Atoi(kv[k])
			if err != nil || n <= 0 {
				return def
			}
			return n
		}
		n := 0
		switch {
		case kv["corespersocket"] != "" && kv["socketsperboard"] != "":
			n = num("boards", 1) * num("socketsperboard", 1) * num("corespersocket", 1)
		case kv["corespersocket"] != "":
			n = num("sockets", 1) * num("corespersocket", 1)
		case kv["cpus"] != "":
			n = num("cpus", 0) / num("threadspercore", 1)
		}
		if n > 0 {
			for _, h := range hs {
				cores[h] = n
			}
		}
	}
	return names, cores, nil
}

// coresPerNode returns the physical cores of each node from the node
// source, for gres.conf's Cores=; nil when the source cannot say.
func coresPerNode(ctx context.Context, cfg config.Config) (map[string]int, error) {
	switch cfg.Slurm.NodeSource {
	case "slurm.conf":
		data, err := os.ReadFile(cfg.Slurm.SlurmConf)
		if err != nil {
			return nil, err
		}
		_, cores, err := slurmConfNodes(data)
		return cores, err
	case "slurmrestd":
		ns, err := restNodes(ctx, cfg)
		if err != nil {
			return nil, err
		}
		cores := map[string]int{}
		for _, n := range ns {
			if n.Sockets > 0 && n.Cores > 0 {
				cores[n.Name] = n.Sockets * n.Cores
			}
		}
		return cores, nil
	}
	return nil, nil
}

// candidate renders the topology file topogen owns.
func (m *model) candidate() []byte {
	switch m.cfg.Slurm.Format {
	case "block":
		return render.BlockConf(*m.blocks, m.source)
	case "yaml":
		return render.TopologyYAML(m.tree, m.blocks, m.source)
	}
	return render.TreeConf(m.tree, m.source)
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
		out = m.candidate()
	case "gres":
		var cores map[string]int
		if cores, err = coresPerNode(c.Context, cfg); err != nil {
			return exitErr(exitFailure, "cores per node: "+err.Error())
		}
		if cores == nil {
			log.Warn("the node source gives no core counts: gres.conf is written without Cores=", "node_source", cfg.Slurm.NodeSource)
		}
		out, err = render.GresConf(m.gpuNodes, render.GresOptions{CoresPerNode: cores}, m.source)
	case "json":
		out, err = render.GraphJSON(m.tree, m.blocks)
	case "labels":
		out = render.LabelScript(render.NodeLabels(m.tree, m.blocks), m.source)
	case "labels-yaml":
		out, err = render.LabelYAML(render.NodeLabels(m.tree, m.blocks))
	default:
		return exitErr(exitFailure, fmt.Sprintf("--what %q: want topology, gres, json, labels or labels-yaml", c.String("what")))
	}
	if err != nil {
		return exitErr(exitFailure, err.Error())
	}
	if p := c.String("output"); p != "" {
		return apply.WriteAtomic(p, out, 0o644)
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
	cand := m.candidate()
	if cfg.Slurm.Format != "yaml" {
		if problems := apply.Validate(cand, m.nodes); len(problems) > 0 {
			fmt.Fprintln(w, "The candidate topology is invalid:")
			for _, p := range problems {
				fmt.Fprintln(w, "  "+p)
			}
			return exitErr(exitInvalid, "")
		}
	}
	live, err := os.ReadFile(cfg.Slurm.TopologyFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return exitErr(exitFailure, err.Error())
	}
	if bytes.Equal(live, cand) {
		fmt.Fprintf(w, "%s is up to date.\n", cfg.Slurm.TopologyFile)
		return nil
	}
	fmt.Fprintf(w, "%s would change:\n", cfg.Slurm.TopologyFile)
	for _, l := range lineDiff(live, cand) {
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
	fmt.Fprintln(w, "\nRun `topogen apply` to put it in place.")
	return exitErr(exitChanges, "")
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

// lineDiff lists removed and added lines, in file order.
func lineDiff(old, new []byte) []string {
	oldLines := strings.Split(strings.TrimRight(string(old), "\n"), "\n")
	newLines := strings.Split(strings.TrimRight(string(new), "\n"), "\n")
	inOld, inNew := map[string]int{}, map[string]int{}
	for _, l := range oldLines {
		inOld[l]++
	}
	for _, l := range newLines {
		inNew[l]++
	}
	var out []string
	for _, l := range oldLines {
		if inNew[l] > 0 {
			inNew[l]--
			continue
		}
		if l != "" {
			out = append(out, "- "+l)
		}
	}
	for _, l := range newLines {
		if inOld[l] > 0 {
			inOld[l]--
			continue
		}
		if l != "" {
			out = append(out, "+ "+l)
		}
	}
	return out
}

func cmdApply(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	var cand, expect []byte
	var nodes []string
	if f := c.String("from-file"); f != "" {
		if cand, err = os.ReadFile(f); err != nil {
			return exitErr(exitFailure, err.Error())
		}
		if nodes, err = slurmNodes(ctx, c, cfg); err != nil {
			return exitErr(exitFailure, err.Error())
		}
	} else {
		m, err := buildModel(ctx, c, cfg, log)
		if err != nil {
			return err
		}
		cand, nodes = m.candidate(), m.nodes
		if cfg.Slurm.Format == "yaml" {
			// topology.yaml holds the tree (the default topology, which
			// scontrol show topology reports) and the blocks: validate both
			// as topology.conf, verify against the default one.
			if m.blocks != nil {
				if problems := apply.Validate(render.BlockConf(*m.blocks, m.source), nodes); len(problems) > 0 {
					fmt.Fprintln(c.App.Writer, "Not applied: the NVLink blocks are invalid:")
					for _, p := range problems {
						fmt.Fprintln(c.App.Writer, "  "+p)
					}
					return exitErr(exitInvalid, "")
				}
			}
			if m.tree != nil {
				expect = render.TreeConf(m.tree, m.source)
			} else {
				expect = render.BlockConf(*m.blocks, m.source)
			}
		}
	}
	if cfg.Slurm.Format == "yaml" && expect == nil {
		return exitErr(exitFailure, "--from-file with format yaml: topogen cannot check a topology.yaml it did not render")
	}
	warnOtherFile(cfg, log)
	ctl := apply.Scontrol{Path: cfg.Slurm.Scontrol, RestartCommand: cfg.Slurm.RestartCommand}
	opt := apply.Options{Path: cfg.Slurm.TopologyFile, Candidate: cand, Expect: expect, KnownNodes: nodes, SkipValidation: c.Bool("skip-validation"),
		Settle: c.Duration("settle"), Ctl: ctl, Log: log}
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
	case errors.Is(err, apply.ErrRolledBack):
		fmt.Fprintf(w, "Rolled back: %v\nThe previous %s is in place; the rejected one was saved nowhere else.\n", err, cfg.Slurm.TopologyFile)
		return exitErr(exitRolledBack, "")
	case errors.Is(err, apply.ErrRollbackFailed):
		return exitErr(exitRollbackErr, err.Error())
	case err != nil:
		return exitErr(exitFailure, err.Error())
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

func cmdValidate(c *cli.Context) error {
	if c.NArg() != 1 {
		return exitErr(exitFailure, "validate takes one file")
	}
	data, err := os.ReadFile(c.Args().First())
	if err != nil {
		return exitErr(exitFailure, err.Error())
	}
	var nodes []string
	if c.IsSet("nodes") {
		if nodes, err = hostlist.Expand(c.String("nodes")); err != nil {
			return exitErr(exitFailure, err.Error())
		}
	}
	problems := apply.Validate(data, nodes)
	if len(problems) == 0 {
		fmt.Fprintf(c.App.Writer, "%s is valid.\n", c.Args().First())
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(c.App.Writer, "%s: %s\n", c.Args().First(), p)
	}
	return exitErr(exitInvalid, "")
}

func cmdCheckConfig(c *cli.Context) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s is valid: format %s, topology file %s, nodes from %s, fabric dump %s, node descriptions in %s\n",
		c.String("config"), cfg.Slurm.Format, cfg.Slurm.TopologyFile, cfg.Slurm.NodeSource, cfg.Fabric.IBNetDiscover, cfg.NVLink.NodesDir)
	return nil
}
