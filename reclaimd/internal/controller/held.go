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
	saved   map[string]bool // nil: none saved since the start (or a failed save)
	cycle   uint32
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
// whole, as is every node when the store cannot be read.
func (c *Controller) resumeHeld(ctx context.Context, rules reclaimrules.Rules, now time.Time) {
	r, ok := c.cfg.Collector.(collect.Resumable)
	if !ok || c.held.resumed {
		return
	}
	c.held.resumed = true
	states, err := c.cfg.Store.Held(ctx, heldKind(r, rules))
	if err != nil {
		c.cfg.Log.Warn("the windows kept for a restart could not be read: every node's window is read whole", "error", err)
		return
	}
	if len(states) == 0 {
		return
	}
	n := r.Resume(states, now)
	c.cfg.Log.Info("resumed the windows kept by the last run: those nodes' sources are asked only for newer samples",
		"nodes", n, "kept", len(states))
}

// saveHeld writes the collector's windows to the store at the end of a
// cycle, for the next restart. Its failure costs only that restart's
// time (a whole read), so it is logged, never the cycle's error.
//
// Each save writes a tenth of the nodes (heldSlot), and the nodes not
// saved yet; the first after a start (or a failed save) writes every
// node and drops every other row. The nodes the cycle did not ask for
// are dropped: their collector forgot them.
func (c *Controller) saveHeld(ctx context.Context, rules reclaimrules.Rules, nodes []string, at time.Time) {
	r, ok := c.cfg.Collector.(collect.Resumable)
	if !ok {
		return
	}
	first := c.held.saved == nil
	slot := c.held.cycle % heldEvery
	c.held.cycle++
	var want func(string) bool
	if !first {
		want = func(n string) bool { return !c.held.saved[n] || heldSlot(n) == slot }
	}
	states := r.Held(want)
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
	if err := c.cfg.Store.SaveHeld(ctx, heldKind(r, rules), states, gone, first, at); err != nil {
		c.cfg.Log.Warn("the windows were not kept for a restart this cycle; the next cycle tries again", "error", err)
		c.held.saved = nil // the next save starts over
		return
	}
	if first {
		c.held.saved = make(map[string]bool, len(states))
	}
	for n := range states {
		c.held.saved[n] = true
	}
	for _, n := range gone {
		delete(c.held.saved, n)
	}
}
