package apply

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// ErrBudget says the candidate would lose more of the live topology than
// an apply may without Options.Force, or that the fabric scan it came from
// is suspect (duplicate GUIDs). Nothing was written.
var ErrBudget = errors.New("the candidate would change too much of the live topology")

// DefaultMaxDrop is the largest share of the live file's nodes, and of its
// switches, that an apply may drop without Force: a truncated fabric dump
// (a scan cut short, a subnet manager restarting) drops far more, while a
// node or two leaving for repair drops less.
const DefaultMaxDrop = 0.10

// checkBudget compares the live file old with the candidate expect (both
// topology.conf syntax) and returns why the candidate may not replace it
// without Force, or nil.
func checkBudget(old, expect []byte, o Options) []string {
	var problems []string
	if len(o.DuplicateGUIDs) > 0 {
		problems = append(problems, fmt.Sprintf("the fabric dump declares %d GUIDs more than once (%s): hosts behind them may be misplaced; "+
			"check the dump (two scans pasted together, or HCAs with cloned GUIDs)", len(o.DuplicateGUIDs), strings.Join(o.DuplicateGUIDs, ", ")))
	}
	if old == nil {
		return problems
	}
	oldTC, errs := render.ParseTopoConf(old)
	if len(errs) > 0 {
		// The live file is not one topogen can read: there is nothing to
		// measure against, and the candidate was validated.
		return problems
	}
	newTC, _ := render.ParseTopoConf(expect)
	oldNodes, newNodes := nodeSet(oldTC), nodeSet(newTC)
	var lost []string
	for n := range oldNodes {
		if !newNodes[n] {
			lost = append(lost, n)
		}
	}
	if over(len(lost), len(oldNodes), o.MaxDrop) {
		slices.Sort(lost)
		problems = append(problems, fmt.Sprintf("it drops %d of the live file's %d nodes (%s, more than the %s allowed): %s",
			len(lost), len(oldNodes), pct(len(lost), len(oldNodes)), pct100(o.MaxDrop), hostlist.Compress(lost)))
	}
	// Switches and blocks are counted, not named: a new naming rule
	// renames every switch and loses none, and a tree becoming blocks is
	// a change of plugin, not a loss.
	for _, m := range []struct {
		what     string
		old, new int
	}{
		{"switches", len(oldTC.Switches), len(newTC.Switches)},
		{"blocks", len(oldTC.Blocks), len(newTC.Blocks)},
	} {
		if m.new == 0 || m.new >= m.old || !over(m.old-m.new, m.old, o.MaxDrop) {
			continue
		}
		problems = append(problems, fmt.Sprintf("it has %d %s where the live file has %d (%s fewer, more than the %s allowed)",
			m.new, m.what, m.old, pct(m.old-m.new, m.old), pct100(o.MaxDrop)))
	}
	return problems
}

func over(lost, of int, share float64) bool { return lost > 0 && float64(lost) > share*float64(of) }

func pct(n, of int) string { return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(of)) }

func pct100(share float64) string { return fmt.Sprintf("%.0f%%", 100*share) }

// nodeSet is the node names of a topology.
func nodeSet(tc *render.TopoConf) map[string]bool {
	nodes := map[string]bool{}
	for _, s := range tc.Switches {
		for _, n := range s.Nodes {
			nodes[n] = true
		}
	}
	for _, b := range tc.Blocks {
		for _, n := range b.Nodes {
			nodes[n] = true
		}
	}
	return nodes
}
