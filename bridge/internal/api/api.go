// Package api is strata-bridge's HTTP interface for the portal and for
// monitoring: a small JSON API over the deployer and the store, /healthz
// and /metrics.
//
//	GET    /v1/deployments                  every deployment with its current version
//	GET    /v1/deployments/{name}           one deployment, its versions and events
//	POST   /v1/deploy                       {"job": 123, "name": "", "dry_run": false}
//	POST   /v1/deployments/{name}/rollback  {"to": "job-122", "dry_run": false} (to: default the previous ready version)
//	DELETE /v1/deployments/{name}[?dry_run=true]
//
// Errors are JSON, {"error": "..."}; a refusal (422) adds the check that
// failed, the reason and the fix.
//
// Every /v1 request must carry Authorization: Bearer <token> (the content
// of api.token_file; 401 without), name the API by an allowed Host (421
// otherwise) and send its body as application/json (415 otherwise).
// /healthz and /metrics answer anyone, for probes and scrapers.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/bridgeapi"
	"github.com/strata-hpc/strata/internal/strictjson"
)

// Config of the handler.
type Config struct {
	Deployer *deploy.Deployer
	Store    *store.Store
	// Health says whether the daemon is well; a non-nil error fails
	// /healthz with its text. The detail is shown either way.
	Health func() (detail any, err error)
	// Metrics serves /metrics; nil serves none.
	Metrics http.Handler
	// Token gives the bearer token every /v1 request must carry (a
	// secretfile.File's Get, so a rotated file takes effect at once);
	// nil refuses every /v1 request.
	Token func() ([]byte, error)
	// AllowedHosts are the Host names /v1 requests may carry besides
	// LoopbackHosts: the listen address's host and the names clients use.
	AllowedHosts []string
	// Log receives a line per refused request; nil: none.
	Log *slog.Logger
}

// The API's requests and answers are the contract the portal imports.
type (
	DeploymentSummary = bridgeapi.DeploymentSummary
	VersionDetail     = bridgeapi.VersionDetail
	DeploymentDetail  = bridgeapi.DeploymentDetail
	DeployRequest     = bridgeapi.DeployRequest
	RollbackRequest   = bridgeapi.RollbackRequest
	Error             = bridgeapi.Error
)

func detail(v store.Version, objects bool) VersionDetail {
	if !objects {
		v.Objects = nil
	}
	return VersionDetail{Label: versionName(v.JobID), Version: &v}
}

func versionName(job int64) string {
	if job == 0 {
		return ""
	}
	return fmt.Sprintf("job-%d", job)
}

// ParseVersion reads "job-122" or "122".
func ParseVersion(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "job-"), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("version %q: want job-<id>, such as job-122", s)
	}
	return n, nil
}

// Handler serves the API, /healthz and /metrics.
func Handler(cfg Config) http.Handler {
	root := http.NewServeMux()
	mux := http.NewServeMux()
	root.Handle("/", newGuard(cfg).wrap(mux))
	mux.HandleFunc("GET /v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		ds, err := cfg.Store.Deployments(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		out := []DeploymentSummary{}
		for _, d := range ds {
			s := DeploymentSummary{Deployment: d, Version: versionName(d.Current)}
			if d.Current != 0 {
				v, err := cfg.Store.Version(r.Context(), d.Current)
				if err != nil {
					writeError(w, err)
					return
				}
				vd := detail(v, false)
				s.Current = &vd
			}
			out = append(out, s)
		}
		writeJSON(w, http.StatusOK, map[string]any{"deployments": out})
	})
	mux.HandleFunc("GET /v1/deployments/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		d, err := cfg.Store.Deployment(r.Context(), name)
		if err != nil {
			writeError(w, err)
			return
		}
		vs, err := cfg.Store.Versions(r.Context(), name)
		if err != nil {
			writeError(w, err)
			return
		}
		ev, err := cfg.Store.Events(r.Context(), name)
		if err != nil {
			writeError(w, err)
			return
		}
		objects := r.URL.Query().Get("objects") == "true"
		out := DeploymentDetail{Deployment: d, Version: versionName(d.Current), Versions: []VersionDetail{}, Events: ev}
		for _, v := range vs {
			out.Versions = append(out.Versions, detail(v, objects))
		}
		if out.Events == nil {
			out.Events = []store.Event{}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /v1/deploy", func(w http.ResponseWriter, r *http.Request) {
		var req DeployRequest
		if err := decode(r, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, Error{Error: err.Error()})
			return
		}
		if req.Job <= 0 {
			writeJSON(w, http.StatusBadRequest, Error{Error: `body: "job" is required: the Slurm job id whose model to serve`})
			return
		}
		res, err := cfg.Deployer.DeployJob(r.Context(), req.Job, req.Name, deploy.Options{DryRun: req.DryRun, Reason: "API"})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res.Contract())
	})
	mux.HandleFunc("POST /v1/deployments/{name}/rollback", func(w http.ResponseWriter, r *http.Request) {
		var req RollbackRequest
		if err := decode(r, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, Error{Error: err.Error()})
			return
		}
		var to int64
		if req.To != "" {
			var err error
			if to, err = ParseVersion(req.To); err != nil {
				writeJSON(w, http.StatusBadRequest, Error{Error: "to: " + err.Error()})
				return
			}
		}
		res, err := cfg.Deployer.Rollback(r.Context(), r.PathValue("name"), to, deploy.Options{DryRun: req.DryRun, Reason: "API"})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res.Contract())
	})
	mux.HandleFunc("DELETE /v1/deployments/{name}", func(w http.ResponseWriter, r *http.Request) {
		dry := false
		if s := r.URL.Query().Get("dry_run"); s != "" {
			var err error
			if dry, err = strconv.ParseBool(s); err != nil {
				writeJSON(w, http.StatusBadRequest, Error{Error: fmt.Sprintf("dry_run=%q: want true or false", s)})
				return
			}
		}
		res, err := cfg.Deployer.Delete(r.Context(), r.PathValue("name"), deploy.Options{DryRun: dry, Reason: "API"})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Health == nil {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		d, err := cfg.Health()
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error(), "detail": d})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "detail": d})
	})
	if cfg.Metrics != nil {
		root.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, Error{Error: fmt.Sprintf("no route %s %s: see GET /v1/deployments, POST /v1/deploy, "+
			"POST /v1/deployments/{name}/rollback, DELETE /v1/deployments/{name}", r.Method, r.URL.Path)})
	})
	return root
}

// maxBody bounds a request body: the requests are a few fields.
const maxBody = 64 << 10

// decode reads a JSON body strictly, as internal/strictjson reads the
// contracts: an unknown field, a field given twice (which encoding/json
// takes, the last one winning, so that a proxy and the bridge could read
// two different requests), a value of the wrong type and anything after
// the object are errors, each with its line and column. An empty body is
// an empty request.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if len(data) > maxBody {
		return fmt.Errorf("body: larger than %d bytes", maxBody)
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil
	}
	if _, err := strictjson.Decode(data, v, "want a JSON object"); err != nil {
		return fmt.Errorf("body: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// writeError maps an error to its status: a refusal is 422, an unknown
// deployment or version 404, a job that asked for nothing 422, a change
// asked of the standby bridge (or of one that lost the lease during the
// action) 503 with Retry-After, anything else 500.
func writeError(w http.ResponseWriter, err error) {
	var ref *deploy.Refusal
	switch {
	case errors.As(err, &ref):
		writeJSON(w, http.StatusUnprocessableEntity, Error{Error: ref.Error(), Check: ref.Check, Reason: ref.Reason, Fix: ref.Fix})
	case errors.Is(err, deploy.ErrNotRequested):
		writeJSON(w, http.StatusUnprocessableEntity, Error{Error: err.Error(), Check: deploy.CheckSpec,
			Fix: `give "name" to serve the job's working directory under that name`})
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, Error{Error: err.Error()})
	case errors.Is(err, store.ErrLeaseLost):
		w.Header().Set("Retry-After", "10")
		writeJSON(w, http.StatusServiceUnavailable, Error{Error: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, Error{Error: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
