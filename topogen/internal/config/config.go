// Package config reads /etc/strata/topogen.yaml with internal/strictyaml:
// strict YAML (an unknown or misspelt key is an error with its line and
// column and the key it is closest to), defaults in code, and a Validate
// whose problems carry their key's path, so that every problem of a file
// comes at once as "file:line:col: message (hint: ...)".
package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/strata-hpc/strata/internal/strictyaml"

	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// APIVersion of the file.
const APIVersion = "strata/v1"

// Config is topogen's configuration.
type Config struct {
	// APIVersion and Kind are required in a file that sets anything (an
	// empty or all-comment file is the defaults, as no file is).
	APIVersion string `yaml:"apiVersion" strictyaml:"required"`
	Kind       string `yaml:"kind" strictyaml:"required"`
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
	// MaxDumpMiB bounds the dump topogen reads, in MiB: a larger input is
	// refused (an endless one, such as /dev/zero, would take the host's
	// memory). A fabric of 10,000 hosts on 8 rails dumps 32 MiB.
	MaxDumpMiB int `yaml:"max_dump_mib"`
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
		Fabric: Fabric{IBNetDiscover: "/var/lib/strata/topogen/ibnetdiscover.out", HostRule: graph.DefaultHostRule, SwitchNames: "auto",
			MaxDumpMiB: 256},
		NVLink: NVLink{NodesDir: "/var/lib/strata/topogen/nodes", BlockPrefix: "nvl", Degraded: "exclude"},
	}
}

// Load reads and validates a file; errors name the file, line and
// column. A file that cannot be read is an error wrapping the os error
// (errors.Is(err, os.ErrNotExist) for a missing one).
func Load(path string) (Config, error) {
	return strictyaml.LoadWithDefaults(path, Default(), decodeOptions)
}

// Parse decodes data strictly over the defaults and validates it; an
// empty file means the defaults. Every problem comes back at once, as
// strictyaml.Diagnostics.
func Parse(name string, data []byte) (Config, error) {
	return strictyaml.ParseWithDefaults(name, data, Default(), decodeOptions)
}

var decodeOptions = strictyaml.Options{What: "a topogen config", AllowEmpty: true,
	RequiredHint: func(path, key string) string {
		if key == "apiVersion" {
			return "add apiVersion: " + APIVersion + " at the top of the file"
		}
		return "add kind: TopogenConfig at the top of the file"
	},
	Nouns:   map[reflect.Type]string{reflect.TypeFor[Config](): "the topogen config"},
	Example: "start with apiVersion: " + APIVersion + " and kind: TopogenConfig (see /etc/strata/topogen.yaml)"}

// Validate returns every problem, each with the path of its key.
func (c Config) Validate() strictyaml.Diagnostics {
	var ds strictyaml.Diagnostics
	bad := func(path, hint, format string, args ...any) {
		ds = append(ds, strictyaml.Diagnostic{Path: path, Msg: path + ": " + fmt.Sprintf(format, args...), Hint: hint})
	}
	if c.APIVersion != APIVersion {
		bad("apiVersion", "use apiVersion: "+APIVersion, "%q is not supported", c.APIVersion)
	}
	if c.Kind != "TopogenConfig" {
		bad("kind", "use kind: TopogenConfig", "%q is not a topogen config", c.Kind)
	}
	oneOf := func(path, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		hint := ""
		if guess := strictyaml.Closest(v, allowed); guess != "" {
			hint = "did you mean " + guess + "?"
		}
		bad(path, hint, "want one of %s, got %q", strings.Join(allowed, ", "), v)
	}
	oneOf("slurm.format", c.Slurm.Format, "tree", "block", "yaml")
	oneOf("slurm.node_source", c.Slurm.NodeSource, "slurmrestd", "slurm.conf", "none")
	oneOf("fabric.switch_names", c.Fabric.SwitchNames, "auto", "guid", "description")
	oneOf("nvlink.degraded", c.NVLink.Degraded, "exclude", "include")
	if c.Slurm.TopologyFile == "" {
		bad("slurm.topology_file", "give the topology file topogen writes, such as /etc/slurm/topology.conf", "required")
	}
	if c.Slurm.Format == "yaml" && !strings.HasSuffix(c.Slurm.TopologyFile, ".yaml") {
		bad("slurm.topology_file", "name a .yaml file, such as /etc/slurm/topology.yaml, or set another format",
			"format yaml writes topology.yaml, but the file is %q", c.Slurm.TopologyFile)
	}
	if c.Slurm.Format != "yaml" && strings.HasSuffix(c.Slurm.TopologyFile, ".yaml") {
		bad("slurm.topology_file", "set format: yaml, or name topology.conf",
			"format %s writes topology.conf, but the file is %q", c.Slurm.Format, c.Slurm.TopologyFile)
	}
	if c.Slurm.NodeSource == "slurmrestd" && (c.Slurm.REST.URL == "" || c.Slurm.REST.TokenFile == "") {
		bad("slurm.rest", "set rest.url and rest.token_file, or another node_source", "node_source slurmrestd needs url and token_file")
	}
	for _, kv := range [][2]string{{"fabric.host_rule", c.Fabric.HostRule}, {"fabric.include_hca", c.Fabric.IncludeHCA}, {"fabric.exclude_hca", c.Fabric.ExcludeHCA}} {
		path, re := kv[0], kv[1]
		if re == "" {
			continue
		}
		r, err := regexp.Compile(re)
		if err != nil {
			bad(path, "write a Go regular expression (RE2); quote it in single quotes", "%q is not a regular expression: %s",
				re, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		} else if path == "fabric.host_rule" && r.NumSubexp() < 1 {
			bad(path, `put the host name part in ( ), e.g. ^(\S+) HCA-\d+`, "%q has no capture group", re)
		}
	}
	if c.Fabric.MaxDumpMiB <= 0 || c.Fabric.MaxDumpMiB > 1<<14 {
		bad("fabric.max_dump_mib", "give the most MiB of dump to read, such as 256 (the default), up to 16384",
			"%d is not a size in MiB from 1 to 16384", c.Fabric.MaxDumpMiB)
	}
	if graph.SanitizeName(c.NVLink.BlockPrefix) != c.NVLink.BlockPrefix {
		bad("nvlink.block_prefix", "use letters, digits, '.', '_' and '-' only, not at either end: block names are the prefix and a number",
			"%q is not a block name prefix", c.NVLink.BlockPrefix)
	}
	for i, s := range c.NVLink.BlockSizes {
		if s <= 0 || (i > 0 && s <= c.NVLink.BlockSizes[i-1]) {
			bad(fmt.Sprintf("nvlink.block_sizes[%d]", i), "list the block sizes in GPUs, positive and increasing, such as [18, 36, 72]",
				"%d: sizes must be positive and increasing", s)
		}
	}
	return ds
}
