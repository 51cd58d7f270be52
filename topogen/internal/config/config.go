// Package config reads /etc/strata/topogen.yaml: strict YAML (an unknown
// or misspelt key is an error with its line), defaults in code, and a
// Validate that reports every problem with its path at once.
package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/strata-hpc/strata/internal/yamlconf"

	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// APIVersion of the file.
const APIVersion = "strata/v1"

// Config is topogen's configuration.
type Config struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Slurm      Slurm  `yaml:"slurm"`
	Fabric     Fabric `yaml:"fabric"`
	NVLink     NVLink `yaml:"nvlink"`
}

// Slurm says where Slurm's files are and how to reach slurmctld.
type Slurm struct {
	// Format of the topology topogen owns: "tree" or "block" write
	// topology.conf, "yaml" writes topology.yaml (Slurm 25.05 and later;
	// it makes Slurm ignore topology.conf).
	Format       string `yaml:"format"`
	TopologyFile string `yaml:"topology_file"`
	Scontrol     string `yaml:"scontrol"`
	// RestartCommand starts slurmctld again if a reconfigure stopped it.
	RestartCommand string `yaml:"restart_command"`
	// Nodes comes from "slurmrestd", "slurm.conf" or "none".
	NodeSource string `yaml:"node_source"`
	SlurmConf  string `yaml:"slurm_conf"`
	REST       REST   `yaml:"rest"`
}

// REST reaches slurmrestd.
type REST struct {
	URL       string `yaml:"url"`
	User      string `yaml:"user"`
	TokenFile string `yaml:"token_file"`
}

// Fabric says where the InfiniBand dump is and how to read it.
type Fabric struct {
	IBNetDiscover string   `yaml:"ibnetdiscover"`
	HostRule      string   `yaml:"host_rule"`
	GUIDMap       string   `yaml:"guid_map"`
	IncludeHCA    string   `yaml:"include_hca"`
	ExcludeHCA    string   `yaml:"exclude_hca"`
	ExcludeGUIDs  []string `yaml:"exclude_guids"`
	SwitchNames   string   `yaml:"switch_names"`
}

// NVLink says where the per-node GPU descriptions are.
type NVLink struct {
	NodesDir    string `yaml:"nodes_dir"` // JSON files written by topogen collect
	BlockPrefix string `yaml:"block_prefix"`
	Degraded    string `yaml:"degraded"`
	BlockSizes  []int  `yaml:"block_sizes"`
}

// Default returns the configuration used when a key is absent.
func Default() Config {
	return Config{
		APIVersion: APIVersion,
		Kind:       "TopogenConfig",
		Slurm: Slurm{
			Format: "tree", TopologyFile: "/etc/slurm/topology.conf", Scontrol: "scontrol",
			NodeSource: "slurm.conf", SlurmConf: "/etc/slurm/slurm.conf",
			REST: REST{URL: "http://127.0.0.1:6820", User: "root", TokenFile: "/etc/strata/slurmrestd.jwt"},
		},
		Fabric: Fabric{IBNetDiscover: "/var/lib/strata/topogen/ibnetdiscover.out", HostRule: graph.DefaultHostRule, SwitchNames: "auto"},
		NVLink: NVLink{NodesDir: "/var/lib/strata/topogen/nodes", BlockPrefix: "nvl", Degraded: "exclude"},
	}
}

// Load reads and validates a file; errors name the file and line.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return Parse(path, data)
}

// Parse decodes data strictly over the defaults and validates it; an
// empty file means the defaults.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	if err := yamlconf.Decode(name, data, &cfg, func() []error { return cfg.Validate() }); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate returns every problem, each with the path of its key.
func (c Config) Validate() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != APIVersion {
		bad("apiVersion", "%q is not supported: use %s", c.APIVersion, APIVersion)
	}
	if c.Kind != "TopogenConfig" {
		bad("kind", "%q: want TopogenConfig", c.Kind)
	}
	oneOf := func(path, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad(path, "%q: want one of %s", v, strings.Join(allowed, ", "))
	}
	oneOf("slurm.format", c.Slurm.Format, "tree", "block", "yaml")
	oneOf("slurm.node_source", c.Slurm.NodeSource, "slurmrestd", "slurm.conf", "none")
	oneOf("fabric.switch_names", c.Fabric.SwitchNames, "auto", "guid", "description")
	oneOf("nvlink.degraded", c.NVLink.Degraded, "exclude", "include")
	if c.Slurm.TopologyFile == "" {
		bad("slurm.topology_file", "required")
	}
	if c.Slurm.Format == "yaml" && !strings.HasSuffix(c.Slurm.TopologyFile, ".yaml") {
		bad("slurm.topology_file", "format yaml writes topology.yaml, but the file is %q", c.Slurm.TopologyFile)
	}
	if c.Slurm.Format != "yaml" && strings.HasSuffix(c.Slurm.TopologyFile, ".yaml") {
		bad("slurm.topology_file", "format %s writes topology.conf, but the file is %q: set format: yaml", c.Slurm.Format, c.Slurm.TopologyFile)
	}
	if c.Slurm.NodeSource == "slurmrestd" && (c.Slurm.REST.URL == "" || c.Slurm.REST.TokenFile == "") {
		bad("slurm.rest", "node_source slurmrestd needs url and token_file")
	}
	for _, kv := range [][2]string{{"fabric.host_rule", c.Fabric.HostRule}, {"fabric.include_hca", c.Fabric.IncludeHCA}, {"fabric.exclude_hca", c.Fabric.ExcludeHCA}} {
		path, re := kv[0], kv[1]
		if re == "" {
			continue
		}
		r, err := regexp.Compile(re)
		if err != nil {
			bad(path, "%v", err)
		} else if path == "fabric.host_rule" && r.NumSubexp() < 1 {
			bad(path, "%q has no capture group: put the host name part in ( ), e.g. ^(\\S+) HCA-\\d+", re)
		}
	}
	if graph.SanitizeName(c.NVLink.BlockPrefix) != c.NVLink.BlockPrefix {
		bad("nvlink.block_prefix", "%q: use letters, digits, '.', '_' and '-' only, not at either end", c.NVLink.BlockPrefix)
	}
	for i, s := range c.NVLink.BlockSizes {
		if s <= 0 || (i > 0 && s <= c.NVLink.BlockSizes[i-1]) {
			bad(fmt.Sprintf("nvlink.block_sizes[%d]", i), "%d: sizes must be positive and increasing", s)
		}
	}
	return errs
}
