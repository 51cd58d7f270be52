package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// Source samples the node's GPUs: source.NVML on a GPU node, source.Replay
// for demos and tests. It returns one sample per GPU, stamped now.
type Source interface {
	Sample(ctx context.Context, now time.Time) ([]source.Sample, error)
}

// FaultSource reports the GPUs' fault events since its last call:
// source.NVML (Xid critical errors, ECC and DRAM retirement events), or
// source.FaultFile beside a replay (faults injected by hand).
type FaultSource interface {
	Faults(ctx context.Context, now time.Time) ([]source.Fault, error)
}

// Recorder keeps every sample the agent takes, with its job ids, for a later
// replay: a source.Recorder.
type Recorder interface {
	Record(samples []source.Sample) error
}

// Defaults of Config.
const (
	DefaultInterval = 10 * time.Second
	DefaultWindow   = 10 * time.Minute
	// DefaultMaxFaults is how many fault events an agent keeps: far more
	// than a node gives between two reads of the controller.
	DefaultMaxFaults = 256
)

// Config sets up an Agent. Node and Source are required; zero values take
// the defaults described with each field.
type Config struct {
	Node   string // the node's name as Slurm knows it
	Source Source

	Interval time.Duration // between samples; DefaultInterval
	// Window is how far back the windows reach; DefaultWindow. MaxSamples
	// bounds each window's length as well (Window/Interval + 1 by
	// default); the oldest samples go first.
	Window     time.Duration
	MaxSamples int
	// StaleAfter is how old the last good sample may be before /healthz
	// fails and the GPU gauges are withdrawn; 3 × Interval.
	StaleAfter time.Duration

	// Faults reports the GPUs' fault events, read every round; nil uses
	// Source when it is a FaultSource (source.NVML is), else no faults.
	Faults FaultSource
	// MaxFaults bounds the fault events kept (and sent in a whole
	// snapshot), the oldest dropped first; DefaultMaxFaults.
	MaxFaults int

	Procs    ProcReader   // where job ids come from; ProcFS{Root: "/proc"}
	Recorder Recorder     // optional: gets every sample taken
	Logger   *slog.Logger // slog.Default()
	// Secret gives the secret shared with the controller
	// (agent.token_file, a secretfile.File's Get): each snapshot is
	// signed with it (auth.go). nil signs nothing, and the controller
	// refuses the snapshots.
	Secret func() ([]byte, error)
	// Now is the clock; time.Now. The sampling loop's ticker is the time
	// package's, so tests run Run under testing/synctest.
	Now func() time.Time
}

// Agent samples a node's GPUs and keeps their rolling windows. Its methods
// are safe for concurrent use: Run samples while the HTTP handlers read.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	sampling sync.Mutex // one SampleOnce at a time, so windows stay in time order

	mu          sync.Mutex
	windows     map[int]*window // by GPU index
	lastOK      time.Time       // of the last good sample
	lastAttempt time.Time
	lastErr     error     // of the last attempt; nil when it went well
	started     time.Time // of the first good sample: no sample is older
	// instance names this run of the agent in its cursors, so that a
	// cursor of an earlier run (the agent restarted, its windows empty)
	// gets the whole window.
	instance string
	// round counts the good sampling rounds; replaced is the round in
	// which a window was last started over (a GPU replaced), before which
	// no cursor may get an increment.
	round, replaced uint64
	// faults are the fault events reported, oldest first, each with the
	// round it arrived in (for cursors), at most MaxFaults.
	faults []heldFault
	// faultErr is the fault source's last error, logged when it changes.
	faultErr string
}

// heldFault is one fault event and the round that reported it.
type heldFault struct {
	FaultEvent
	round uint64
}

// New checks cfg, fills in its defaults and returns an Agent. Every problem
// with cfg is reported, each with its field's name.
func New(cfg Config) (*Agent, error) {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxSamples == 0 && cfg.Interval > 0 {
		cfg.MaxSamples = int(cfg.Window/cfg.Interval) + 1
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = 3 * cfg.Interval
	}
	if cfg.Procs == nil {
		cfg.Procs = ProcFS{}
	}
	if cfg.Faults == nil {
		if fs, ok := cfg.Source.(FaultSource); ok {
			cfg.Faults = fs
		}
	}
	if cfg.MaxFaults == 0 {
		cfg.MaxFaults = DefaultMaxFaults
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}

	var errs []error
	if cfg.Node == "" {
		errs = append(errs, errors.New("node: empty; give the node's name as Slurm knows it"))
	}
	if cfg.Source == nil {
		errs = append(errs, errors.New("source: none; give an NVML or replay source"))
	}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval: %s is negative", cfg.Interval))
	}
	if cfg.Window < cfg.Interval {
		errs = append(errs, fmt.Errorf("window: %s is shorter than the interval %s", cfg.Window, cfg.Interval))
	}
	if cfg.MaxSamples < 1 {
		errs = append(errs, fmt.Errorf("max_samples: %d; want at least 1", cfg.MaxSamples))
	}
	if cfg.MaxFaults < 1 {
		errs = append(errs, fmt.Errorf("max_faults: %d; want at least 1", cfg.MaxFaults))
	}
	if cfg.StaleAfter < cfg.Interval {
		errs = append(errs, fmt.Errorf("stale_after: %s is shorter than the interval %s, so every sample would be stale", cfg.StaleAfter, cfg.Interval))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("agent config: %w", errors.Join(errs...))
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, windows: map[int]*window{},
		instance: strconv.FormatInt(cfg.Now().UnixNano(), 36)}
	a.metrics = newMetrics(a)
	return a, nil
}

// Registry is the agent's private Prometheus registry, served at /metrics;
// the main adds strata_build_info and the Go and process collectors
// (buildinfo.Register).
func (a *Agent) Registry() *prometheus.Registry { return a.metrics.reg }

// Run samples at once and then every Interval until ctx is done, when it
// returns nil. A failed sample is logged (when the error changes), counted
// and shown by /healthz; the loop goes on. Each round that ends beats the
// daemon's watchdog.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("agent started", "node", a.cfg.Node, "interval", a.cfg.Interval, "window", a.cfg.Window)
	ticker := time.NewTicker(a.cfg.Interval)
	defer ticker.Stop()
	for {
		_ = a.SampleOnce(ctx) // its error is logged and kept for /healthz
		daemon.Beat(ctx)      // a round ended, good or bad: the loop is not stuck
		select {
		case <-ctx.Done():
			a.log.Info("agent stopped", "node", a.cfg.Node)
			return nil
		case <-ticker.C:
		}
	}
}

// SampleOnce takes one sample of every GPU, maps its processes to jobs and
// adds it to the windows. It returns the source's error, which it also
// keeps for /healthz and the snapshot.
func (a *Agent) SampleOnce(ctx context.Context) error {
	a.sampling.Lock()
	defer a.sampling.Unlock()
	// Stamped to the millisecond, as Prometheus stamps its samples: the
	// controller keeps each sample's time in 4 bytes for its window, where
	// a time of nanoseconds takes 8 (decide.Window).
	now := a.cfg.Now().UTC().Truncate(time.Millisecond)
	// Faults first, and whatever the sample gives: a GPU that fell off
	// the bus (Xid 79) fails the sample, and its Xid must still go out.
	faults := a.readFaults(ctx, now)
	samples, err := a.cfg.Source.Sample(ctx, now)
	a.metrics.samples.Inc()
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: not the source's fault
		}
		a.metrics.errors.Inc()
		a.mu.Lock()
		changed := a.lastErr == nil || a.lastErr.Error() != err.Error()
		a.lastErr, a.lastAttempt = err, now
		if len(faults) > 0 {
			// A round of its own, so that cursors give the faults.
			a.round++
			a.keepFaults(faults)
		}
		a.mu.Unlock()
		if changed {
			a.log.Warn("sample failed", "node", a.cfg.Node, "error", err)
		}
		return err
	}

	a.mapJobs(samples)
	if a.cfg.Recorder != nil {
		if err := a.cfg.Recorder.Record(samples); err != nil {
			a.log.Warn("record failed", "node", a.cfg.Node, "error", err)
		}
	}

	a.mu.Lock()
	recovered := a.lastErr != nil
	a.lastErr, a.lastAttempt, a.lastOK = nil, now, now
	if a.started.IsZero() {
		a.started = now
	}
	a.round++
	a.keepFaults(faults)
	for _, s := range samples {
		w := a.windows[s.GPU]
		if w == nil || w.uuid != s.UUID {
			if w != nil {
				a.log.Warn("gpu replaced", "node", a.cfg.Node, "gpu_index", s.GPU, "old_uuid", w.uuid, "uuid", s.UUID)
				a.replaced = a.round
			}
			w = &window{}
			a.windows[s.GPU] = w
		}
		w.add(s, a.round)
	}
	for i, w := range a.windows {
		w.evict(now.Add(-a.cfg.Window), a.cfg.MaxSamples)
		if len(w.points) == 0 {
			delete(a.windows, i)
		}
	}
	a.mu.Unlock()

	a.metrics.last.Set(float64(now.UnixNano()) / 1e9)
	if recovered {
		a.log.Info("sample recovered", "node", a.cfg.Node, "gpus", len(samples))
	}
	return nil
}

// readFaults asks the fault source for what happened since the last
// round; its error is logged when it changes, and the faults it did read
// are kept all the same.
func (a *Agent) readFaults(ctx context.Context, now time.Time) []source.Fault {
	if a.cfg.Faults == nil {
		return nil
	}
	faults, err := a.cfg.Faults.Faults(ctx, now)
	msg := ""
	if err != nil && ctx.Err() == nil {
		msg = err.Error()
	}
	a.mu.Lock()
	changed := msg != a.faultErr
	a.faultErr = msg
	a.mu.Unlock()
	if changed && msg != "" {
		a.log.Warn("reading GPU faults failed", "node", a.cfg.Node, "error", msg)
	}
	for _, f := range faults {
		a.log.Error("GPU fault", "node", a.cfg.Node, "gpu_index", f.GPU, "uuid", f.UUID, "kind", string(f.Kind), "code", f.Code)
		a.metrics.faults.WithLabelValues(string(f.Kind), strconv.Itoa(f.Code)).Inc()
	}
	return faults
}

// keepFaults adds the faults of the current round, dropping the oldest
// beyond MaxFaults. a.mu is held.
func (a *Agent) keepFaults(faults []source.Fault) {
	for _, f := range faults {
		a.faults = append(a.faults, heldFault{FaultEvent: FaultEvent{At: f.At.UTC(), GPU: f.GPU, UUID: f.UUID, Kind: string(f.Kind),
			Code: f.Code}, round: a.round})
	}
	if n := len(a.faults) - a.cfg.MaxFaults; n > 0 {
		a.faults = slices.Delete(a.faults, 0, n)
	}
}

// mapJobs adds to each sample (and MIG instance) the jobs of its processes.
func (a *Agent) mapJobs(samples []source.Sample) {
	cache := map[int]int64{} // pid -> job; 0: none
	r := jobResolver{p: a.cfg.Procs}
	jobs := func(pids []int, known []int64) ([]int64, int) {
		out := slices.Clone(known)
		unattributed := 0
		for _, pid := range pids {
			id, ok := cache[pid]
			if !ok {
				id, _ = r.jobOf(pid)
				cache[pid] = id
			}
			if id != 0 {
				out = append(out, id)
			} else {
				unattributed++
			}
		}
		slices.Sort(out)
		return slices.Compact(out), unattributed
	}
	for i := range samples {
		s := &samples[i]
		s.JobIDs, s.Unattributed = jobs(s.PIDs, s.JobIDs)
		for k := range s.MIGInstances {
			m := &s.MIGInstances[k]
			m.JobIDs, _ = jobs(m.PIDs, m.JobIDs)
		}
	}
	for pid, id := range cache {
		if id == 0 {
			a.log.Debug("gpu process without a job", "node", a.cfg.Node, "pid", pid)
		}
	}
}

// Snapshot returns the windows as the controller reads them, oldest sample
// first; samples older than Window are left out even when sampling has
// stopped. The result is the caller's to keep.
func (a *Agent) Snapshot() Snapshot { return a.SnapshotAfter("") }

// SnapshotAfter is Snapshot holding only the samples taken after the
// snapshot whose Cursor is after: what a reader that keeps the windows
// itself needs. A cursor that is empty, of another run of the agent, from
// before a GPU's window started over, or unknown, gets the whole window
// (Full is set).
func (a *Agent) SnapshotAfter(after string) Snapshot {
	now := a.cfg.Now().UTC()
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Snapshot{
		Node:            a.cfg.Node,
		TakenAt:         now,
		IntervalSeconds: a.cfg.Interval.Seconds(),
		WindowSeconds:   a.cfg.Window.Seconds(),
		SourceOK:        a.lastErr == nil && !a.lastOK.IsZero(),
		GPUs:            []GPUWindow{},
		Faults:          []FaultEvent{},
		Version:         SnapshotVersion,
		Cursor:          a.instance + "." + strconv.FormatUint(a.round, 10),
		MaxSamples:      a.cfg.MaxSamples,
		Full:            true,
	}
	from := uint64(0) // the samples of rounds after from
	if inst, r, ok := strings.Cut(after, "."); ok && inst == a.instance {
		if n, err := strconv.ParseUint(r, 10, 64); err == nil && n >= a.replaced && n <= a.round {
			from, s.Full, s.After = n, false, after
		}
	}
	if a.lastErr != nil {
		s.LastError = a.lastErr.Error()
	}
	if !a.lastOK.IsZero() {
		t := a.lastOK
		s.LastSampleAt = &t
	}
	if !a.started.IsZero() {
		t := a.started
		s.StartedAt = &t
	}
	for _, f := range a.faults {
		if f.round > from {
			s.Faults = append(s.Faults, f.FaultEvent)
		}
	}
	oldest := now.Add(-a.cfg.Window)
	for _, i := range slices.Sorted(maps.Keys(a.windows)) {
		w := a.windows[i]
		g := GPUWindow{Index: i, UUID: w.uuid, Model: w.model, MemTotalMiB: w.memTotalMiB, MIG: w.mig, Samples: []Point{}}
		// Rounds only grow along a window: the samples after from are a
		// tail, found without reading the rest.
		k := sort.Search(len(w.rounds), func(k int) bool { return w.rounds[k] > from })
		for _, p := range w.points[k:] {
			if p.At.Before(oldest) {
				continue
			}
			g.Samples = append(g.Samples, p.clone())
		}
		s.GPUs = append(s.GPUs, g)
	}
	return s
}

// health says whether the agent's data can be trusted, and why not.
func (a *Agent) health() (bool, string) {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.lastErr != nil:
		return false, fmt.Sprintf("sampling failed at %s: %v", a.lastAttempt.UTC().Format(time.RFC3339), a.lastErr)
	case a.lastOK.IsZero():
		return false, "no sample yet"
	case now.Sub(a.lastOK) > a.cfg.StaleAfter:
		return false, fmt.Sprintf("stale: the last sample, at %s, is %s old (stale after %s); is the sampling loop stuck?",
			a.lastOK.UTC().Format(time.RFC3339), now.Sub(a.lastOK).Round(time.Second), a.cfg.StaleAfter)
	}
	return true, fmt.Sprintf("ok: %d GPUs sampled at %s", len(a.windows), a.lastOK.UTC().Format(time.RFC3339))
}
