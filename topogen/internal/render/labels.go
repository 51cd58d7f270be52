package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// Kubernetes node label keys for the serving side, in the style of
// topology.kubernetes.io/zone.
const (
	LabelFabric = "topology.strata.io/fabric"
	LabelLeaf   = "topology.strata.io/leaf-switch"
	LabelSpine  = "topology.strata.io/spine-switch"
	LabelNVLink = "topology.strata.io/nvlink-domain"
)

// NodeLabels returns the labels of every node: its fabric, leaf switch and
// the switch above the leaf from the tree, its NVLink block from the plan.
func NodeLabels(g *graph.Graph, p *graph.BlockPlan) map[string]map[string]string {
	out := map[string]map[string]string{}
	set := func(node, k, v string) {
		if out[node] == nil {
			out[node] = map[string]string{}
		}
		out[node][k] = labelValue(v)
	}
	if g != nil {
		for _, f := range g.Fabrics {
			parent := map[string]string{}
			for _, s := range f.Switches {
				for _, c := range s.Children {
					parent[c] = s.Name
				}
			}
			for _, s := range f.Switches {
				for _, h := range s.Hosts {
					set(h, LabelFabric, f.Name)
					set(h, LabelLeaf, s.Name)
					if sp := parent[s.Name]; sp != "" {
						set(h, LabelSpine, sp)
					}
				}
			}
		}
	}
	if p != nil {
		for _, b := range p.Blocks {
			for _, n := range b.Nodes {
				set(n, LabelNVLink, b.Name)
			}
		}
	}
	return out
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// labelValue makes a valid label value: at most 63 characters of
// [A-Za-z0-9._-], beginning and ending with a letter or digit.
func labelValue(v string) string {
	v = labelUnsafe.ReplaceAllString(v, "-")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-._")
}

// LabelScript renders `kubectl label` commands, one per node, sorted.
// Every word is quoted for the shell: node names come from HCA
// descriptions and node files, which are not ours, and a name such as
// "gpu1;touch x" must reach kubectl as one argument, never run.
func LabelScript(labels map[string]map[string]string, source string) []byte {
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n" + Header(source) + "set -e\n")
	for _, n := range sortedKeys(labels) {
		fmt.Fprintf(&b, "kubectl label node %s --overwrite", shellQuote(n))
		for _, k := range sortedKeys(labels[n]) {
			fmt.Fprintf(&b, " %s", shellQuote(k+"="+labels[n][k]))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// shellQuote makes s one word for a POSIX shell: unchanged when every
// byte is one the shell gives no meaning, else in single quotes, inside
// which only the single quote itself needs care ('\”).
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("@%+=:,./_-", c) >= 0
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LabelYAML renders the labels as a YAML map of node to labels (JSON is
// YAML, and its key order is sorted).
func LabelYAML(labels map[string]map[string]string) ([]byte, error) {
	b, err := json.MarshalIndent(labels, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// GraphJSON renders the canonical model (tree, blocks, findings) as JSON.
func GraphJSON(g *graph.Graph, p *graph.BlockPlan) ([]byte, error) {
	doc := struct {
		Tree   *graph.Graph     `json:"tree,omitempty"`
		Blocks *graph.BlockPlan `json:"blocks,omitempty"`
	}{g, p}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
