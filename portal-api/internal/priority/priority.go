// Package priority works out the place of a pending job in its
// partition's queue and the factors of its priority, as Slurm's
// priority/multifactor plugin does: slurmrestd gives each job's priority
// but neither the plugin's weights nor sprio's factors, so the portal is
// told the weights and works the factors out from what a snapshot holds.
// It is pure: a snapshot and the weights in, the order out.
package priority

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
)

// Weights are a cluster's slurm.conf settings of the
// priority/multifactor plugin. slurmrestd gives each job's priority but
// neither the plugin's weights nor sprio's factors, so the portal is told
// the weights and works the factors out as the plugin does, from what the
// snapshot holds: the job's accrue time, QOS, partition, size, TRES and
// nice value, the QOS and partition records, and the fair-share tree.
type Weights struct {
	Age, Assoc, Fairshare, JobSize, Partition, QOS float64
	// TRES are PriorityWeightTRES by TRES key in lower case ("cpu",
	// "mem", "gres/gpu").
	TRES map[string]float64
	// MaxAge is PriorityMaxAge (0: Slurm's 7 days).
	MaxAge time.Duration
	// CalcPeriod is PriorityCalcPeriod (0: Slurm's 5 minutes): how old
	// the age factor of a job's priority may be.
	CalcPeriod time.Duration
	// FavorSmall is PriorityFavorSmall.
	FavorSmall bool
}

// factorNames are the factors in the order the API lists them.
var factorNames = []string{"age", "assoc", "fairshare", "job_size", "partition", "qos"}

// Factors are a job's weighted factors, as `sprio -l` shows them.
type Factors struct {
	// ByName holds age, assoc, fairshare, job_size, partition, qos.
	ByName map[string]float64
	// TRES holds the TRES factors by TRES key ("gres/gpu").
	TRES map[string]float64
	Nice float64
	// Consistent: they add up to the job's priority, rounded down as
	// slurmctld rounds it; else Unexplained is what they leave out.
	Consistent  bool
	Unexplained int64
}

func (f Factors) get(name string) float64 {
	if k, ok := strings.CutPrefix(name, "tres:"); ok {
		return f.TRES[k]
	}
	return f.ByName[name]
}

// Sum is the factors' total, as slurmctld adds them.
func (f Factors) Sum() float64 {
	s := -f.Nice
	for _, n := range factorNames {
		s += f.ByName[n]
	}
	for _, v := range f.TRES {
		s += v
	}
	return s
}

// priorityInput is what the factors of a snapshot's jobs are made of,
// looked up once per snapshot.
type priorityInput struct {
	at          time.Time
	qos         map[string]float64 // QOS priority over the largest
	partFactor  map[string]float64 // PriorityJobFactor over the largest
	partTRES    map[string]slurmrest.TRESList
	fairshare   map[[2]string]float64 // (account, user)
	assoc       map[[2]string]float64 // association priority over the largest
	nodes, cpus int
}

func newPriorityInput(snap *cluster.Snapshot) priorityInput {
	in := priorityInput{at: snap.At, qos: map[string]float64{}, partFactor: map[string]float64{},
		partTRES: map[string]slurmrest.TRESList{}, fairshare: map[[2]string]float64{}, assoc: map[[2]string]float64{}}
	var maxQOS, maxPart, maxAssoc float64
	for _, q := range snap.QOS {
		if q.Priority != nil {
			maxQOS = max(maxQOS, float64(*q.Priority))
		}
	}
	for _, q := range snap.QOS {
		if q.Priority != nil && maxQOS > 0 {
			in.qos[q.Name] = float64(*q.Priority) / maxQOS
		}
	}
	for _, p := range snap.Partitions {
		maxPart = max(maxPart, float64(p.PriorityJobFactor))
	}
	for _, p := range snap.Partitions {
		if maxPart > 0 {
			in.partFactor[p.Name] = float64(p.PriorityJobFactor) / maxPart
		}
		in.partTRES[p.Name] = p.TRES
	}
	for _, s := range snap.Shares {
		if s.User != "" {
			in.fairshare[[2]string{s.Account, s.User}] = s.FairShareFactor
		}
	}
	for _, a := range snap.Associations {
		if a.Priority != nil {
			maxAssoc = max(maxAssoc, float64(*a.Priority))
		}
	}
	for _, a := range snap.Associations {
		if a.User != "" && a.Partition == "" && a.Priority != nil && maxAssoc > 0 {
			in.assoc[[2]string{a.Account, a.User}] = float64(*a.Priority) / maxAssoc
		}
	}
	in.nodes = len(snap.Nodes)
	for _, n := range snap.Nodes {
		in.cpus += n.CPUs
	}
	return in
}

// FirstPartition is the partition a job is queued in first: Slurm lists
// a job submitted to several as "a,b".
func FirstPartition(j *slurmrest.Job) string {
	p, _, _ := strings.Cut(j.Partition, ",")
	return p
}

// ageAt is the job's age factor at t, unweighted.
func (w *Weights) ageAt(j *slurmrest.Job, t time.Time) float64 {
	if j.AccrueTime.IsZero() || !t.After(j.AccrueTime) {
		return 0
	}
	maxAge := cmp.Or(w.MaxAge, 7*24*time.Hour)
	return min(1, float64(t.Sub(j.AccrueTime)/time.Second)/float64(maxAge/time.Second))
}

// factors works out a pending job's weighted factors as the plugin does
// (its set_priority_factors). All but the age factor depend only on what
// the snapshot holds; the age factor grows with time and slurmctld
// computed it at its last pass, up to CalcPeriod before the snapshot was
// read. So the age shown is one that, within that window, makes the
// factors add up to the priority Slurm reports (the priority, a whole
// number, leaves it known to within a point); when none does, the
// factors are shown at the snapshot's time with what they leave
// unexplained (the weights differ from slurm.conf's, or an admin set the
// job's priority).
func (w *Weights) factors(j *slurmrest.Job, in *priorityInput) Factors {
	f := Factors{ByName: map[string]float64{}, TRES: map[string]float64{}, Nice: float64(j.Nice)}
	user := [2]string{j.Account, j.User}
	part := FirstPartition(j)
	if w.Fairshare != 0 {
		f.ByName["fairshare"] = w.Fairshare * in.fairshare[user]
	}
	if w.Assoc != 0 {
		f.ByName["assoc"] = w.Assoc * in.assoc[user]
	}
	if w.QOS != 0 {
		f.ByName["qos"] = w.QOS * in.qos[j.QOS]
	}
	if w.Partition != 0 {
		f.ByName["partition"] = w.Partition * in.partFactor[part]
	}
	if w.JobSize != 0 && in.nodes > 0 && in.cpus > 0 {
		nodes := float64(max(j.NodeCount, 1))
		cpus := float64(j.CPUs)
		var js float64
		if w.FavorSmall {
			js = (float64(in.nodes) - nodes) / float64(in.nodes)
			if cpus > 0 {
				js = (js + (float64(in.cpus)-cpus)/float64(in.cpus)) / 2
			}
		} else {
			js = nodes / float64(in.nodes)
			if cpus > 0 {
				js = (js + cpus/float64(in.cpus)) / 2
			}
		}
		f.ByName["job_size"] = w.JobSize * min(1, max(0, js))
	}
	tres := j.TRESAlloc
	if len(tres) == 0 {
		tres = j.TRESReq
	}
	for key, weight := range w.TRES {
		have, _ := tres.Get(key)
		total, _ := in.partTRES[part].Get(key)
		if have > 0 && total > 0 && weight != 0 {
			f.TRES[key] = weight * float64(have) / float64(total)
		}
	}
	others := f.Sum()
	now := w.Age * w.ageAt(j, in.at)
	early := w.Age * w.ageAt(j, in.at.Add(-cmp.Or(w.CalcPeriod, 5*time.Minute)-time.Minute))
	p := float64(j.Priority)
	switch rest := p - others; {
	case j.Priority == 1 && others+now < 1:
		// slurmctld raises a priority below 1 to 1 (0 is held).
		f.ByName["age"], f.Consistent = now, true
	case rest <= now && rest+1 > early:
		// The ages within the window that give others+age in [p, p+1):
		// the middle of them, which is off the one slurmctld computed by
		// half a point at most.
		lo, hi := max(early, rest), min(now, rest+1)
		f.ByName["age"], f.Consistent = (lo+hi)/2, true
	default:
		f.ByName["age"] = now
		f.Unexplained = j.Priority - int64(math.Floor(others+now))
	}
	if w.Age == 0 {
		delete(f.ByName, "age")
	}
	return f
}

// Place is a pending job's place in its partition's queue.
type Place struct {
	Partition string
	// Position is 1 for the job slurmctld considers first; 0 for a held
	// job, which is in no order.
	Position int
	Ahead    []int // indexes into the snapshot's jobs
	// Factors are nil without the cluster's weights.
	Factors *Factors
}

// Queue is the pending jobs of one snapshot in the order slurmctld
// considers them, partition by partition, with their factors.
type Queue struct {
	Snap   *cluster.Snapshot
	Places map[int]*Place // by index into Snap.Jobs
	ByJob  map[*slurmrest.Job]*Place
}

// Cache keeps each cluster's queue order for its snapshot now: ordered once
// per snapshot, however many requests read it.
type Cache struct {
	mu sync.Mutex
	m  map[string]*atomic.Pointer[Queue]
}

// Of is the order of the cluster name's snapshot, ordered at its first
// reading.
func (q *Cache) Of(name string, snap *cluster.Snapshot, w *Weights) *Queue {
	q.mu.Lock()
	if q.m == nil {
		q.m = map[string]*atomic.Pointer[Queue]{}
	}
	p, ok := q.m[name]
	if !ok {
		p = &atomic.Pointer[Queue]{}
		q.m[name] = p
	}
	q.mu.Unlock()
	if o := p.Load(); o != nil && o.Snap == snap {
		return o
	}
	o := OrderQueue(snap, w)
	p.Store(o)
	return o
}

// OrderQueue sorts each partition's pending jobs as slurmctld's
// scheduler does within a partition: by priority, then submission, then
// ID. (Across partitions it goes by their PriorityTier first; a job
// queued in several is placed in the first it lists.)
func OrderQueue(snap *cluster.Snapshot, w *Weights) *Queue {
	o := &Queue{Snap: snap, Places: map[int]*Place{}, ByJob: map[*slurmrest.Job]*Place{}}
	var in priorityInput
	if w != nil {
		in = newPriorityInput(snap)
	}
	byPart := map[string][]int{}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if !j.State.Has("PENDING") {
			continue
		}
		pl := &Place{Partition: FirstPartition(j)}
		o.Places[i], o.ByJob[j] = pl, pl
		if j.Priority == 0 || j.Held {
			continue
		}
		if w != nil && j.Priority > 0 {
			f := w.factors(j, &in)
			pl.Factors = &f
		}
		byPart[pl.Partition] = append(byPart[pl.Partition], i)
	}
	for _, idx := range byPart {
		slices.SortFunc(idx, func(a, b int) int {
			x, y := &snap.Jobs[a], &snap.Jobs[b]
			return cmp.Or(cmp.Compare(y.Priority, x.Priority),
				x.SubmitTime.Compare(y.SubmitTime), cmp.Compare(x.ID, y.ID))
		})
		for k, i := range idx {
			pl := o.Places[i]
			pl.Position, pl.Ahead = k+1, idx[:k:k]
		}
	}
	return o
}

// HoldingBack is the factor that keeps a job behind the jobs ahead of it:
// the one in which the job falls furthest below their mean, with that
// gap in priority points. The mean, not any one job, so that no other
// tenant's job is shown.
func (o *Queue) HoldingBack(pl *Place) (string, float64, bool) {
	if pl.Factors == nil || len(pl.Ahead) == 0 {
		return "", 0, false
	}
	names := slices.Clone(factorNames)
	keys := map[string]bool{}
	for _, i := range pl.Ahead {
		if a := o.Places[i].Factors; a != nil {
			for k := range a.TRES {
				keys[k] = true
			}
		}
	}
	for k := range pl.Factors.TRES {
		keys[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		names = append(names, "tres:"+k)
	}
	best, gap := "", 0.0
	for _, n := range names {
		var sum float64
		var count int
		for _, i := range pl.Ahead {
			if a := o.Places[i].Factors; a != nil {
				sum += a.get(n)
				count++
			}
		}
		if count == 0 {
			continue
		}
		if g := sum/float64(count) - pl.Factors.get(n); g > gap+1e-9 {
			best, gap = n, g
		}
	}
	return best, gap, best != ""
}
