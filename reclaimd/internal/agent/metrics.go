package agent

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

const mib = 1 << 20

// metrics are the agent's Prometheus metrics, in a registry of its own.
//
// The per-GPU gauges are read from the windows at scrape time, labelled by
// gpu (the index) and model only: job ids would make a series per job. A GPU
// whose latest sample is older than StaleAfter has no gauges, so a stuck
// source shows as missing data rather than as a GPU frozen at its last value.
type metrics struct {
	reg     *prometheus.Registry
	samples prometheus.Counter
	errors  prometheus.Counter
	last    prometheus.Gauge
	faults  *prometheus.CounterVec
}

func newMetrics(a *Agent) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reclaim_agent_samples_total",
			Help: "Sampling rounds of all GPUs attempted.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reclaim_agent_sample_errors_total",
			Help: "Sampling rounds that failed; /healthz gives the last error.",
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_reclaim_agent_last_sample_timestamp_seconds",
			Help: "Unix time of the last good sampling round.",
		}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_agent_gpu_faults_total",
			Help: "GPU fault events reported, by kind (xid, ecc_uncorrectable, retired_pages_pending, row_remap_failure) and code (the Xid; 0 for the rest).",
		}, []string{"kind", "code"}),
	}
	m.reg.MustRegister(m.samples, m.errors, m.last, m.faults, gpuCollector{a})
	return m
}

var (
	gpuLabels = []string{"gpu", "model"}
	descUtil  = prometheus.NewDesc("strata_reclaim_agent_gpu_utilization_ratio",
		"Share of the last NVML sample period in which a kernel ran on the GPU (0-1); absent in MIG mode.", gpuLabels, nil)
	descMemActivity = prometheus.NewDesc("strata_reclaim_agent_gpu_memory_activity_ratio",
		"Share of the last NVML sample period in which device memory was read or written (0-1); absent in MIG mode.", gpuLabels, nil)
	descMemUsed = prometheus.NewDesc("strata_reclaim_agent_gpu_memory_used_bytes",
		"Device memory in use.", gpuLabels, nil)
	descSMActive = prometheus.NewDesc("strata_reclaim_agent_gpu_sm_active_ratio",
		"Share of streaming multiprocessors busy since the previous sample (0-1); only where the driver measures it (GPM, Hopper and newer).", gpuLabels, nil)
)

// gpuCollector exports the latest fresh sample of each GPU.
type gpuCollector struct{ a *Agent }

func (c gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUtil, descMemActivity, descMemUsed, descSMActive} {
		ch <- d
	}
}

func (c gpuCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	oldest := a.cfg.Now().Add(-a.cfg.StaleAfter)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, i := range slices.Sorted(maps.Keys(a.windows)) {
		w := a.windows[i]
		p, ok := w.latest()
		if !ok || p.At.Before(oldest) {
			continue
		}
		labels := []string{strconv.Itoa(i), w.model}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		if p.Util != nil {
			gauge(descUtil, *p.Util/100)
		}
		if p.MemActivity != nil {
			gauge(descMemActivity, *p.MemActivity/100)
		}
		gauge(descMemUsed, p.MemUsedMiB*mib)
		if p.SMActive != nil {
			gauge(descSMActive, *p.SMActive/100)
		}
	}
}
