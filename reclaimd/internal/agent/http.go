package agent

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/internal/bearer"
)

// Handler serves the agent's endpoints: GET /v1/snapshot (JSON, type
// Snapshot; ?after=CURSOR for only the samples since the snapshot of that
// cursor, see SnapshotAfter), GET /healthz (text: 200 "ok: …" or 503 with the reason) and
// GET /metrics (Prometheus). Other paths are 404, other methods 405.
//
// With a secret (Config.Secret), every /v1 request, to a known path or
// not, must carry the node's read token (ReadToken; 401 with a hint
// without it): a snapshot names every job on the node and its user.
// /healthz and /metrics name no job and stay open to probes.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	v1 := http.NewServeMux()
	v1.HandleFunc("GET /v1/snapshot", a.serveSnapshot)
	if a.cfg.Secret == nil {
		mux.Handle("/v1/", v1)
	} else {
		mux.Handle("/v1/", bearer.Guard{Realm: "reclaimd agent", Key: "agents.token_file", Log: a.log,
			Fix: "send Authorization: Bearer <the node's read token>: reclaimd run derives it from agents.token_file, " +
				"which must be the same file as this agent's agent.token_file",
			Token: func() ([]byte, error) {
				secret, err := a.cfg.Secret()
				if err != nil {
					return nil, err
				}
				return ReadToken(secret, a.cfg.Node), nil
			}}.Wrap(v1))
	}
	mux.HandleFunc("GET /healthz", a.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}

func (a *Agent) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	// With a secret (agent.token_file), each snapshot answers the
	// controller's nonce with its signature (auth.go).
	var secret []byte
	nonce := r.Header.Get(HeaderNonce)
	if a.cfg.Secret != nil {
		if !validNonce(nonce) {
			http.Error(w, HeaderNonce+": want 32 to 128 hex digits, fresh for each request", http.StatusBadRequest)
			return
		}
		var err error
		if secret, err = a.cfg.Secret(); err != nil {
			a.log.Error("agent secret unusable: snapshots are refused", "error", err)
			http.Error(w, "the agent's secret file cannot be used: see its log", http.StatusServiceUnavailable)
			return
		}
	}
	b, err := json.Marshal(a.SnapshotAfter(r.URL.Query().Get("after")))
	if err != nil { // only non-finite floats, which no source produces
		a.log.Error("encode snapshot failed", "error", err)
		http.Error(w, "encode snapshot: "+err.Error(), http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if secret != nil {
		w.Header().Set(HeaderSignature, Sign(secret, nonce, b))
	}
	w.Write(b)
}

func (a *Agent) serveHealth(w http.ResponseWriter, _ *http.Request) {
	ok, reason := a.health()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write([]byte(reason + "\n"))
}
