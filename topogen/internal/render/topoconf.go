package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/topogen/internal/graph"
)

// TopoConf is a topology.conf as Slurm reads it.
type TopoConf struct {
	Switches   []ConfSwitch
	Blocks     []ConfBlock
	BlockSizes []int
}

// ConfSwitch is one SwitchName line.
type ConfSwitch struct {
	Name     string
	Switches []string // expanded
	Nodes    []string // expanded
	Line     int
}

// ConfBlock is one BlockName line.
type ConfBlock struct {
	Name  string
	Nodes []string
	Line  int
}

// ConfError is a problem with a line of a topology.conf.
type ConfError struct {
	Line int
	Msg  string
}

func (e ConfError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// ParseTopoConf reads topology.conf. Syntax errors carry the line.
func ParseTopoConf(data []byte) (*TopoConf, []ConfError) {
	tc := &TopoConf{}
	var errs []ConfError
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), maxConfLine)
	n := 1
	for ; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		kv := map[string]string{}
		order := []string{}
		bad := false
		for _, f := range fields {
			k, v, ok := strings.Cut(f, "=")
			if !ok || v == "" {
				errs = append(errs, ConfError{n, fmt.Sprintf("%q is not Key=Value", f)})
				bad = true
				break
			}
			lk := strings.ToLower(k)
			if _, dup := kv[lk]; dup {
				errs = append(errs, ConfError{n, fmt.Sprintf("%s given twice", k)})
				bad = true
				break
			}
			kv[lk] = v
			order = append(order, lk)
		}
		if bad {
			continue
		}
		expand := func(key string) []string {
			v, ok := kv[key]
			if !ok {
				return nil
			}
			hs, err := hostlist.Expand(v)
			if err != nil {
				errs = append(errs, ConfError{n, fmt.Sprintf("%s=%s: %v (Slurm would stop)", key, v, err)})
				return nil
			}
			return hs
		}
		switch order[0] {
		case "switchname":
			for _, k := range order[1:] {
				if k != "switches" && k != "nodes" && k != "linkspeed" {
					errs = append(errs, ConfError{n, fmt.Sprintf("unknown key %q on a SwitchName line", k)})
				}
			}
			tc.Switches = append(tc.Switches, ConfSwitch{Name: kv["switchname"], Switches: expand("switches"), Nodes: expand("nodes"), Line: n})
		case "blockname":
			for _, k := range order[1:] {
				if k != "nodes" {
					errs = append(errs, ConfError{n, fmt.Sprintf("unknown key %q on a BlockName line", k)})
				}
			}
			tc.Blocks = append(tc.Blocks, ConfBlock{Name: kv["blockname"], Nodes: expand("nodes"), Line: n})
		case "blocksizes":
			for _, s := range strings.Split(kv["blocksizes"], ",") {
				v, err := strconv.Atoi(s)
				if err != nil || v <= 0 {
					errs = append(errs, ConfError{n, fmt.Sprintf("BlockSizes entry %q is not a positive number", s)})
					continue
				}
				tc.BlockSizes = append(tc.BlockSizes, v)
			}
		default:
			errs = append(errs, ConfError{n, fmt.Sprintf("unknown line type %q", fields[0])})
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		errs = append(errs, ConfError{n, fmt.Sprintf("longer than %d MiB: no topology.conf line is (check the file)", maxConfLine>>20)})
	} else if err != nil {
		errs = append(errs, ConfError{0, err.Error()})
	}
	return tc, errs
}

// maxConfLine is the longest topology.conf line read: a leaf of thousands
// of nodes whose names no range shortens is a few hundred KiB.
const maxConfLine = 16 << 20

// Validate checks a topology.conf for everything that makes slurmctld
// stop (duplicate or undefined switches, non-numeric ranges, a switch
// with nothing below it, a cycle) or place jobs wrongly (a node under two
// leaves, nodes Slurm does not know, tree and block lines mixed). knownNodes, when not nil, is the cluster's node list.
func (tc *TopoConf) Validate(knownNodes []string) []ConfError {
	var errs []ConfError
	if len(tc.Switches) > 0 && len(tc.Blocks) > 0 {
		errs = append(errs, ConfError{tc.Blocks[0].Line, "SwitchName and BlockName lines in one file: topology/tree and topology/block are separate plugins"})
	}
	if len(tc.Switches) == 0 && len(tc.Blocks) == 0 {
		errs = append(errs, ConfError{0, "no SwitchName or BlockName line: an empty topology would leave every node unplaced"})
	}
	known := map[string]bool{}
	for _, n := range knownNodes {
		known[n] = true
	}
	checkNode := func(line int, n string) {
		if !graph.ValidNodeName(n) {
			// slurmctld refuses the file, or reads the name as another
			// node's: "Nodes=Nodes=x", "gpu$1", non-ASCII.
			errs = append(errs, ConfError{line, fmt.Sprintf("node name %q is not one Slurm accepts: letters, digits, '.', '_' and '-' only, not starting or ending with '-'", n)})
			return
		}
		if knownNodes != nil && !known[n] {
			errs = append(errs, ConfError{line, fmt.Sprintf("node %s is not a node of this cluster", n)})
		}
	}
	byName := map[string]ConfSwitch{}
	for _, s := range tc.Switches {
		if !validName(s.Name) {
			errs = append(errs, ConfError{s.Line, fmt.Sprintf("switch name %q has characters Slurm reads as a host list", s.Name)})
		}
		if prev, dup := byName[s.Name]; dup {
			errs = append(errs, ConfError{s.Line, fmt.Sprintf("switch %s is already defined on line %d", s.Name, prev.Line)})
			continue
		}
		byName[s.Name] = s
		if len(s.Switches) == 0 && len(s.Nodes) == 0 {
			errs = append(errs, ConfError{s.Line, fmt.Sprintf("switch %s has neither Switches= nor Nodes=", s.Name)})
		}
	}
	leafOf := map[string]ConfSwitch{}
	hasParent := map[string]bool{}
	for _, s := range tc.Switches {
		for _, c := range s.Switches {
			if _, ok := byName[c]; !ok {
				errs = append(errs, ConfError{s.Line, fmt.Sprintf("switch %s has child %s, which is not defined (slurmctld would exit)", s.Name, c)})
			}
			hasParent[c] = true
		}
		for _, n := range s.Nodes {
			if prev, ok := leafOf[n]; ok && prev.Name != s.Name {
				errs = append(errs, ConfError{s.Line, fmt.Sprintf("node %s is under switch %s and switch %s (line %d)", n, s.Name, prev.Name, prev.Line)})
				continue
			}
			leafOf[n] = s
			checkNode(s.Line, n)
		}
	}
	if len(tc.Switches) > 0 {
		// Several roots are fine: each disconnected fabric has its own, and
		// Slurm only warns that no switch reaches every node. No root at
		// all is a cycle.
		roots := 0
		for _, s := range tc.Switches {
			if !hasParent[s.Name] {
				roots++
			}
		}
		if roots == 0 {
			errs = append(errs, ConfError{0, "no root switch: the switches form a cycle"})
		}
		if c := cycle(byName); c != "" {
			errs = append(errs, ConfError{0, "switch cycle: " + c})
		}
	}
	blockOf := map[string]ConfBlock{}
	blockNames := map[string]int{}
	for _, bl := range tc.Blocks {
		if !validName(bl.Name) {
			errs = append(errs, ConfError{bl.Line, fmt.Sprintf("block name %q has characters Slurm reads as a host list", bl.Name)})
		}
		if prev, dup := blockNames[bl.Name]; dup {
			errs = append(errs, ConfError{bl.Line, fmt.Sprintf("block %s is already defined on line %d", bl.Name, prev)})
		}
		blockNames[bl.Name] = bl.Line
		if len(bl.Nodes) == 0 {
			errs = append(errs, ConfError{bl.Line, fmt.Sprintf("block %s has no nodes", bl.Name)})
		}
		for _, n := range bl.Nodes {
			if prev, ok := blockOf[n]; ok {
				errs = append(errs, ConfError{bl.Line, fmt.Sprintf("node %s is in block %s and block %s (line %d)", n, bl.Name, prev.Name, prev.Line)})
				continue
			}
			blockOf[n] = bl
			checkNode(bl.Line, n)
		}
	}
	for i := 1; i < len(tc.BlockSizes); i++ {
		if tc.BlockSizes[i] <= tc.BlockSizes[i-1] {
			errs = append(errs, ConfError{0, fmt.Sprintf("BlockSizes must increase: %v", tc.BlockSizes)})
			break
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
	return errs
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

func cycle(byName map[string]ConfSwitch) string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []string
	var found string
	var visit func(string) bool
	visit = func(n string) bool {
		color[n] = grey
		path = append(path, n)
		for _, c := range byName[n].Switches {
			if _, ok := byName[c]; !ok {
				continue
			}
			switch color[c] {
			case grey:
				found = strings.Join(append(path, c), " -> ")
				return true
			case white:
				if visit(c) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		color[n] = black
		return false
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return ""
}

// Placement is what a topology says about where nodes are: for a tree, the
// leaf of every node and the parent of every switch; for blocks, the block
// of every node. Two files with equal placements schedule alike.
type Placement map[string]string

// Placement returns the placement of a parsed topology.conf.
func (tc *TopoConf) Placement() Placement {
	p := Placement{}
	for _, s := range tc.Switches {
		for _, n := range s.Nodes {
			p["node "+n] = s.Name
		}
		for _, c := range s.Switches {
			p["switch "+c] = s.Name
		}
	}
	for _, bl := range tc.Blocks {
		for _, n := range bl.Nodes {
			p["node "+n] = bl.Name
		}
	}
	return p
}
