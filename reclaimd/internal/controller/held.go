package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
)

// heldState is what the controller knows of the windows it keeps in the
// store for a restart (collect.Resumable): whether this process has read
// them back yet, the nodes whose windows it has saved, and its saves.
type heldState struct {
	resumed bool
	// saved: the nodes with a row of this kind, true when it is current
	// (saved by this process, or resumed from), false when it is to be
	// written again at the next save; nil: none saved since the start (or
	// a failed save), so the next save writes every node.
	saved map[string]bool
	cycle uint32
}

// heldEvery is how many cycles apart each node's windows are written: a
// tenth of the nodes each cycle (every node at a process's first save).
// A node's windows are a few bytes a sample, two hours of them each time
// (about 3 KB a GPU where the agents' sampling clock jitters), so
// writing every node every cycle would cost each cycle about what the
// restart saves; written a tenth at a time, a restart reads at most ten
// cycles of samples more for a node than a steady cycle does.
const heldEvery = 10

// heldSlot is the save of the heldEvery that writes node's windows.
func heldSlot(node string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(node))
	return h.Sum32() % heldEvery
}

// heldKind is the key the windows are kept under: the source and its
// settings, and the rule set in force. Windows hold samples, not
// verdicts, but a restart under other rules reads them whole all the
// same: what is resumed was kept under exactly this configuration.
func heldKind(r collect.Resumable, rules reclaimrules.Rules) string {
	b, err := json.Marshal(rules)
	if err != nil {
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return r.HeldKind() + " rules=" + hex.EncodeToString(sum[:8])
}

// resumeHeld reads the windows a previous run kept back into the collector,
// once, before this process's first collection: that collection then asks
// each resumed node's source only for what is newer. A node whose kept
// state is older than its window, or kept under another kind, is read
// whole, as is every node when the store cannot be read. The rows are
// read and taken in one node at a time, so that a restart holds no more
// of them at once than one node's.
func (c *Controller) resumeHeld(ctx context.Context, rules reclaimrules.Rules, now time.Time) {
	r, ok := c.cfg.Collector.(collect.Resumable)
	if !ok || c.held.resumed {
		return
	}
	c.held.resumed = true
	kind := heldKind(r, rules)
	// Of each node with a row: true once resumed (its row is as good as
	// one this process wrote), false when not (its row is written again at
	// the first save, or dropped when the node is not asked for).
	rows := map[string]bool{}
	n := 0
	err := c.cfg.Store.EachHeld(ctx, kind, func(node string, state []byte) error {
		resumed := r.Resume(map[string][]byte{node: state}, now) == 1
		rows[node] = resumed
		if resumed {
			n++
		}
		return nil
	})
	if err != nil {
		c.cfg.Log.Warn("the windows kept for a restart could not be read: every node not read back yet is read whole", "error", err)
		return
	}
	if len(rows) == 0 {
		return
	}
	c.cfg.Log.Info("resumed the windows kept by the last run: those nodes' sources are asked only for newer samples",
		"nodes", n, "kept", len(rows))
	if n == 0 {
		return // the first save writes every node, as after a start
	}
	// The first save is then a cycle's: the nodes not resumed and a
	// tenth of the others, not every node at once. What another kind
	// left goes now, as the first save of a start would drop it.
	if err := c.cfg.Store.DropHeldOtherThan(ctx, kind); err != nil {
		c.cfg.Log.Warn("the windows another configuration kept were not dropped; the first save writes every node instead", "error", err)
		return
	}
	c.held.saved = rows
}

// saveHeld writes the collector's windows to the store at the end of a
// cycle, for the next restart. Its failure costs only that restart's
// time (a whole read), so it is logged, never the cycle's error.
//
// Each save writes a tenth of the nodes (heldSlot), and the nodes not
// saved yet; the first after a start that resumed nothing (or after a
// failed save) writes every node, a tenth at a time, and drops every
// other row. The nodes the cycle did not ask for are dropped: their
// collector forgot them.
func (c *Controller) saveHeld(ctx context.Context, rules reclaimrules.Rules, nodes []string, at time.Time) {
	r, ok := c.cfg.Collector.(collect.Resumable)
	if !ok {
		return
	}
	kind := heldKind(r, rules)
	slot := c.held.cycle % heldEvery
	c.held.cycle++
	if c.held.saved == nil {
		// Every node, a tenth in each transaction: the states of a tenth
		// of the nodes are held at once, not every node's (a few MB at
		// 8,000 GPUs whose agents' clocks jitter). A save cut short
		// leaves some nodes unsaved: a restart reads those whole.
		saved := map[string]bool{}
		for s := range uint32(heldEvery) {
			states := r.Held(func(n string) bool { return heldSlot(n) == s })
			if err := c.cfg.Store.SaveHeld(ctx, kind, states, nil, s == 0, at); err != nil {
				c.cfg.Log.Warn("the windows were not kept for a restart this cycle; the next cycle tries again", "error", err)
				return
			}
			for n := range states {
				saved[n] = true
			}
		}
		c.held.saved = saved
		return
	}
	states := r.Held(func(n string) bool { return !c.held.saved[n] || heldSlot(n) == slot })
	asked := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		asked[n] = true
	}
	var gone []string
	for n := range c.held.saved {
		if !asked[n] {
			gone = append(gone, n)
		}
	}
	if err := c.cfg.Store.SaveHeld(ctx, kind, states, gone, false, at); err != nil {
		c.cfg.Log.Warn("the windows were not kept for a restart this cycle; the next cycle tries again", "error", err)
		c.held.saved = nil // the next save starts over
		return
	}
	for n := range states {
		c.held.saved[n] = true
	}
	for _, n := range gone {
		delete(c.held.saved, n)
	}
}
