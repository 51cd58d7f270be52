package core

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// StoppedResult is the error text of an action whose result the portal
// could not tell at its next start.
const StoppedResult = "unknown, the portal stopped"

// SettleUnfinished gives each audit record a stopped portal left open (an
// intent recorded, then a crash before the result) the result Slurm now
// shows: a cancel of a job Slurm shows cancelled is ok, one of a job still
// running failed, a hold of a held job ok, and so on; what Slurm cannot
// tell (a submission, a requeue, a job gone, a cluster that does not
// answer) is ResultUnknown, "unknown, the portal stopped", naming the
// portal instance that stopped. It runs at start, before the portal
// serves, so the log never says an action of a stopped portal is still
// under way, and then periodically (InstanceLoop) for the records of
// other portals on a shared database that stop while this one runs. A
// live portal's open records are its actions under way and are left to
// it (store.Unfinished).
func (s *Core) SettleUnfinished(ctx context.Context) error {
	recs, err := s.cfg.Store.Unfinished(ctx)
	if err != nil {
		return err
	}
	lists := map[string]map[int64]slurmrest.Job{} // each cluster's jobs, listed once
	for _, a := range recs {
		result, why := s.outcome(ctx, a, lists)
		settled, err := s.cfg.Store.SettleLeftOpen(ctx, a.ID, result, why)
		if err != nil {
			return err
		}
		if !settled {
			continue // another portal settled it first
		}
		s.log.Warn("audit record left open by a stopped portal settled", "audit_id", a.ID, "instance", a.Instance, "cluster", a.Cluster,
			"action", a.Action, "target", a.Target, "user", a.User, "result", result, "why", why)
	}
	return nil
}

// InstanceLoop keeps this portal's instance alive in the database (a beat
// every store.InstanceBeat) and settles, every SettleInterval, the
// records other portals left open when they stopped. The instance must be
// registered (store.Register) before the portal serves.
func (s *Core) InstanceLoop() daemon.Loop {
	beat := cmp.Or(s.cfg.BeatInterval, store.InstanceBeat)
	settle := cmp.Or(s.cfg.SettleInterval, 30*time.Second)
	return daemon.Loop{Name: "instance", Stall: 10*settle + 5*time.Minute, Run: func(ctx context.Context) error {
		bt, st := time.NewTicker(beat), time.NewTicker(settle)
		defer bt.Stop()
		defer st.Stop()
		for {
			daemon.Beat(ctx)
			select {
			case <-ctx.Done():
				return nil
			case <-bt.C:
				if err := s.cfg.Store.Beat(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("the portal instance's beat was not recorded: past store.InstanceTimeout other portals settle its open audit records",
						"instance", s.cfg.Store.Instance(), "err", err)
				}
			case <-st.C:
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				if err := s.SettleUnfinished(sctx); err != nil && ctx.Err() == nil {
					s.log.Warn("settling the audit records of stopped portals failed: tried again", "err", err)
				}
				if _, err := s.cfg.Store.PruneInstances(sctx); err != nil && ctx.Err() == nil {
					s.log.Warn("pruning the stopped portal instances failed", "err", err)
				}
				cancel()
			}
		}
	}}
}

// outcome is what Slurm now says of an action left open.
func (s *Core) outcome(ctx context.Context, a store.Audit, lists map[string]map[int64]slurmrest.Job) (result, why string) {
	who := "the portal"
	if a.Instance != "" {
		who = "the portal instance " + a.Instance
	}
	unknown := func(more string) (string, string) {
		var notes []string
		if a.Instance != "" {
			notes = append(notes, "portal instance "+a.Instance)
		}
		if more != "" {
			notes = append(notes, more)
		}
		if len(notes) == 0 {
			return store.ResultUnknown, StoppedResult
		}
		return store.ResultUnknown, StoppedResult + " (" + strings.Join(notes, "; ") + ")"
	}
	switch a.Action {
	case "cancel", "hold", "release":
	default:
		return unknown("")
	}
	c, ok := s.byName[a.Cluster]
	if !ok {
		return unknown("the cluster is no longer served")
	}
	id, err := strconv.ParseInt(a.Target, 10, 64)
	if err != nil {
		return unknown("") // an array task or a heterogeneous component: its record tells too little
	}
	jobs, listed := lists[a.Cluster]
	if !listed {
		jobs = nil
		if client, err := c.Poller.Client(ctx); err == nil {
			if l, err := client.Jobs(ctx, time.Time{}); err == nil {
				jobs = make(map[int64]slurmrest.Job, len(l.Jobs))
				for _, j := range l.Jobs {
					jobs[j.ID] = j
				}
			}
		}
		lists[a.Cluster] = jobs
	}
	if jobs == nil {
		return unknown("Slurm could not be asked when the record was settled")
	}
	j, ok := jobs[id]
	if !ok {
		return unknown("Slurm no longer lists the job")
	}
	seen := fmt.Sprintf("when the record was settled Slurm showed job %d %s", id, j.State.String())
	done := false
	switch a.Action {
	case "cancel":
		done = j.State.Has("CANCELLED")
	case "hold":
		done = j.Held
		seen += fmt.Sprintf(", held: %t", j.Held)
	case "release":
		done = !j.Held
		seen += fmt.Sprintf(", held: %t", j.Held)
	}
	if done {
		return store.ResultOK, who + " stopped before the result; " + seen
	}
	return store.ResultFailed, who + " stopped before the result, and it was not done: " + seen
}
