package core

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricSessionsOpen is the open sessions' gauge, as portal-api/README.md
// lists it.
const MetricSessionsOpen = "strata_portal_sessions_open"

// sessionStates are the states of an open session whose series exist
// from the start, at 0, for every cluster: SUBMITTED until the snapshot
// shows the job, then the job's Slurm state while it may run.
var sessionStates = append([]string{"SUBMITTED"}, openStates...)

// sessionGauge counts the open sessions by cluster and state, as the idle
// loop last saw them (every IdleInterval, and at its start).
type sessionGauge struct {
	g    *prometheus.GaugeVec
	mu   sync.Mutex
	seen map[[2]string]bool // series set by the last look, beyond the fixed ones
}

func newSessionGauge(reg prometheus.Registerer, clusters []string) *sessionGauge {
	g := &sessionGauge{g: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricSessionsOpen,
		Help: "Sessions not ended, by cluster and state (SUBMITTED until the cluster's snapshot shows the job, then its Slurm state), as the idle loop last counted them."},
		[]string{"cluster", "state"}), seen: map[[2]string]bool{}}
	for _, c := range clusters {
		for _, st := range sessionStates {
			g.g.WithLabelValues(c, st).Set(0)
		}
	}
	reg.MustRegister(g.g)
	return g
}

// set replaces the counts: a series of a state no session is in any more
// goes back to 0 (the fixed ones) or away (any other, such as a job
// COMPLETING whose end is not recorded yet).
func (g *sessionGauge) set(clusters []string, counts map[[2]string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range clusters {
		for _, st := range sessionStates {
			g.g.WithLabelValues(c, st).Set(float64(counts[[2]string{c, st}]))
		}
	}
	fixed := func(k [2]string) bool {
		for _, st := range sessionStates {
			if k[1] == st {
				return true
			}
		}
		return false
	}
	next := map[[2]string]bool{}
	for k, n := range counts {
		if !fixed(k) {
			g.g.WithLabelValues(k[0], k[1]).Set(float64(n))
			next[k] = true
		}
	}
	for k := range g.seen {
		if !next[k] {
			g.g.DeleteLabelValues(k[0], k[1])
		}
	}
	g.seen = next
}
