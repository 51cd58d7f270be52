package cluster

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// gathered returns every series of reg as "name{label=value,...}" -> value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			key += "}"
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// The snapshot age of a cluster exists from the start, growing until the
// first good poll, so an alert on it fires for a cluster that never
// answered; the poll counters exist for both results before any poll.
func TestMetricsFromStart(t *testing.T) {
	bed := clustertest.New(t, "26.05", clustertest.Job{ID: 10, User: "alice", Account: "acme-llm"})
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := New(Config{Name: "gpu1", Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
		Interval: 10 * time.Second, StaleAfter: time.Minute, Metrics: m, Now: func() time.Time { return now }})
	now = now.Add(90 * time.Second)
	got := gathered(t, reg)
	for key, want := range map[string]float64{
		"strata_portal_snapshot_age_seconds{cluster=gpu1}":     90,
		"strata_portal_polls_total{cluster=gpu1,result=ok}":    0,
		"strata_portal_polls_total{cluster=gpu1,result=error}": 0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("before the first poll: %s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Second)
	if v := gathered(t, reg)["strata_portal_snapshot_age_seconds{cluster=gpu1}"]; v != 5 {
		t.Errorf("snapshot age 5 s after a good poll: %v", v)
	}
}
