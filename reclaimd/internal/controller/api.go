package controller

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/internal/bearer"
	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// JobReclaim is the answer of GET /v1/jobs/{id}/reclaim: where the job
// stands and every decision about it, in words and numbers.
type JobReclaim struct {
	JobID int64            `json:"job_id"`
	State *decide.JobState `json:"state,omitempty"`
	// Skipped says why the job got no action in the last cycle: with
	// judged false, why its GPUs are not being judged at all.
	Skipped *SkipEntry `json:"skipped,omitempty"`
	// Upcoming is the next step if the job's GPUs stay idle.
	Upcoming *reclaimapi.Upcoming `json:"upcoming,omitempty"`
	Records  []store.Record       `json:"decisions"`
}

// Handler serves the API: GET /v1/jobs/{id}/reclaim, GET
// /v1/decisions?since=RFC3339&limit=N, GET /v1/worth?since=&limit= (each
// reclaim's bound and observed worth: reclaimapi.Worth), GET /v1/nodes/health[?node=NAME]
// (node health: NodeHealthEntry), recovery's GET /v1/jobs/{id}/attempts and
// /v1/failures?since=, /healthz and /metrics. staleAfter
// is how old the last cycle may be before /healthz fails.
//
// Every /v1 request must carry Config.APIToken as a bearer token: the
// answers name every tenant's jobs, users and nodes. Without it any /v1
// path, known or not, is 401 with a hint (internal/bearer). /healthz and
// /metrics stay open to probes and scrapers: they name no job or user.
func (c *Controller) Handler(staleAfter time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", c.api(nil))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		st := c.LastStatus()
		if c.cfg.Lease != nil {
			ls := c.cfg.Lease()
			st.Lease = &ls
		}
		switch {
		case st.At.IsZero():
			httpError(w, http.StatusServiceUnavailable, "no cycle yet")
		case c.cfg.Now().Sub(st.At) > staleAfter:
			httpError(w, http.StatusServiceUnavailable, "last cycle at %s is older than %s", st.At.Format(time.RFC3339), staleAfter)
		case !st.SlurmOK || !st.Source:
			httpError(w, http.StatusServiceUnavailable, "last cycle acted on nothing: %s", st.Error)
		default:
			writeJSON(w, st)
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.cfg.Metrics.Registry, promhttp.HandlerOpts{}))
	return mux
}

// ReadAPI serves the /v1 reads from the store alone, for a controller
// that does not act: a standby on PostgreSQL, or one waiting for
// slurmrestd. A portal pointed at it (or at a balancer in front of both
// hosts) reads the same records, worth, failures, attempts and job states
// the acting controller serves, from the shared database. What only a
// running cycle knows is left out: a job's skipped, and Slurm's state and
// partitions of each node in /v1/nodes/health; a job's upcoming is the
// acting controller's last cycle's, as it saved it. Any request other than a read is 503
// with Retry-After: this controller acts on nothing.
//
// cfg needs Store and APIToken; Health, Log and Now as for New.
func ReadAPI(cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Controller{cfg: cfg, readOnly: true}
	return c.api(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return true
		}
		w.Header().Set("Retry-After", strconv.Itoa(standbyRetryAfter))
		httpError(w, http.StatusServiceUnavailable, "this reclaimd controller does not act now (a standby, or waiting for slurmrestd): "+
			"it serves reads only; %s %s goes to the acting controller", r.Method, r.URL.Path)
		return false
	})
}

// standbyRetryAfter is the Retry-After of a request a standby refuses, in
// seconds: about when a take-over may have happened.
const standbyRetryAfter = 10

// api is the guarded /v1 handler: every route reads the store (and what
// the last cycle left in memory, if any). admit, when set, is asked first
// (after the token) and answers the requests it refuses.
func (c *Controller) api(admit func(http.ResponseWriter, *http.Request) bool) http.Handler {
	api := http.NewServeMux()
	var h http.Handler = api
	if admit != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if admit(w, r) {
				api.ServeHTTP(w, r)
			}
		})
	}
	guarded := bearer.Guard{Token: c.cfg.APIToken, Realm: "reclaimd", Key: "api.token_file of reclaimd.yaml", Log: c.cfg.Log}.Wrap(h)
	api.HandleFunc("GET /v1/jobs/{id}/reclaim", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id <= 0 {
			httpError(w, http.StatusBadRequest, "job id %q is not a number", r.PathValue("id"))
			return
		}
		recs, err := c.cfg.Store.Job(r.Context(), id)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read records: %v", err)
			return
		}
		states, err := c.cfg.Store.States(r.Context())
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read states: %v", err)
			return
		}
		out := JobReclaim{JobID: id, Records: recs}
		if raw, ok := states[id]; ok {
			var st decide.JobState
			if json.Unmarshal(raw, &st) == nil {
				out.State = &st
			}
		}
		c.mu.Lock()
		if sk, ok := c.skips[id]; ok {
			out.Skipped = &sk
		}
		if u, ok := c.upcoming[id]; ok {
			out.Upcoming = &u
		}
		c.mu.Unlock()
		if c.readOnly {
			// The acting controller's last cycle, as it saved it.
			u, ok, err := c.cfg.Store.Upcoming(r.Context(), id)
			if err != nil {
				httpError(w, http.StatusInternalServerError, "read the next step: %v", err)
				return
			}
			if ok {
				out.Upcoming = &u
			}
		}
		if out.State == nil && len(recs) == 0 && out.Skipped == nil {
			httpError(w, http.StatusNotFound, "reclaimd has no record of job %d: it never judged it idle", id)
			return
		}
		if out.Records == nil {
			out.Records = []store.Record{}
		}
		writeJSON(w, out)
	})
	api.HandleFunc("GET /v1/decisions", func(w http.ResponseWriter, r *http.Request) {
		since, ok := parseSince(w, r)
		if !ok {
			return
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		recs, err := c.cfg.Store.Since(r.Context(), since, limit)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read records: %v", err)
			return
		}
		if recs == nil {
			recs = []store.Record{}
		}
		writeJSON(w, reclaimapi.Decisions{Decisions: recs})
	})
	api.HandleFunc("GET "+reclaimapi.PathWorth, func(w http.ResponseWriter, r *http.Request) {
		since, ok := parseSince(w, r)
		if !ok {
			return
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		out, err := c.cfg.Store.Worth(r.Context(), since, limit, c.cfg.Now())
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read reclaims: %v", err)
			return
		}
		writeJSON(w, out)
	})
	api.HandleFunc("GET /v1/nodes/health", func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Health == nil {
			httpError(w, http.StatusNotFound, "node health is off: set health.enabled: true in reclaimd.yaml")
			return
		}
		nodes, err := c.NodesHealth(r.Context())
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read node health: %v", err)
			return
		}
		if name := r.URL.Query().Get("node"); name != "" {
			nodes = slices.DeleteFunc(nodes, func(e NodeHealthEntry) bool { return e.Node != name })
		}
		writeJSON(w, reclaimapi.NodesHealth{Nodes: nodes})
	})
	c.recoveryRoutes(api)
	return guarded
}

// parseSince reads ?since= (RFC 3339 or Unix seconds; none: the
// beginning), answering 400 when it reads neither way.
func parseSince(w http.ResponseWriter, r *http.Request) (time.Time, bool) {
	s := r.URL.Query().Get("since")
	if s == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		sec, err2 := strconv.ParseInt(s, 10, 64)
		if err2 != nil {
			httpError(w, http.StatusBadRequest, "since=%q: want RFC 3339 (2026-11-29T12:00:00Z) or Unix seconds", s)
			return time.Time{}, false
		}
		t = time.Unix(sec, 0)
	}
	return t, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}
