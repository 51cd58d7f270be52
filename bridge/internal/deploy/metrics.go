package deploy

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the deployer's Prometheus metrics. Labels are bounded: the
// action, the outcome and the check; never a job id, name or user.
type Metrics struct {
	Deploys        *prometheus.CounterVec
	Refusals       *prometheus.CounterVec
	Deletes        *prometheus.CounterVec
	RolloutSeconds prometheus.Histogram
}

// NewMetrics registers the deployer's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Deploys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_bridge_deploys_total",
			Help: "Deploys and rollbacks applied, by action (deploy, rollback) and outcome (ready, unchanged, timeout, failed).",
		}, []string{"action", "outcome"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_bridge_refusals_total",
			Help: "Deploys and rollbacks refused before anything was created, by the check that failed.",
		}, []string{"check"}),
		Deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_bridge_deletes_total",
			Help: "Deployments deleted, by outcome (deleted, failed).",
		}, []string{"outcome"}),
		RolloutSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_bridge_rollout_duration_seconds",
			Help:    "Time from the start of an apply to the end of its rollout (or its timeout).",
			Buckets: []float64{.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}),
	}
	for _, o := range []string{"ready", "unchanged", "timeout", "failed"} {
		m.Deploys.WithLabelValues("deploy", o)
		m.Deploys.WithLabelValues("rollback", o)
	}
	for _, c := range []string{CheckJob, CheckSpec, CheckTenant, CheckModel, CheckQuota, CheckName, CheckVersion} {
		m.Refusals.WithLabelValues(c)
	}
	m.Deletes.WithLabelValues("deleted")
	m.Deletes.WithLabelValues("failed")
	reg.MustRegister(m.Deploys, m.Refusals, m.Deletes, m.RolloutSeconds)
	return m
}
