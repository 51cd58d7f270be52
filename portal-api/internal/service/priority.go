package service

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
)

// PriorityWeights are a cluster's slurm.conf settings of the
// priority/multifactor plugin. slurmrestd gives each job's priority but
// neither the plugin's weights nor sprio's factors, so the portal is told
// the weights and works the factors out as the plugin does, from what the
// snapshot holds: the job's accrue time, QOS, partition, size, TRES and
// nice value, the QOS and partition records, and the fair-share tree.
type PriorityWeights struct {
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

// priorityFactors are a job's weighted factors, as `sprio -l` shows them.
type priorityFactors struct {
	// byName holds age, assoc, fairshare, job_size, partition, qos.
	byName map[string]float64
	tres   map[string]float64
	nice   float64
	// consistent: they add up to the job's priority, rounded down as
	// slurmctld rounds it; else unexplained is what they leave out.
	consistent  bool
	unexplained int64
}

func (f priorityFactors) get(name string) float64 {
	if k, ok := strings.CutPrefix(name, "tres:"); ok {
		return f.tres[k]
	}
	return f.byName[name]
}

// sum is the factors' total, as slurmctld adds them.
func (f priorityFactors) sum() float64 {
	s := -f.nice
	for _, n := range factorNames {
		s += f.byName[n]
	}
	for _, v := range f.tres {
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

// firstPartition is the partition a job is queued in first: Slurm lists
// a job submitted to several as "a,b".
func firstPartition(j *slurmrest.Job) string {
	p, _, _ := strings.Cut(j.Partition, ",")
	return p
}

// ageAt is the job's age factor at t, unweighted.
func (w *PriorityWeights) ageAt(j *slurmrest.Job, t time.Time) float64 {
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
func (w *PriorityWeights) factors(j *slurmrest.Job, in *priorityInput) priorityFactors {
	f := priorityFactors{byName: map[string]float64{}, tres: map[string]float64{}, nice: float64(j.Nice)}
	user := [2]string{j.Account, j.User}
	part := firstPartition(j)
	if w.Fairshare != 0 {
		f.byName["fairshare"] = w.Fairshare * in.fairshare[user]
	}
	if w.Assoc != 0 {
		f.byName["assoc"] = w.Assoc * in.assoc[user]
	}
	if w.QOS != 0 {
		f.byName["qos"] = w.QOS * in.qos[j.QOS]
	}
	if w.Partition != 0 {
		f.byName["partition"] = w.Partition * in.partFactor[part]
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
		f.byName["job_size"] = w.JobSize * min(1, max(0, js))
	}
	tres := j.TRESAlloc
	if len(tres) == 0 {
		tres = j.TRESReq
	}
	for key, weight := range w.TRES {
		have, _ := tres.Get(key)
		total, _ := in.partTRES[part].Get(key)
		if have > 0 && total > 0 && weight != 0 {
			f.tres[key] = weight * float64(have) / float64(total)
		}
	}
	others := f.sum()
	now := w.Age * w.ageAt(j, in.at)
	early := w.Age * w.ageAt(j, in.at.Add(-cmp.Or(w.CalcPeriod, 5*time.Minute)-time.Minute))
	p := float64(j.Priority)
	switch rest := p - others; {
	case j.Priority == 1 && others+now < 1:
		// slurmctld raises a priority below 1 to 1 (0 is held).
		f.byName["age"], f.consistent = now, true
	case rest <= now && rest+1 > early:
		// The ages within the window that give others+age in [p, p+1):
		// the middle of them, which is off the one slurmctld computed by
		// half a point at most.
		lo, hi := max(early, rest), min(now, rest+1)
		f.byName["age"], f.consistent = (lo+hi)/2, true
	default:
		f.byName["age"] = now
		f.unexplained = j.Priority - int64(math.Floor(others+now))
	}
	if w.Age == 0 {
		delete(f.byName, "age")
	}
	return f
}

// queuePlace is a pending job's place in its partition's queue.
type queuePlace struct {
	partition string
	// position is 1 for the job slurmctld considers first; 0 for a held
	// job, which is in no order.
	position int
	ahead    []int // indexes into the snapshot's jobs
	factors  *priorityFactors
}

// queueOrder is the pending jobs of one snapshot in the order slurmctld
// considers them, partition by partition, with their factors.
type queueOrder struct {
	snap   *cluster.Snapshot
	places map[int]*queuePlace // by index into snap.Jobs
	byJob  map[*slurmrest.Job]*queuePlace
}

// queues caches each cluster's queue order for its snapshot now.
type queues struct {
	mu sync.Mutex
	m  map[string]*atomic.Pointer[queueOrder]
}

func (q *queues) of(name string, snap *cluster.Snapshot, w *PriorityWeights) *queueOrder {
	q.mu.Lock()
	if q.m == nil {
		q.m = map[string]*atomic.Pointer[queueOrder]{}
	}
	p, ok := q.m[name]
	if !ok {
		p = &atomic.Pointer[queueOrder]{}
		q.m[name] = p
	}
	q.mu.Unlock()
	if o := p.Load(); o != nil && o.snap == snap {
		return o
	}
	o := orderQueue(snap, w)
	p.Store(o)
	return o
}

// orderQueue sorts each partition's pending jobs as slurmctld's
// scheduler does within a partition: by priority, then submission, then
// ID. (Across partitions it goes by their PriorityTier first; a job
// queued in several is placed in the first it lists.)
func orderQueue(snap *cluster.Snapshot, w *PriorityWeights) *queueOrder {
	o := &queueOrder{snap: snap, places: map[int]*queuePlace{}, byJob: map[*slurmrest.Job]*queuePlace{}}
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
		pl := &queuePlace{partition: firstPartition(j)}
		o.places[i], o.byJob[j] = pl, pl
		if j.Priority == 0 || j.Held {
			continue
		}
		if w != nil && j.Priority > 0 {
			f := w.factors(j, &in)
			pl.factors = &f
		}
		byPart[pl.partition] = append(byPart[pl.partition], i)
	}
	for _, idx := range byPart {
		slices.SortFunc(idx, func(a, b int) int {
			x, y := &snap.Jobs[a], &snap.Jobs[b]
			return cmp.Or(cmp.Compare(y.Priority, x.Priority),
				x.SubmitTime.Compare(y.SubmitTime), cmp.Compare(x.ID, y.ID))
		})
		for k, i := range idx {
			pl := o.places[i]
			pl.position, pl.ahead = k+1, idx[:k:k]
		}
	}
	return o
}

// holdingBack is the factor that keeps a job behind the jobs ahead of it:
// the one in which the job falls furthest below their mean, with that
// gap in priority points. The mean, not any one job, so that no other
// tenant's job is shown.
func (o *queueOrder) holdingBack(pl *queuePlace) (string, float64, bool) {
	if pl.factors == nil || len(pl.ahead) == 0 {
		return "", 0, false
	}
	names := slices.Clone(factorNames)
	keys := map[string]bool{}
	for _, i := range pl.ahead {
		if a := o.places[i].factors; a != nil {
			for k := range a.tres {
				keys[k] = true
			}
		}
	}
	for k := range pl.factors.tres {
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
		for _, i := range pl.ahead {
			if a := o.places[i].factors; a != nil {
				sum += a.get(n)
				count++
			}
		}
		if count == 0 {
			continue
		}
		if g := sum/float64(count) - pl.factors.get(n); g > gap+1e-9 {
			best, gap = n, g
		}
	}
	return best, gap, best != ""
}

// maxAheadJobs bounds the readable jobs ahead that a queued job lists.
const maxAheadJobs = 20

// jobPlaces are the queue places of the jobs the caller may read, by the
// job's record in its snapshot, with which records they may read.
type jobPlaces struct {
	place    map[*slurmrest.Job]*queuePlace
	order    map[*slurmrest.Job]*queueOrder
	readable map[*slurmrest.Job]bool
}

// places finds the queue place of each pending job among views.
func (s *Server) places(views []view) jobPlaces {
	jp := jobPlaces{place: map[*slurmrest.Job]*queuePlace{}, order: map[*slurmrest.Job]*queueOrder{}, readable: map[*slurmrest.Job]bool{}}
	orders := map[string]*queueOrder{}
	for _, v := range views {
		jp.readable[v.job] = true
		if !v.job.State.Has("PENDING") {
			continue
		}
		o, ok := orders[v.cluster]
		if !ok {
			c := s.byName[v.cluster]
			if snap := c.Poller.Snapshot(); snap != nil {
				o = s.queues.of(v.cluster, snap, c.Priority)
			}
			orders[v.cluster] = o
		}
		if o == nil {
			continue
		}
		// The view's record is in the index's snapshot, which shares its
		// jobs with the poller's as long as no job changed; a poll in
		// between leaves the job without a place this once.
		if pl := o.byJob[v.job]; pl != nil {
			jp.place[v.job], jp.order[v.job] = pl, o
		}
	}
	return jp
}

// queueJob is a pending job of GET /v1/queue, with its place in its
// partition's queue and its priority factors.
func (s *Server) queueJob(v view, reason string, jp jobPlaces) api.QueueJob {
	j := v.job
	out := api.QueueJob{Id: j.ID, User: j.User, Reason: reason, Class: ptr(v.class),
		SubmitTime: nonZeroTime(j.SubmitTime), EligibleTime: nonZeroTime(j.EligibleTime),
		Partition: ptr(firstPartition(j))}
	if j.Priority >= 0 {
		out.Priority = ptr(j.Priority)
	}
	pl, o := jp.place[j], jp.order[j]
	if pl == nil || pl.position == 0 {
		return out
	}
	out.Position, out.Ahead = ptr(pl.position), ptr(len(pl.ahead))
	ahead := []int64{}
	for _, i := range pl.ahead {
		if a := &o.snap.Jobs[i]; jp.readable[a] && len(ahead) < maxAheadJobs {
			ahead = append(ahead, a.ID)
		}
	}
	out.AheadJobs = &ahead
	if f := pl.factors; f != nil {
		af := api.PriorityFactors{Consistent: f.consistent, Nice: ptr(f.nice)}
		for name, dst := range map[string]**float64{"age": &af.Age, "assoc": &af.Assoc, "fairshare": &af.Fairshare,
			"job_size": &af.JobSize, "partition": &af.Partition, "qos": &af.Qos} {
			if x, ok := f.byName[name]; ok {
				*dst = ptr(round2(x))
			}
		}
		tres := map[string]float64{}
		for k, x := range f.tres {
			tres[k] = round2(x)
		}
		af.Tres = &tres
		if !f.consistent {
			af.Unexplained = ptr(f.unexplained)
		}
		out.Factors = &af
		if name, gap, ok := o.holdingBack(pl); ok {
			out.HoldingBack = &struct {
				Factor string  `json:"factor"`
				Gap    float64 `json:"gap"`
			}{name, round2(gap)}
		}
	}
	return out
}

// round2 rounds to two decimals: more than sprio shows, less than noise.
func round2(x float64) float64 { return math.Round(x*100) / 100 }
