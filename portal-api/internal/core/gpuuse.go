package core

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/dcgmprom"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
)

// Prometheus is a cluster's Prometheus that scrapes dcgm-exporter on its
// GPU nodes, as reclaimd's Prometheus source reads it: the utilisation
// metric with the Slurm node and the GPU index (Slurm's, as gres.conf
// numbers the GPUs) in labels. It is asked through the product's one
// client (internal/dcgmprom), and an allocated GPU is idle by the
// product's one definition (dcgmprom.IdleUtil).
type Prometheus struct {
	// URL is Prometheus's base URL ("http://prometheus:9090").
	URL string
	// NodeLabel names the node (default "Hostname", dcgm-exporter's).
	NodeLabel string
	// GPULabel holds the GPU index (default "gpu").
	GPULabel string
	// UtilMetric is the utilisation in percent (default DCGM_FI_DEV_GPU_UTIL).
	UtilMetric string
	// Step is the finest step of a job's history: at least the scrape
	// interval (default 30s).
	Step time.Duration
	// Window is how far back the utilisation "now" looks (default 5m).
	Window time.Duration
	// IdleBelow is the utilisation, in percent, at or below which an
	// allocated GPU counts as idle (default 5), as reclaimd judges a
	// rule's max_util_percent.
	IdleBelow float64
}

// Bounds of what a GPU history asks of Prometheus.
const (
	maxGPUPoints    = 300
	maxGPUSeries    = 64
	maxPromBytes    = 16 << 20
	promTimeout     = 10 * time.Second
	maxIdleGPUs     = 100
	gpuNowCacheTime = 15 * time.Second
)

func (p *Prometheus) nodeLabel() string  { return cmp.Or(p.NodeLabel, dcgmprom.NodeLabel) }
func (p *Prometheus) gpuLabel() string   { return cmp.Or(p.GPULabel, dcgmprom.GPULabel) }
func (p *Prometheus) utilMetric() string { return cmp.Or(p.UtilMetric, dcgmprom.UtilMetric) }
func (p *Prometheus) step() time.Duration {
	return cmp.Or(p.Step, 30*time.Second)
}
func (p *Prometheus) window() time.Duration { return cmp.Or(p.Window, 5*time.Minute) }
func (p *Prometheus) idleBelow() float64 {
	if p.IdleBelow > 0 {
		return p.IdleBelow
	}
	return 5
}

// promDuration writes d as PromQL does, in whole seconds (at least 1).
func promDuration(d time.Duration) string { return dcgmprom.Duration(d) }

// gpuQuery is the PromQL of the utilisation of these GPUs, each the
// mean over rng before each step, one series per GPU (dcgm-exporter may
// give a GPU several, such as one per pod label); mean asks for the mean
// of the GPUs alone. With nil gpus it asks for every GPU.
func (p *Prometheus) gpuQuery(gpus []slurmrest.GPU, rng time.Duration, mean bool) string {
	byNode := map[string][]string{}
	for _, g := range gpus {
		byNode[g.Node] = append(byNode[g.Node], strconv.Itoa(g.Index))
	}
	var parts []string
	if gpus == nil {
		parts = append(parts, fmt.Sprintf("avg_over_time(%s[%s])", p.utilMetric(), promDuration(rng)))
	}
	for _, node := range slices.Sorted(func(yield func(string) bool) {
		for n := range byNode {
			if !yield(n) {
				return
			}
		}
	}) {
		idx := byNode[node]
		slices.Sort(idx)
		parts = append(parts, fmt.Sprintf("avg_over_time(%s{%s=%s,%s=~%s}[%s])", p.utilMetric(),
			p.nodeLabel(), strconv.Quote(node), p.gpuLabel(), strconv.Quote(strings.Join(slices.Compact(idx), "|")), promDuration(rng)))
	}
	q := fmt.Sprintf("max by (%s, %s) (%s)", p.nodeLabel(), p.gpuLabel(), strings.Join(parts, " or "))
	if mean {
		q = "avg(" + q + ")"
	}
	return q
}

// promSeries is one series of a Prometheus answer.
type promSeries struct {
	labels map[string]string
	points []api.GpuPoint
}

// parsePromAnswer reads a Prometheus query or query_range answer: a
// vector (one point a series) or a matrix.
func parsePromAnswer(body []byte) ([]promSeries, error) {
	series, err := dcgmprom.ParseAnswer(body)
	if err != nil {
		return nil, err
	}
	return seriesOf(series), nil
}

func seriesOf(series []dcgmprom.Series) []promSeries {
	out := make([]promSeries, 0, len(series))
	for _, ds := range series {
		ps := promSeries{labels: ds.Labels}
		for _, pt := range ds.Points {
			ps.points = append(ps.points, api.GpuPoint{Time: pt.Time, Util: pt.Value})
		}
		out = append(out, ps)
	}
	return out
}

// ask sends one query (query_range when step > 0) through the product's
// one Prometheus client, bounded in time and size.
func (s *Core) ask(ctx context.Context, p *Prometheus, q string, start, end time.Time, step time.Duration) ([]promSeries, error) {
	ctx, cancel := context.WithTimeout(ctx, promTimeout)
	defer cancel()
	cl := dcgmprom.Client{URL: p.URL, HTTP: s.cfg.HTTPClient, MaxBytes: maxPromBytes}
	var series []dcgmprom.Series
	var err error
	if step > 0 {
		series, err = cl.QueryRange(ctx, q, start, end, step)
	} else {
		series, err = cl.Query(ctx, q, end)
	}
	if err != nil {
		return nil, err
	}
	return seriesOf(series), nil
}

// gpuOf reads the GPU a series is of; ok is false for a series without
// the node or a numeric GPU label.
func (p *Prometheus) gpuOf(labels map[string]string) (slurmrest.GPU, bool) {
	node := labels[p.nodeLabel()]
	idx, err := strconv.Atoi(labels[p.gpuLabel()])
	return slurmrest.GPU{Node: node, Index: idx}, node != "" && err == nil
}

// historyStep is the step of a job's history over d: at most
// maxGPUPoints steps, in whole seconds, no finer than min.
func historyStep(d, minStep time.Duration) time.Duration {
	step := (d + maxGPUPoints - 1) / maxGPUPoints
	step = (step + time.Second - 1) / time.Second * time.Second
	return max(step, minStep, time.Second)
}

// meanSeries is the mean of the series step by step, and of all points.
func meanSeries(name string, series []api.GpuSeries) api.GpuSeries {
	sums := map[time.Time][2]float64{}
	var total float64
	var n int
	for _, s := range series {
		for _, pt := range s.Points {
			x := sums[pt.Time]
			sums[pt.Time] = [2]float64{x[0] + pt.Util, x[1] + 1}
			total += pt.Util
			n++
		}
	}
	out := api.GpuSeries{Gpu: name, Points: []api.GpuPoint{}}
	for t, x := range sums {
		out.Points = append(out.Points, api.GpuPoint{Time: t, Util: round2(x[0] / x[1])})
	}
	slices.SortFunc(out.Points, func(a, b api.GpuPoint) int { return a.Time.Compare(b.Time) })
	if n > 0 {
		out.MeanUtil = ptr(round2(total / float64(n)))
	}
	return out
}

// JobGPU is a job's GPU utilisation over its life, for a job the caller
// may read: its own GPUs only, from its start to its end or now.
func (s *Core) JobGPU(ctx context.Context, who auth.Identity, clusterName string, id int64) (api.JobGpuUse, *Problem) {
	v, c, pr := s.find(who, clusterName, id)
	if pr != nil {
		return api.JobGpuUse{}, pr
	}
	p := c.Prometheus
	if p == nil {
		return api.JobGpuUse{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q has no Prometheus", clusterName),
			"its admins give the cluster a prometheus_url (reclaimd's API keeps no GPU history)")
	}
	j := v.job
	if len(j.GPUs) == 0 || j.StartTime.IsZero() {
		return api.JobGpuUse{}, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("job %d has no GPUs allocated", id),
			"a job has a GPU history once it runs on GPUs")
	}
	start, end := j.StartTime, s.cfg.Now()
	if !j.EndTime.IsZero() && j.EndTime.Before(end) && !j.Running() {
		end = j.EndTime
	}
	if !end.After(start) {
		end = start.Add(time.Second)
	}
	step := historyStep(end.Sub(start), p.step())
	many := len(j.GPUs) > maxGPUSeries
	series, err := s.ask(ctx, p, p.gpuQuery(j.GPUs, step, many), start, end, step)
	if err != nil {
		s.log.Warn("prometheus query failed", "cluster", clusterName, "job_id", id, "error", err)
		return api.JobGpuUse{}, problem(http.StatusBadGateway, api.Unavailable, fmt.Sprintf("the Prometheus of cluster %q did not answer: %s", clusterName, err), "try again shortly")
	}
	out := api.JobGpuUse{Cluster: clusterName, JobId: id, Source: api.Prometheus, Start: start.UTC(), End: end.UTC(),
		StepSeconds: int64(step / time.Second), Gpus: []api.GpuSeries{}}
	own := map[slurmrest.GPU]bool{}
	for _, g := range j.GPUs {
		own[slurmrest.GPU{Node: g.Node, Index: g.Index}] = true
	}
	seen := map[slurmrest.GPU]bool{}
	if many {
		for _, ps := range series {
			out.Mean = api.GpuSeries{Gpu: "mean", Points: ps.points}
		}
		out.Mean = meanSeries("mean", []api.GpuSeries{out.Mean})
	} else {
		for _, ps := range series {
			g, ok := p.gpuOf(ps.labels)
			if !ok || !own[g] || seen[g] || len(ps.points) == 0 {
				continue // not one of the job's GPUs: never shown
			}
			seen[g] = true
			gs := meanSeries(g.String(), []api.GpuSeries{{Points: ps.points}})
			out.Gpus = append(out.Gpus, gs)
		}
		slices.SortFunc(out.Gpus, func(a, b api.GpuSeries) int { return cmp.Compare(a.Gpu, b.Gpu) })
		out.Mean = meanSeries("mean", out.Gpus)
		var missing []string
		for _, g := range j.GPUs {
			if !seen[slurmrest.GPU{Node: g.Node, Index: g.Index}] {
				missing = append(missing, g.String())
			}
		}
		if missing != nil {
			out.Missing = &missing
		}
	}
	return out, nil
}

// gpuNow is the utilisation of a cluster's GPUs now, by GPU.
type gpuNow struct {
	at   time.Time
	util map[slurmrest.GPU]float64
	err  error
}

// gpuNows caches each cluster's utilisation now for a short while, so
// that the overview asks Prometheus at most once in gpuNowCacheTime.
type gpuNows struct {
	mu sync.Mutex
	m  map[string]*gpuNow
}

func (s *Core) gpuNowOf(ctx context.Context, name string, p *Prometheus) *gpuNow {
	now := s.cfg.Now()
	s.gpuNows.mu.Lock()
	defer s.gpuNows.mu.Unlock()
	if g := s.gpuNows.m[name]; g != nil && now.Sub(g.at) < gpuNowCacheTime && !g.at.After(now) {
		return g
	}
	g := &gpuNow{at: now, util: map[slurmrest.GPU]float64{}}
	series, err := s.ask(ctx, p, p.gpuQuery(nil, p.window(), false), time.Time{}, now, 0)
	if err != nil {
		s.log.Warn("prometheus query failed", "cluster", name, "error", err)
		g.err = err
	}
	for _, ps := range series {
		if gpu, ok := p.gpuOf(ps.labels); ok && len(ps.points) > 0 {
			g.util[gpu] = ps.points[len(ps.points)-1].Util
		}
	}
	if s.gpuNows.m == nil {
		s.gpuNows.m = map[string]*gpuNow{}
	}
	s.gpuNows.m[name] = g
	return g
}

// gpuUse fills the overview's GPU use of a cluster and of each tenant
// shown: of the allocated GPUs of the running jobs, those in use and
// those idle now.
func (s *Core) gpuUse(ctx context.Context, c Cluster, x *index, by map[string]*api.TenantOverview, co *api.ClusterOverview) {
	p := c.Prometheus
	if p == nil {
		return
	}
	g := s.gpuNowOf(ctx, c.Poller.Name(), p)
	total := &api.GpuUseNow{}
	if g.err != nil {
		total.Error = ptr("Prometheus did not answer: " + g.err.Error())
	}
	for i := range x.snap.Jobs {
		j := &x.snap.Jobs[i]
		to := by[x.owners[i].Tenant]
		if to == nil || !j.Running() {
			continue
		}
		if to.GpuUse == nil {
			to.GpuUse = &api.GpuUseNow{}
			if g.err != nil {
				to.GpuUse.Error = total.Error
			}
		}
		for _, gpu := range j.GPUs {
			util, ok := g.util[slurmrest.GPU{Node: gpu.Node, Index: gpu.Index}]
			for _, u := range []*api.GpuUseNow{to.GpuUse, total} {
				switch {
				case !ok:
					u.NoSamples++
				case !dcgmprom.IdleUtil(util, dcgmprom.Threshold{MaxUtilPercent: p.idleBelow()}):
					u.InUse++
				default:
					u.Idle++
					if u.IdleGpus == nil {
						u.IdleGpus = &[]api.IdleGpu{}
					}
					if len(*u.IdleGpus) < maxIdleGPUs {
						*u.IdleGpus = append(*u.IdleGpus, api.IdleGpu{JobId: j.ID, User: ptr(j.User), Gpu: gpu.String(), Util: round2(util)})
					}
				}
			}
		}
	}
	co.GpuUse = total
}
