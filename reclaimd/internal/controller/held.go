package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
)

// heldState is what the controller knows of the windows it keeps in the
// store for a restart (collect.Resumable): whether this process has read
// them back yet, and the nodes it last saved.
type heldState struct {
	resumed bool
	saved   map[string]bool // nil: never saved by this process
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
func (c *Controller) saveHeld(ctx context.Context, rules reclaimrules.Rules, at time.Time) {
	r, ok := c.cfg.Collector.(collect.Resumable)
	if !ok {
		return
	}
	states := r.Held()
	var gone []string
	for n := range c.held.saved {
		if _, ok := states[n]; !ok {
			gone = append(gone, n)
		}
	}
	first := c.held.saved == nil
	if err := c.cfg.Store.SaveHeld(ctx, heldKind(r, rules), states, gone, first, at); err != nil {
		c.cfg.Log.Warn("the windows were not kept for a restart this cycle; the next cycle tries again", "error", err)
		c.held.saved = nil // the next save starts over
		return
	}
	c.held.saved = make(map[string]bool, len(states))
	for n := range states {
		c.held.saved[n] = true
	}
}
