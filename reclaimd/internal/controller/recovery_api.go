package controller

import (
	"net/http"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// Attempt is one classified failure of a job with what came of it: the
// answer's items of GET /v1/jobs/{id}/attempts (reclaimd's API contract).
type Attempt = reclaimapi.Attempt

// recoveryRoutes adds GET /v1/jobs/{id}/attempts (every failure of the
// job with its node, class, evidence, decision and the outcome of its
// retry) and GET /v1/failures?since=RFC3339|unix&limit=N.
func (c *Controller) recoveryRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/jobs/{id}/attempts", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id <= 0 {
			httpError(w, http.StatusBadRequest, "job id %q is not a number", r.PathValue("id"))
			return
		}
		fs, err := c.cfg.Store.JobFailures(r.Context(), id)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read failures: %v", err)
			return
		}
		if len(fs) == 0 {
			httpError(w, http.StatusNotFound, "reclaimd has no failure of job %d: it never saw it end other than COMPLETED", id)
			return
		}
		out := make([]Attempt, 0, len(fs))
		for _, f := range fs {
			a := Attempt{Failure: f}
			if f.RecordID != nil {
				if rec, err := c.cfg.Store.Record(r.Context(), *f.RecordID); err == nil {
					a.Record = &rec
				}
			}
			out = append(out, a)
		}
		writeJSON(w, reclaimapi.Attempts{JobID: id, Attempts: out})
	})
	mux.HandleFunc("GET /v1/failures", func(w http.ResponseWriter, r *http.Request) {
		since := time.Time{}
		if s := r.URL.Query().Get("since"); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				sec, err2 := strconv.ParseInt(s, 10, 64)
				if err2 != nil {
					httpError(w, http.StatusBadRequest, "since=%q: want RFC 3339 (2026-11-29T12:00:00Z) or Unix seconds", s)
					return
				}
				t = time.Unix(sec, 0)
			}
			since = t
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		fs, err := c.cfg.Store.FailuresSince(r.Context(), since, limit)
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read failures: %v", err)
			return
		}
		if fs == nil {
			fs = []store.Failure{}
		}
		writeJSON(w, reclaimapi.Failures{Failures: fs})
	})
}
