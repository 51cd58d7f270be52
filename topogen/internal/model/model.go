// Package model builds everything topogen knows about the cluster for one
// run from the configuration: the cluster's node list (slurm.conf,
// slurmrestd or given), the InfiniBand tree from the fabric dump, the
// NVLink blocks from the node descriptions topogen collect wrote, and the
// topology file topogen would write from them. It reads files and asks
// slurmrestd; graph and render stay pure.
package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/topogen/internal/config"
	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
	"github.com/strata-hpc/strata/topogen/internal/graph"
	"github.com/strata-hpc/strata/topogen/internal/render"
	"github.com/strata-hpc/strata/topogen/internal/slurmconf"
)

// Model is everything topogen knows about the cluster for one run.
type Model struct {
	Config   config.Config
	Nodes    []string // Slurm's nodes; nil when unknown
	Tree     *graph.Graph
	Blocks   *graph.BlockPlan
	GPUNodes []nvml.Node
	Source   string // what the model was built from, for the header of what render writes
}

// Options are what a run adds to the configuration.
type Options struct {
	// Nodes is the cluster's node list given on the command line; nil
	// asks slurm.node_source.
	Nodes []string
	// GPUNodes reads the node descriptions even where the format does not
	// need them (for gres.conf).
	GPUNodes bool
	Log      *slog.Logger
}

// Build builds the model cfg describes. Every finding of the fabric and
// block builders, and every line of the dump the parser skipped, is
// logged.
func Build(ctx context.Context, cfg config.Config, opt Options) (*Model, error) {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Model{Config: cfg}
	var err error
	if m.Nodes, err = SlurmNodes(ctx, cfg, opt.Nodes); err != nil {
		return nil, err
	}
	needTree := cfg.Slurm.Format == "tree" || cfg.Slurm.Format == "yaml"
	needBlocks := cfg.Slurm.Format == "block" || (cfg.Slurm.Format == "yaml" && dirHasJSON(cfg.NVLink.NodesDir))
	var sources []string
	if needTree {
		if m.Tree, err = buildTree(cfg, m.Nodes, log); err != nil {
			return nil, err
		}
		sources = append(sources, filepath.Base(cfg.Fabric.IBNetDiscover))
		for _, f := range m.Tree.Findings {
			logFinding(log, f)
		}
	}
	if needBlocks || opt.GPUNodes {
		if m.GPUNodes, err = ReadNodeDescriptions(cfg.NVLink.NodesDir); err != nil {
			return nil, err
		}
	}
	if needBlocks {
		plan, err := graph.Blocks(m.GPUNodes, graph.BlockOptions{Prefix: cfg.NVLink.BlockPrefix, Degraded: cfg.NVLink.Degraded, Sizes: cfg.NVLink.BlockSizes})
		// The findings first, also when there is no block at all: they say
		// which node is in no domain, or in a degraded one.
		for _, f := range plan.Findings {
			logFinding(log, f)
		}
		if err != nil {
			return nil, err
		}
		m.Blocks = &plan
		sources = append(sources, fmt.Sprintf("%d node descriptions", len(m.GPUNodes)))
	}
	m.Source = strings.Join(sources, " and ")
	if m.Source == "" {
		m.Source = "node descriptions"
	}
	return m, nil
}

// Candidate renders the topology file topogen owns, in the configured
// format.
func (m *Model) Candidate() []byte {
	switch m.Config.Slurm.Format {
	case "block":
		return render.BlockConf(*m.Blocks, m.Source)
	case "yaml":
		return render.TopologyYAML(m.Tree, m.Blocks, m.Source)
	}
	return render.TreeConf(m.Tree, m.Source)
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
	fab, err := ib.ParseLimited(f, ib.Limits{MaxBytes: int64(cfg.Fabric.MaxDumpMiB) << 20})
	switch {
	case errors.Is(err, ib.ErrTooLarge):
		return nil, fmt.Errorf("%s: %w: check that fabric.ibnetdiscover is the fabric's dump (ibnetdiscover > FILE), "+
			"or for a larger fabric raise fabric.max_dump_mib (now %d)", cfg.Fabric.IBNetDiscover, err, cfg.Fabric.MaxDumpMiB)
	case errors.Is(err, ib.ErrLineTooLong):
		return nil, fmt.Errorf("%s: %w; check that fabric.ibnetdiscover is the fabric's dump (ibnetdiscover > FILE)", cfg.Fabric.IBNetDiscover, err)
	case err != nil:
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

// normGUID writes a GUID of fabric.exclude_guids the way the graph keys
// them: 16 lowercase hex digits, without 0x or an H-/S- prefix.
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

// ReadNodeDescriptions reads every *.json file topogen collect wrote in
// dir, in name order.
func ReadNodeDescriptions(dir string) ([]nvml.Node, error) {
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

// noNodeCheckHint ends the error of a node list that cannot be read: off
// the cluster (a laptop, a CI job) there is none, and the admin must learn
// how to go on without it.
const noNodeCheckHint = "; topogen compares the fabric with Slurm's nodes: --no-node-check (or --nodes LIST) goes on without the node list, " +
	"as slurm.node_source: none does"

// SlurmNodes returns the cluster's node list: given when not nil, else
// from slurm.node_source (nil for none).
func SlurmNodes(ctx context.Context, cfg config.Config, given []string) ([]string, error) {
	if given != nil {
		return given, nil
	}
	switch cfg.Slurm.NodeSource {
	case "slurm.conf":
		names, _, err := slurmconf.ReadFile(cfg.Slurm.SlurmConf)
		if err != nil {
			return nil, fmt.Errorf("node list: %w%s", err, noNodeCheckHint)
		}
		if len(names) == 0 {
			// An empty list would switch the node check off without a
			// word; a cluster always has nodes, so the reading is wrong.
			return nil, fmt.Errorf("node list: %s and the files it includes declare no node (no NodeName= line): "+
				"point slurm.slurm_conf at the cluster's slurm.conf, or set slurm.node_source: none to skip the check", cfg.Slurm.SlurmConf)
		}
		return names, nil
	case "slurmrestd":
		ns, err := restNodes(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("node list from slurmrestd: %w%s", err, noNodeCheckHint)
		}
		if len(ns) == 0 {
			return nil, fmt.Errorf("node list: slurmrestd at %s lists no node: check slurm.rest.url, or set slurm.node_source: none to skip the check", cfg.Slurm.REST.URL)
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

// CoresPerNode returns the physical cores of each node from the node
// source, for gres.conf's Cores=; nil when the source cannot say.
func CoresPerNode(ctx context.Context, cfg config.Config) (map[string]int, error) {
	switch cfg.Slurm.NodeSource {
	case "slurm.conf":
		_, cores, err := slurmconf.ReadFile(cfg.Slurm.SlurmConf)
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
