// Package worth works out what a reclaim was worth, as observed: which
// jobs started on the GPUs a requeue or cancel freed, and how much GPU time
// they ran there before the reclaimed job's time limit would have ended it
// (the only time the reclaim made possible). It is a pure function of the
// reclaims, the runs seen on their GPUs and the clock; reclaimd's
// controller feeds it what slurmrestd shows, and simulate what a trace
// records.
//
// What is measured and what is estimated:
//   - Measured: the beneficiaries (the jobs Slurm started on a freed GPU,
//     by its GPU index) and the time each ran there, from its start to its
//     end (or now), clipped to the reclaimed job's time-limit end.
//   - Estimated: the start gain, the time from a beneficiary's start to
//     the reclaimed job's time-limit end, when the GPU would otherwise have
//     become free. A job that would have ended sooner by itself would have
//     freed it sooner; that cannot be known, so the gain is the most the
//     reclaim can have given.
package worth

import (
	"cmp"
	"slices"
	"time"
)

// DefaultGap is how long a freed GPU may stay unused before a job that
// starts on it no longer counts as a beneficiary: the gap between the
// action (or the previous beneficiary's end) and the next start. Five
// minutes is five of slurmctld's main scheduling passes at their default
// interval (sched_interval 60 s) and ten backfill passes (bf_interval
// 30 s): a waiting job that fits starts well within it.
const DefaultGap = 5 * time.Minute

// GPU names one GPU: a node and Slurm's index of the GPU on it.
type GPU struct {
	Node  string
	Index int
}

// Reclaim is one requeue or cancel carried out.
type Reclaim struct {
	ID     int64 // the decision record's id
	JobID  int64
	Tenant string
	Rule   string
	// At is when the action ran; LimitEnd when the reclaimed run's time
	// limit would have ended it (zero: no limit, and no figure).
	At, LimitEnd time.Time
	GPUs         []GPU
}

// BoundSeconds is the upper bound: the GPUs times the time from the action
// to the time-limit end.
func (r Reclaim) BoundSeconds() float64 {
	if r.LimitEnd.IsZero() || !r.LimitEnd.After(r.At) {
		return 0
	}
	return float64(len(r.GPUs)) * r.LimitEnd.Sub(r.At).Seconds()
}

// Run is one run of a job on some GPUs.
type Run struct {
	JobID           int64
	Tenant, Account string
	Start           time.Time
	End             time.Time // zero: still running
	GPUs            []GPU
}

// Handover is one beneficiary on one freed GPU.
type Handover struct {
	Reclaim         int64 // the Reclaim's ID
	JobID           int64
	Tenant, Account string
	GPU             GPU
	Start           time.Time
	End             time.Time // zero: still running
	// Until is the end of the time counted: the run's end (or now),
	// clipped to the reclaimed run's time-limit end.
	Until time.Time
	// Seconds is the GPU time counted, Until − Start (measured).
	Seconds float64
	// StartGain is the reclaimed run's time-limit end − Start: how much
	// sooner the beneficiary started than the GPU would otherwise have
	// been free (estimated; see the package documentation).
	StartGain time.Duration
}

// Handovers returns every beneficiary of the reclaims on each freed GPU,
// ordered by reclaim, GPU and start.
//
// On a freed GPU g of reclaim r, the runs that started at or after r.At
// are taken in order of start: each counts if it started within gap of the
// GPU's becoming free (r.At for the first, the end of the runs before for
// the next), before r's time-limit end, and before the next reclaim on g
// (which takes the later starts). A run of the reclaimed job itself ends
// the chain: the GPU went back to it. A run that started before the action
// is no beneficiary, and a reclaim without a time limit has none.
func Handovers(reclaims []Reclaim, runs []Run, now time.Time, gap time.Duration) []Handover {
	byGPU := map[GPU][]*Run{}
	for i := range runs {
		for _, g := range runs[i].GPUs {
			byGPU[g] = append(byGPU[g], &runs[i])
		}
	}
	for _, rs := range byGPU {
		slices.SortFunc(rs, func(a, b *Run) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.JobID, b.JobID)) })
	}
	// The reclaims on each GPU, by time: a later one takes the starts
	// after it.
	reclaimsOn := map[GPU][]*Reclaim{}
	for i := range reclaims {
		for _, g := range reclaims[i].GPUs {
			reclaimsOn[g] = append(reclaimsOn[g], &reclaims[i])
		}
	}
	for _, rs := range reclaimsOn {
		slices.SortFunc(rs, func(a, b *Reclaim) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	}
	var out []Handover
	for i := range reclaims {
		r := &reclaims[i]
		if r.LimitEnd.IsZero() || !r.LimitEnd.After(r.At) {
			continue
		}
		for _, g := range r.GPUs {
			cutoff := r.LimitEnd
			on := reclaimsOn[g]
			if k := slices.Index(on, r); k+1 < len(on) && on[k+1].At.Before(cutoff) {
				cutoff = on[k+1].At
			}
			free := r.At
			from := ActionSecond(r.At)
			for _, s := range byGPU[g] {
				if s.Start.Before(from) {
					continue
				}
				if !s.Start.Before(cutoff) || s.JobID == r.JobID || s.Start.Sub(free) > gap {
					break
				}
				end := s.End
				if end.IsZero() {
					end = now
				}
				until := end
				if r.LimitEnd.Before(until) {
					until = r.LimitEnd
				}
				h := Handover{Reclaim: r.ID, JobID: s.JobID, Tenant: s.Tenant, Account: s.Account, GPU: g,
					Start: s.Start, End: s.End, Until: until, StartGain: r.LimitEnd.Sub(s.Start)}
				if until.After(s.Start) {
					h.Seconds = until.Sub(s.Start).Seconds()
				}
				out = append(out, h)
				if end.After(free) {
					free = end
				}
			}
		}
	}
	return out
}

// ActionSecond is the earliest start a beneficiary of an action at t can
// have: Slurm's start times have whole seconds, and a job the scheduler
// starts on the freed GPUs at once starts in the very second of the
// action, which reads as before it. No other job can have started on
// those GPUs in that second: the reclaimed job held them until the action.
func ActionSecond(t time.Time) time.Time { return t.Truncate(time.Second) }

// Totals sums handovers by the reclaim they came of.
func Totals(hs []Handover) map[int64]float64 {
	out := map[int64]float64{}
	for _, h := range hs {
		out[h.Reclaim] += h.Seconds
	}
	return out
}
