package core

import (
	"context"
	"fmt"
	"strconv"
	"time"

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
// answer) is ResultUnknown, "unknown, the portal stopped". It runs once at
// start, before the portal serves, so the log never says an action is
// still under way.
func (s *Core) SettleUnfinished(ctx context.Context) error {
	recs, err := s.cfg.Store.Unfinished(ctx)
	if err != nil {
		return err
	}
	lists := map[string]map[int64]slurmrest.Job{} // each cluster's jobs, listed once
	for _, a := range recs {
		result, why := s.outcome(ctx, a, lists)
		if err := s.cfg.Store.Settle(ctx, a.ID, result, why); err != nil {
			return err
		}
		s.log.Warn("audit record left open by a stop settled", "audit_id", a.ID, "cluster", a.Cluster, "action", a.Action,
			"target", a.Target, "user", a.User, "result", result, "why", why)
	}
	return nil
}

// outcome is what Slurm now says of an action left open.
func (s *Core) outcome(ctx context.Context, a store.Audit, lists map[string]map[int64]slurmrest.Job) (result, why string) {
	unknown := func(more string) (string, string) {
		if more == "" {
			return store.ResultUnknown, StoppedResult
		}
		return store.ResultUnknown, StoppedResult + " (" + more + ")"
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
		return unknown("Slurm could not be asked at the portal's start")
	}
	j, ok := jobs[id]
	if !ok {
		return unknown("Slurm no longer lists the job")
	}
	seen := fmt.Sprintf("at the portal's start Slurm showed job %d %s", id, j.State.String())
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
		return store.ResultOK, "the portal stopped before the result; " + seen
	}
	return store.ResultFailed, "the portal stopped before the result, and it was not done: " + seen
}
