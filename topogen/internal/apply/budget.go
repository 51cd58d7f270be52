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
var ErrBudget = errors.New("the change budget refused the candidate")

// DefaultMaxDrop is the largest share of the live file's nodes, and of its
// switches, that an apply may drop without Force: a truncated fabric dump
// (a scan cut short, a subnet manager restarting) drops far more, while a
// node or two leaving for repair drops less.
const DefaultMaxDrop = 0.10

// Budget compares the live file with the candidate (both topology.conf,
// or both topology.yaml when isYAML, where every topology of the file
// counts) and returns why the candidate may not replace the live file
// without Force, or nil. A live file it cannot read is a reason too: the
// budget cannot tell what the candidate would drop, and a truncated
// candidate must not pass because the file it replaces has a line topogen
// does not know. live is nil when there is no live file.
func Budget(live, candidate []byte, isYAML bool, maxDrop float64, duplicateGUIDs []string) []string {
	if maxDrop <= 0 {
		maxDrop = DefaultMaxDrop
	}
	var problems []string
	if len(duplicateGUIDs) > 0 {
		problems = append(problems, fmt.Sprintf("the fabric dump declares %d GUIDs more than once (%s): hosts behind them may be misplaced; "+
			"check the dump (two scans pasted together, or HCAs with cloned GUIDs)", len(duplicateGUIDs), strings.Join(duplicateGUIDs, ", ")))
	}
	if live == nil {
		return problems
	}
	oldTC, err := measure(live, isYAML)
	if err != nil {
		return append(problems, fmt.Sprintf("the live file cannot be read to measure the change against it (%v), so what the candidate "+
			"would drop is unknown: fix that line of the live file (or move the file away) and run again, or apply with --force "+
			"if the candidate is right", err))
	}
	newTC, err := measure(candidate, isYAML)
	if err != nil {
		return append(problems, fmt.Sprintf("the candidate cannot be measured (%v)", err))
	}
	oldNodes, newNodes := nodeSet(oldTC), nodeSet(newTC)
	var lost []string
	for n := range oldNodes {
		if !newNodes[n] {
			lost = append(lost, n)
		}
	}
	if over(len(lost), len(oldNodes), maxDrop) {
		slices.Sort(lost)
		problems = append(problems, fmt.Sprintf("it drops %d of the live file's %d nodes (%s, more than the %s allowed): %s",
			len(lost), len(oldNodes), pct(len(lost), len(oldNodes)), pct100(maxDrop), hostlist.Compress(lost)))
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
		if m.new == 0 || m.new >= m.old || !over(m.old-m.new, m.old, maxDrop) {
			continue
		}
		problems = append(problems, fmt.Sprintf("it has %d %s where the live file has %d (%s fewer, more than the %s allowed)",
			m.new, m.what, m.old, pct(m.old-m.new, m.old), pct100(maxDrop)))
	}
	return problems
}

// measure reads a topology file for the budget.
func measure(data []byte, isYAML bool) (*render.TopoConf, error) {
	if isYAML {
		return render.ParseTopologyYAML(data)
	}
	tc, errs := render.ParseTopoConf(data)
	if len(errs) > 0 {
		msgs := make([]string, 0, min(len(errs), 3))
		for _, e := range errs[:min(len(errs), 3)] {
			msgs = append(msgs, e.Error())
		}
		if len(errs) > 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-3))
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return tc, nil
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
