package sessionproxy

import (
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// Metric names, as portal-api/README.md lists them.
const (
	MetricConnections       = "strata_portal_session_proxy_connections"
	MetricMaxConnections    = "strata_portal_session_proxy_max_connections"
	MetricBusiest           = "strata_portal_session_proxy_busiest_session_connections"
	MetricSessionsAtCap     = "strata_portal_session_proxy_sessions_at_cap"
	MetricRefusals          = "strata_portal_session_proxy_refusals_total"
	MetricRequests          = "strata_portal_session_proxy_requests_total"
	MetricResponseBodyBytes = "strata_portal_session_proxy_response_bytes_total"
)

// refusalCodes are every code a refusal is counted by, each series there
// from the start (an alert on the cap reads a series that exists at 0).
var refusalCodes = []string{CodeNotFound, CodeNotRunning, CodeStarting, CodeWrongHost, CodeWrongPort, CodeNoSecret,
	CodeBadConnection, CodeBusy, CodeUnreachable, CodeInternal}

// serverKinds are the servers' kinds, the requests' and bytes' label.
var serverKinds = []session.Kind{session.JupyterLab, session.TTYD, session.CodeServer}

// metrics are the proxy's: what is open now is read from the proxy's own
// count at each scrape; no label names a session or a user.
type metrics struct {
	refusals *prometheus.CounterVec
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
}

func (p *Proxy) register(reg prometheus.Registerer) {
	m := &metrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRefusals,
			Help: "Requests to a session's proxy refused, by code: session_busy is a session at its connection cap (429)."}, []string{"code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRequests,
			Help: "Requests passed to sessions' servers, by server kind and protocol (http, or websocket for an upgrade)."}, []string{"kind", "protocol"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricResponseBodyBytes,
			Help: "Bytes of the HTTP response bodies sessions' servers sent through the proxy, by server kind; WebSocket frames are not counted."}, []string{"kind"}),
	}
	for _, c := range refusalCodes {
		m.refusals.WithLabelValues(c)
	}
	for _, k := range serverKinds {
		m.requests.WithLabelValues(string(k), "http")
		m.requests.WithLabelValues(string(k), "websocket")
		m.bytes.WithLabelValues(string(k))
	}
	reg.MustRegister(m.refusals, m.requests, m.bytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricConnections,
			Help: "Requests and WebSockets open through the session proxy now, all sessions together."},
			func() float64 { total, _, _ := p.counts(); return float64(total) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricMaxConnections,
			Help: "The cap of requests and WebSockets one session may have open at once; past it the proxy answers 429."},
			func() float64 { return float64(p.cfg.MaxConns) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricBusiest,
			Help: "The most requests and WebSockets one session has open now."},
			func() float64 { _, most, _ := p.counts(); return float64(most) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricSessionsAtCap,
			Help: "Sessions with as many requests and WebSockets open as the cap allows: their next one is refused."},
			func() float64 { _, _, full := p.counts(); return float64(full) }),
	)
	p.m = m
}

// counts are the open connections of all sessions, the most of one
// session, and the sessions at the cap.
func (p *Proxy) counts() (total, most, atCap int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.conns {
		total += n
		most = max(most, n)
		if n >= p.cfg.MaxConns {
			atCap++
		}
	}
	return total, most, atCap
}

// protocol is how a request goes through: an upgrade to WebSocket, or
// plain HTTP.
func protocol(r *http.Request) string {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "websocket"
	}
	return "http"
}

// countedBody counts the bytes a response body hands the browser.
type countedBody struct {
	io.ReadCloser
	c prometheus.Counter
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.Add(float64(n))
	}
	return n, err
}
