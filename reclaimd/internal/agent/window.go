package agent

import (
	"slices"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// window is one GPU's recent samples, oldest first.
type window struct {
	uuid, model string
	memTotalMiB float64
	mig         bool
	points      []Point
	// rounds holds, for each point, the sampling round that took it (see
	// Agent.round), so that a snapshot can hold only what came after a
	// reader's cursor.
	rounds []uint64
}

// add appends s, taken in sampling round round, whose job ids are
// already mapped; the GPU's description follows its latest sample.
func (w *window) add(s source.Sample, round uint64) {
	w.uuid, w.model, w.memTotalMiB, w.mig = s.UUID, s.Model, s.MemTotalMiB, s.MIG
	p := Point{
		At:          s.At.UTC(),
		Util:        s.UtilPercent,
		MemActivity: s.MemActivityPercent,
		SMActive:    s.SMActivePercent,
		MemUsedMiB:  s.MemUsedMiB,
		PCIeRxKBs:   s.PCIeRxKBs,
		PCIeTxKBs:   s.PCIeTxKBs,
		NVLinkRxKBs: s.NVLinkRxKBs,
		NVLinkTxKBs: s.NVLinkTxKBs,
		Processes:   len(s.PIDs),
		JobIDs:      nonNil(s.JobIDs),

		Unattributed: s.Unattributed,
	}
	for _, m := range s.MIGInstances {
		p.MIGInstances = append(p.MIGInstances, MIGPoint{
			GPUInstance: m.GPUInstance, ComputeInstance: m.ComputeInstance, UUID: m.UUID,
			Util: m.UtilPercent, MemActivity: m.MemActivityPercent,
			MemUsedMiB: m.MemUsedMiB, MemTotalMiB: m.MemTotalMiB,
			Processes: len(m.PIDs), JobIDs: nonNil(m.JobIDs),
		})
	}
	w.points = append(w.points, p.clone())
	w.rounds = append(w.rounds, round)
}

// evict drops the samples taken before oldest, then the oldest ones beyond
// limit.
func (w *window) evict(oldest time.Time, limit int) {
	drop := 0
	for drop < len(w.points) && w.points[drop].At.Before(oldest) {
		drop++
	}
	drop = max(drop, len(w.points)-limit)
	if drop > 0 {
		w.points = slices.Delete(w.points, 0, drop)
		w.rounds = slices.Delete(w.rounds, 0, drop)
	}
}

// latest returns the newest sample; false when there is none.
func (w *window) latest() (Point, bool) {
	if len(w.points) == 0 {
		return Point{}, false
	}
	return w.points[len(w.points)-1], true
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}
