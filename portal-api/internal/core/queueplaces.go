package core

import (
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/priority"
)

// maxAheadJobs bounds the readable jobs ahead that a queued job lists.
const maxAheadJobs = 20

// jobPlaces are the queue places of the jobs the caller may read, by the
// job's record in its snapshot, with which records they may read.
type jobPlaces struct {
	place    map[*slurmrest.Job]*priority.Place
	order    map[*slurmrest.Job]*priority.Queue
	readable map[*slurmrest.Job]bool
}

// places finds the queue place of each pending job among views.
func (s *Core) places(views []view) jobPlaces {
	jp := jobPlaces{place: map[*slurmrest.Job]*priority.Place{}, order: map[*slurmrest.Job]*priority.Queue{}, readable: map[*slurmrest.Job]bool{}}
	orders := map[string]*priority.Queue{}
	for _, v := range views {
		jp.readable[v.job] = true
		if !v.job.State.Has("PENDING") {
			continue
		}
		o, ok := orders[v.cluster]
		if !ok {
			c := s.byName[v.cluster]
			if snap := c.Poller.Snapshot(); snap != nil {
				o = s.queues.Of(v.cluster, snap, c.Priority)
			}
			orders[v.cluster] = o
		}
		if o == nil {
			continue
		}
		// The view's record is in the index's snapshot, which shares its
		// jobs with the poller's as long as no job changed; a poll in
		// between leaves the job without a place this once.
		if pl := o.ByJob[v.job]; pl != nil {
			jp.place[v.job], jp.order[v.job] = pl, o
		}
	}
	return jp
}

// queueJob is a pending job of GET /v1/queue, with its place in its
// partition's queue and its priority factors.
func (s *Core) queueJob(v view, reason string, jp jobPlaces) api.QueueJob {
	j := v.job
	out := api.QueueJob{Id: j.ID, User: j.User, Reason: reason, Class: ptr(v.class),
		SubmitTime: nonZeroTime(j.SubmitTime), EligibleTime: nonZeroTime(j.EligibleTime),
		Partition: ptr(priority.FirstPartition(j))}
	if j.Priority >= 0 {
		out.Priority = ptr(j.Priority)
	}
	pl, o := jp.place[j], jp.order[j]
	if pl == nil || pl.Position == 0 {
		return out
	}
	out.Position, out.Ahead = ptr(pl.Position), ptr(len(pl.Ahead))
	ahead := []int64{}
	for _, i := range pl.Ahead {
		if a := &o.Snap.Jobs[i]; jp.readable[a] && len(ahead) < maxAheadJobs {
			ahead = append(ahead, a.ID)
		}
	}
	out.AheadJobs = &ahead
	if f := pl.Factors; f != nil {
		af := api.PriorityFactors{Consistent: f.Consistent, Nice: ptr(f.Nice)}
		for name, dst := range map[string]**float64{"age": &af.Age, "assoc": &af.Assoc, "fairshare": &af.Fairshare,
			"job_size": &af.JobSize, "partition": &af.Partition, "qos": &af.Qos} {
			if x, ok := f.ByName[name]; ok {
				*dst = ptr(round2(x))
			}
		}
		tres := map[string]float64{}
		for k, x := range f.TRES {
			tres[k] = round2(x)
		}
		af.Tres = &tres
		if !f.Consistent {
			af.Unexplained = ptr(f.Unexplained)
		}
		out.Factors = &af
		if name, gap, ok := o.HoldingBack(pl); ok {
			out.HoldingBack = &struct {
				Factor string  `json:"factor"`
				Gap    float64 `json:"gap"`
			}{name, round2(gap)}
		}
	}
	return out
}
