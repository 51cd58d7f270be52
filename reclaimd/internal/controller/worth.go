package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
	"github.com/strata-hpc/strata/reclaimd/internal/worth"
)

// settleAfter is how long after its time-limit end a reclaim is still
// looked at: long enough for a cycle to see a beneficiary's end that fell
// just before it.
const settleAfter = 10 * time.Minute

// keepReclaim keeps a reclaim carried out on the re-read job j, for its
// observed worth (observeWorth).
func (c *Controller) keepReclaim(ctx context.Context, id int64, rec store.Record, j slurmrest.Job, at time.Time) {
	r := store.Reclaim{RecordID: id, JobID: j.ID, Tenant: rec.Tenant, Account: j.Account, Rule: rec.Rule, Kind: rec.Kind, At: at}
	if j.TimeLimit > 0 && !j.StartTime.IsZero() {
		r.LimitEnd = j.StartTime.Add(j.TimeLimit)
	}
	for _, g := range j.GPUs {
		r.GPUs = append(r.GPUs, store.GPU{Node: g.Node, Index: g.Index})
	}
	if err := c.cfg.Store.AddReclaim(ctx, r); err != nil {
		c.cfg.Log.Error("keeping a reclaim for its observed worth failed: its beneficiaries are not counted", "job_id", j.ID, "error", err)
	}
}

// observeWorth works out, from the cycle's full job list, which jobs
// started on the GPUs that open reclaims freed, keeps the runs seen there
// and the handovers (package worth), and adds the GPU time newly observed
// to the metrics, by the reclaimed job's tenant and rule.
//
// A run is seen by its GPU indices, which slurmrestd gives only while the
// job runs (a finished job's gres_detail is empty in 24.11 and 26.05, and
// slurmdbd keeps GPU counts, not indices): a job that started and ended
// between two cycles is not counted. A run's end is the job's end_time
// when slurmrestd still lists the run ended, or else the last cycle that
// saw it running.
func (c *Controller) observeWorth(ctx context.Context, all []slurmrest.Job, now time.Time) error {
	open, err := c.cfg.Store.OpenReclaims(ctx, now.Add(-settleAfter))
	if err != nil {
		return fmt.Errorf("read open reclaims: %w", err)
	}
	if len(open) == 0 {
		return nil
	}
	freed := map[worth.GPU][]store.Reclaim{}
	from := worth.ActionSecond(open[0].At)
	for _, r := range open {
		from = minTime(from, worth.ActionSecond(r.At))
		for _, g := range r.GPUs {
			freed[worth.GPU(g)] = append(freed[worth.GPU(g)], r)
		}
	}
	byID := make(map[int64]slurmrest.Job, len(all))
	var seen []store.FreedRun
	running := map[[2]int64]bool{} // job id, start (ms): seen running this cycle
	for _, j := range all {
		byID[j.ID] = j
		if !j.Running() || j.StartTime.IsZero() {
			continue
		}
		for _, g := range j.GPUs {
			for _, r := range freed[worth.GPU{Node: g.Node, Index: g.Index}] {
				if j.StartTime.Before(worth.ActionSecond(r.At)) || !j.StartTime.Before(r.LimitEnd) {
					continue
				}
				seen = append(seen, store.FreedRun{JobID: j.ID, Start: j.StartTime, GPU: store.GPU{Node: g.Node, Index: g.Index},
					Tenant: c.tenant(j.Account), Account: j.Account, SeenAt: now})
				running[[2]int64{j.ID, j.StartTime.UnixMilli()}] = true
				break
			}
		}
	}
	stored, err := c.cfg.Store.FreedRuns(ctx, from)
	if err != nil {
		return fmt.Errorf("read runs on freed GPUs: %w", err)
	}
	for _, r := range stored {
		if !r.End.IsZero() || running[[2]int64{r.JobID, r.Start.UnixMilli()}] {
			continue
		}
		// Ended since the last cycle: its end_time if slurmrestd still
		// lists this run, else the last cycle that saw it run.
		r.End = worth.ActionSecond(r.SeenAt)
		if j, ok := byID[r.JobID]; ok && j.StartTime.Equal(r.Start) && j.EndTime.After(r.Start) && !j.EndTime.After(now) {
			r.End = j.EndTime
		}
		seen = append(seen, r)
	}
	if err := c.cfg.Store.SaveFreedRuns(ctx, seen); err != nil {
		return fmt.Errorf("keep runs on freed GPUs: %w", err)
	}
	if stored, err = c.cfg.Store.FreedRuns(ctx, from); err != nil {
		return fmt.Errorf("read runs on freed GPUs: %w", err)
	}
	runs := make([]worth.Run, 0, len(stored))
	for _, r := range stored {
		runs = append(runs, worth.Run{JobID: r.JobID, Tenant: r.Tenant, Account: r.Account, Start: r.Start, End: r.End, GPUs: []worth.GPU{worth.GPU(r.GPU)}})
	}
	reclaims := make([]worth.Reclaim, 0, len(open))
	ids := make([]int64, 0, len(open))
	byRecord := map[int64]store.Reclaim{}
	for _, r := range open {
		wr := worth.Reclaim{ID: r.RecordID, JobID: r.JobID, Tenant: r.Tenant, Rule: r.Rule, At: r.At, LimitEnd: r.LimitEnd}
		for _, g := range r.GPUs {
			wr.GPUs = append(wr.GPUs, worth.GPU(g))
		}
		reclaims = append(reclaims, wr)
		ids = append(ids, r.RecordID)
		byRecord[r.RecordID] = r
	}
	// A run still running counts to the cycle's whole second: its end,
	// when Slurm gives it, has whole seconds and is no earlier, so what
	// was counted never has to be taken back from the counter.
	hs := worth.Handovers(reclaims, mergeRuns(runs), worth.ActionSecond(now), c.gap())
	keep := make([]store.Handover, 0, len(hs))
	for _, h := range hs {
		sh := store.Handover{RecordID: h.Reclaim, Handover: reclaimapi.Handover{JobID: h.JobID, Tenant: h.Tenant, Account: h.Account,
			GPU: store.GPU(h.GPU), Start: h.Start, CountedUntil: h.Until, GPUSeconds: h.Seconds, StartGainSeconds: h.StartGain.Seconds()}}
		if !h.End.IsZero() {
			e := h.End
			sh.End = &e
		}
		keep = append(keep, sh)
	}
	before, err := c.cfg.Store.ReplaceHandovers(ctx, ids, keep)
	if err != nil {
		return fmt.Errorf("keep handovers: %w", err)
	}
	after := worth.Totals(hs)
	for id, secs := range after {
		if d := secs - before[id]; d > 0 {
			r := byRecord[id]
			c.cfg.Metrics.ObservedGPUSeconds.WithLabelValues(r.Tenant, r.Rule).Add(d)
		}
	}
	return nil
}

// mergeRuns joins a job's run on several freed GPUs (kept one row per
// GPU) into one Run.
func mergeRuns(rows []worth.Run) []worth.Run {
	type key struct {
		job   int64
		start int64
	}
	at := map[key]int{}
	var out []worth.Run
	for _, r := range rows {
		k := key{r.JobID, r.Start.UnixMilli()}
		if i, ok := at[k]; ok {
			out[i].GPUs = append(out[i].GPUs, r.GPUs...)
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

// gap is the longest a freed GPU may sit unused before a start on it
// counts no more (Config.HandoverGap, or worth.DefaultGap).
func (c *Controller) gap() time.Duration {
	if c.cfg.HandoverGap > 0 {
		return c.cfg.HandoverGap
	}
	return worth.DefaultGap
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
