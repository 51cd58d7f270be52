package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// The keys of topology.yaml(5) (Slurm 25.05 and later): a list of named
// topologies, each a tree, a set of blocks, or flat.
type yamlTopology struct {
	Topology       string     `yaml:"topology"`
	ClusterDefault bool       `yaml:"cluster_default"`
	Tree           *yamlTree  `yaml:"tree"`
	Block          *yamlBlock `yaml:"block"`
	Flat           bool       `yaml:"flat"`
}

type yamlTree struct {
	Switches []yamlSwitch `yaml:"switches"`
}

type yamlSwitch struct {
	Switch    string `yaml:"switch"`
	Children  string `yaml:"children"`
	Nodes     string `yaml:"nodes"`
	LinkSpeed int    `yaml:"link_speed"`
}

type yamlBlock struct {
	BlockSizes []int            `yaml:"block_sizes"`
	Blocks     []yamlBlockEntry `yaml:"blocks"`
}

type yamlBlockEntry struct {
	Block string `yaml:"block"`
	Nodes string `yaml:"nodes"`
}

// unknownField is how yaml.v3 words a key the struct lacks.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// ParseTopologyYAML reads a topology.yaml as the switches and blocks of
// every topology in it together, as topology.conf lines would hold them
// (Line is the number of the topology in the file, from 1). It is strict:
// a key topology.yaml(5) does not have, a host list Slurm would refuse or
// a second YAML document is an error, since what it cannot read it cannot
// compare. An empty or all-comment file is no topology and no error.
func ParseTopologyYAML(data []byte) (*TopoConf, error) {
	tc := &TopoConf{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var topos []yamlTopology
	if err := dec.Decode(&topos); err != nil {
		if errors.Is(err, io.EOF) {
			return tc, nil
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, e := range te.Errors {
				msgs[i] = unknownField.ReplaceAllString(e, "unknown key $1")
			}
			return nil, fmt.Errorf("topology.yaml: %s", strings.Join(msgs, "; "))
		}
		return nil, fmt.Errorf("topology.yaml: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("topology.yaml: a second YAML document after the first")
	}
	expand := func(i int, what, name, list string) ([]string, error) {
		if list == "" {
			return nil, nil
		}
		hs, err := hostlist.Expand(list)
		if err != nil {
			return nil, fmt.Errorf("topology.yaml: topology %d, %s %s: %q: %w", i+1, what, name, list, err)
		}
		return hs, nil
	}
	for i, t := range topos {
		if t.Tree != nil {
			for _, s := range t.Tree.Switches {
				children, err := expand(i, "switch", s.Switch, s.Children)
				if err != nil {
					return nil, err
				}
				nodes, err := expand(i, "switch", s.Switch, s.Nodes)
				if err != nil {
					return nil, err
				}
				tc.Switches = append(tc.Switches, ConfSwitch{Name: s.Switch, Switches: children, Nodes: nodes, Line: i + 1})
			}
		}
		if t.Block != nil {
			for _, b := range t.Block.Blocks {
				nodes, err := expand(i, "block", b.Block, b.Nodes)
				if err != nil {
					return nil, err
				}
				tc.Blocks = append(tc.Blocks, ConfBlock{Name: b.Block, Nodes: nodes, Line: i + 1})
			}
			tc.BlockSizes = append(tc.BlockSizes, t.Block.BlockSizes...)
		}
	}
	return tc, nil
}
