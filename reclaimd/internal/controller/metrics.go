package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Metrics are the controller's Prometheus metrics, in a private registry.
// The only high-level label is tenant; users and nodes never become
// labels, and a job id only in JobInfo, whose series are the running GPU
// jobs and no more. The main adds strata_build_info and the Go and process
// collectors (buildinfo.Register).
type Metrics struct {
	Registry       *prometheus.Registry
	IdleGPUSeconds *prometheus.CounterVec
	// JudgedIdleGPUSeconds is the GPU time of the jobs judged idle, seen
	// or not: IdleGPUSeconds over it is the coverage of the idle figure.
	JudgedIdleGPUSeconds *prometheus.CounterVec
	// ReclaimedGPUSeconds is the upper bound of what reclaims freed, by
	// the reclaimed job's tenant and rule; ObservedGPUSeconds what
	// waiting jobs ran on the freed GPUs before the reclaimed jobs' time
	// limits would have ended them (package worth).
	ReclaimedGPUSeconds *prometheus.CounterVec
	ObservedGPUSeconds  *prometheus.CounterVec
	Actions             *prometheus.CounterVec
	// Skipped counts, each cycle, the jobs that got no action, by reason
	// (decide.SkipReason.Label, and unreadable_record for a job whose
	// Slurm record could not be read).
	Skipped      *prometheus.CounterVec
	CycleSeconds prometheus.Histogram
	DataAge      prometheus.Gauge
	// AgentRefusals counts the agent snapshots refused, by reason
	// (collect.RefusedSignature, collect.RefusedHistory).
	AgentRefusals *prometheus.CounterVec

	// Node health (health.go).
	NodesDrained *prometheus.GaugeVec   // by partition
	Drains       *prometheus.CounterVec // by reason (xid_79, ecc_uncorrectable, ...)
	Resumes      prometheus.Counter
	DrainCapHit  *prometheus.CounterVec // by partition
	HealthChecks *prometheus.CounterVec // by result
	GPUFaults    *prometheus.CounterVec // by kind and code
	// SlurmErrors counts the cycles whose job list slurmrestd did not
	// give; SourceErrors those whose GPU samples could not be read at
	// all; AgentErrors each node, each cycle, whose samples were missing
	// (refusals are counted in AgentRefusals).
	SlurmErrors  prometheus.Counter
	SourceErrors prometheus.Counter
	AgentErrors  prometheus.Counter
	// Jobs is the running GPU jobs of the last cycle by reclaim phase;
	// AllocatedGPUs their GPUs by partition and tenant; Pending the
	// pending jobs by tenant and Slurm's pending reason.
	Jobs          *prometheus.GaugeVec
	AllocatedGPUs *prometheus.GaugeVec
	Pending       *prometheus.GaugeVec
	// JobInfo is 1 for each running GPU job of the last cycle, with its
	// id as hpc_job (the label dcgm-exporter gives a GPU's job when it
	// reads the job mapping files: --hpc-job-mapping-dir), its tenant,
	// account and partition: what joins dcgm-exporter's GPU metrics to
	// tenants. A job's series goes when it stops running, so there are
	// as many series as running GPU jobs.
	JobInfo *prometheus.GaugeVec
	// Recovery: failures classified by tenant and class; retries by
	// class and result (requeued, exhausted, refused, failed); time from
	// a failure to the job running again.
	RecoveryFailures      *prometheus.CounterVec
	RecoveryRetries       *prometheus.CounterVec
	RecoveryTimeToRunning prometheus.Histogram
	// LeaseHeld is 1 while this controller holds the controller lease and
	// acts, 0 while it stands by; LeaseGeneration the generation it holds
	// (0: none). Set by whoever keeps the lease (reclaimd run, on
	// PostgreSQL); on SQLite the lease is always held, generation 0.
	LeaseHeld       prometheus.Gauge
	LeaseGeneration prometheus.Gauge
}

// NewMetrics registers the metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		IdleGPUSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_idle_gpu_seconds_total",
			Help: "GPU time seen idle in the samples of jobs judged idle (warned, signalled or noticed), by tenant; gaps in the samples are not counted.",
		}, []string{"tenant"}),
		JudgedIdleGPUSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_judged_idle_gpu_seconds_total",
			Help: "GPU time held by jobs judged idle, seen in samples or not, by tenant: strata_reclaim_idle_gpu_seconds_total over it is the idle figure's coverage.",
		}, []string{"tenant"}),
		ReclaimedGPUSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_reclaimed_gpu_seconds_total",
			Help: "GPU time given back by requeues and cancels, an upper bound: GPUs times what was left of the job's time limit, by the reclaimed job's tenant and rule.",
		}, []string{"tenant", "rule"}),
		ObservedGPUSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_observed_gpu_seconds_total",
			Help: "GPU time that jobs started on GPUs freed by requeues and cancels ran there before the reclaimed job's time limit would have ended it (observed), by the reclaimed job's tenant and rule.",
		}, []string{"tenant", "rule"}),
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_actions_total",
			Help: "Reclaim actions by tenant, action and result (done, failed, abandoned, dry-run).",
		}, []string{"tenant", "action", "result"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_skipped_total",
			Help: "Jobs that got no action in a cycle, once per job and cycle, by reason (stale_data, window_not_reached, busy, unreadable_record, ...).",
		}, []string{"reason"}),
		CycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_reclaim_cycle_duration_seconds",
			Help:    "Time one reclaim cycle took.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		DataAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_reclaim_data_age_seconds",
			Help: "Age of the newest GPU sample at the start of the last cycle.",
		}),
		AgentRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reclaim_agent_snapshots_refused_total",
			Help: "Agent snapshots refused, by reason: signature (not signed with the shared secret for this request) or history (a sample older than the agent's start).",
		}, []string{"reason"}),
		NodesDrained: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_recovery_nodes_drained",
			Help: "Nodes drained by Strata now (for a GPU fault, not yet resumed), by partition.",
		}, []string{"partition"}),
		Drains: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_recovery_drains_total",
			Help: "Nodes drained by Strata, by reason (xid_79, ecc_uncorrectable, retired_pages_pending, row_remap_failure).",
		}, []string{"reason"}),
		Resumes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_recovery_resumes_total",
			Help: "Nodes resumed by Strata after their health check passed.",
		}),
		DrainCapHit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_recovery_drain_cap_hit_total",
			Help: "Drains not made because the partition already had its share of nodes drained by Strata (once per fault), by partition.",
		}, []string{"partition"}),
		HealthChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_recovery_health_checks_total",
			Help: "Health checks of drained nodes, by result (pass, fail, timeout, error: the command could not run).",
		}, []string{"result"}),
		GPUFaults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_recovery_gpu_faults_total",
			Help: "GPU faults the agents reported, each once, by kind (xid, ecc_uncorrectable, retired_pages_pending, row_remap_failure) and code (the Xid; 0 for the rest).",
		}, []string{"kind", "code"}),
		SlurmErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reclaim_slurm_errors_total",
			Help: "Cycles whose job list slurmrestd did not give (the cycle acted on nothing).",
		}),
		SourceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reclaim_source_errors_total",
			Help: "Cycles whose GPU samples could not be read at all (no agent answered, or Prometheus failed).",
		}),
		AgentErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reclaim_agent_errors_total",
			Help: "Nodes whose GPU samples were missing in a cycle, once per node and cycle; their GPUs count as stale.",
		}),
		Jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_reclaim_jobs",
			Help: "Running GPU jobs of the last cycle by reclaim phase (observed, warned, signalled, notified, recovered, requeued, cancelled).",
		}, []string{"phase"}),
		AllocatedGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_reclaim_allocated_gpus",
			Help: "GPUs held by running jobs in the last cycle, by partition and tenant.",
		}, []string{"partition", "tenant"}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_reclaim_pending_jobs",
			Help: "Pending jobs in the last cycle, by tenant and Slurm's pending reason (None when Slurm gives none).",
		}, []string{"tenant", "reason"}),
		JobInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_reclaim_job_info",
			Help: "1 for each running GPU job of the last cycle: its id (hpc_job, as dcgm-exporter labels a GPU's job), tenant, account and partition.",
		}, []string{"hpc_job", "tenant", "account", "partition"}),
	}
	for _, p := range []decide.Phase{decide.Observed, decide.Warned, decide.Signalled, decide.Notified, decide.Recovered, decide.Requeued, decide.Cancelled} {
		m.Jobs.WithLabelValues(string(p))
	}
	m.Registry.MustRegister(m.NodesDrained, m.Drains, m.Resumes, m.DrainCapHit, m.HealthChecks, m.GPUFaults)
	m.RecoveryFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_recovery_failures_total",
		Help: "Job runs that ended other than COMPLETED, classified once, by tenant and failure class.",
	}, []string{"tenant", "class"})
	m.RecoveryRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_recovery_retries_total",
		Help: "Recovery decisions by failure class and result: requeued (retried), exhausted (retries used up: held or left), refused (not retried: the class is not, the job was cancelled, its account is gone), failed (the requeue failed).",
	}, []string{"class", "result"})
	m.RecoveryTimeToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strata_recovery_time_to_running_seconds",
		Help:    "Time from a failed run's end to the job running again after a retry or a release.",
		Buckets: []float64{30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
	})
	m.Registry.MustRegister(m.RecoveryFailures, m.RecoveryRetries, m.RecoveryTimeToRunning)
	m.LeaseHeld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_reclaim_lease_held",
		Help: "1 while this controller holds the controller lease and acts; 0 while it stands by (a standby on a shared PostgreSQL database). Always 1 on SQLite.",
	})
	m.LeaseGeneration = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_reclaim_lease_generation",
		Help: "The generation of the controller lease this controller holds (0: none, and always on SQLite); it grows by one at each take-over.",
	})
	m.Registry.MustRegister(m.LeaseHeld, m.LeaseGeneration)
	m.Registry.MustRegister(m.IdleGPUSeconds, m.JudgedIdleGPUSeconds, m.ReclaimedGPUSeconds, m.ObservedGPUSeconds, m.Actions, m.Skipped, m.CycleSeconds, m.DataAge,
		m.AgentRefusals, m.SlurmErrors, m.SourceErrors, m.AgentErrors, m.Jobs, m.AllocatedGPUs, m.Pending, m.JobInfo)
	return m
}
