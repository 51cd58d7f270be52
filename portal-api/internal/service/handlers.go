package service

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/strata-hpc/strata/internal/strictjson"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/core"
)

// The routes: each decodes its request, asks the core as the caller, and
// writes the answer or the problem.

// ListClusters lists the clusters with their health, and how many of
// their jobs the caller may read.
func (s *Server) ListClusters(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.core.Clusters(r.Context(), identity(r.Context())))
}

// GetMe says who the caller is and what roles they hold.
func (s *Server) GetMe(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.core.Me(r.Context(), identity(r.Context())))
}

// ListJobs lists the jobs the caller may read.
func (s *Server) ListJobs(w http.ResponseWriter, r *http.Request, p api.ListJobsParams) {
	out, pr := s.core.Jobs(r.Context(), identity(r.Context()), p)
	respond(w, http.StatusOK, out, pr)
}

// ListJobHistory lists the finished jobs the caller may read, from each
// cluster's slurmdbd.
func (s *Server) ListJobHistory(w http.ResponseWriter, r *http.Request, p api.ListJobHistoryParams) {
	out, pr := s.core.JobHistory(r.Context(), identity(r.Context()), p)
	respond(w, http.StatusOK, out, pr)
}

// GetJob returns one job.
func (s *Server) GetJob(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, id api.JobID) {
	out, p := s.core.Job(r.Context(), identity(r.Context()), cluster, id)
	respond(w, http.StatusOK, out, p)
}

// ControlJob cancels, holds, releases or requeues a job as the caller.
func (s *Server) ControlJob(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, id api.JobID, action api.JobAction) {
	out, p := s.core.ControlJob(r.Context(), identity(r.Context()), cluster, id, action)
	respond(w, http.StatusOK, out, p)
}

// GetJobGpu is a job's GPU utilisation over its life.
func (s *Server) GetJobGpu(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, id api.JobID) {
	out, p := s.core.JobGPU(r.Context(), identity(r.Context()), cluster, id)
	respond(w, http.StatusOK, out, p)
}

// GetJobOutput gives the tail of a job's output and its working directory.
func (s *Server) GetJobOutput(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, id api.JobID) {
	out, p := s.core.JobOutput(r.Context(), identity(r.Context()), cluster, id)
	respond(w, http.StatusOK, out, p)
}

// GetJobReclaim gives reclaimd's record of a job.
func (s *Server) GetJobReclaim(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, id api.JobID) {
	out, p := s.core.JobReclaim(r.Context(), identity(r.Context()), cluster, id)
	respond(w, http.StatusOK, out, p)
}

// GetJobAttempts gives reclaimd's record of a job's failed runs.
func (s *Server) GetJobAttempts(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, id api.JobID) {
	out, p := s.core.JobAttempts(r.Context(), identity(r.Context()), cluster, id)
	respond(w, http.StatusOK, out, p)
}

// GetQueue groups the pending jobs the caller may read.
func (s *Server) GetQueue(w http.ResponseWriter, r *http.Request, p api.GetQueueParams) {
	out, pr := s.core.Queue(r.Context(), identity(r.Context()), p)
	respond(w, http.StatusOK, out, pr)
}

// ListNodes lists a cluster's nodes, for operators.
func (s *Server) ListNodes(w http.ResponseWriter, r *http.Request, cluster api.ClusterName) {
	out, p := s.core.Nodes(r.Context(), identity(r.Context()), cluster)
	respond(w, http.StatusOK, out, p)
}

// ControlNode drains or resumes a node with the caller's reason.
func (s *Server) ControlNode(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, node string, action api.NodeAction) {
	var req api.NodeActionRequest
	if err := decodeBody(r, &req, false); err != nil {
		req.Reason = "" // the core says what a reason must be, after who may give one
	}
	out, p := s.core.ControlNode(r.Context(), identity(r.Context()), cluster, node, action, req.Reason)
	respond(w, http.StatusOK, out, p)
}

// GetOverview is the operators' view.
func (s *Server) GetOverview(w http.ResponseWriter, r *http.Request) {
	out, p := s.core.Overview(r.Context(), identity(r.Context()))
	respond(w, http.StatusOK, out, p)
}

// ListTemplates lists the templates, with their parameters.
func (s *Server) ListTemplates(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.core.Templates(r.Context(), identity(r.Context())))
}

// SubmitJob renders a template, checks it as job_submit.lua will, and
// submits it as the caller.
func (s *Server) SubmitJob(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeSubmission(w, r)
	if !ok {
		return
	}
	if deref(req.DryRun) {
		out, p := s.core.CheckSubmission(r.Context(), identity(r.Context()), req)
		respond(w, http.StatusOK, out, p)
		return
	}
	out, p := s.core.Submit(r.Context(), identity(r.Context()), req)
	respond(w, http.StatusCreated, out, p)
}

func decodeSubmission(w http.ResponseWriter, r *http.Request) (api.SubmissionRequest, bool) {
	var req api.SubmissionRequest
	if err := decodeBody(r, &req, false); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, api.TooLarge, "the request body is too large", "send the template's name and parameter values only")
			return req, false
		}
		writeError(w, http.StatusBadRequest, api.BadRequest, "the body is not a submission: "+err.Error(), `send {"cluster": ..., "template": ..., "params": {...}}`)
		return req, false
	}
	return req, true
}

// decodeBody reads a JSON body (v points to a struct) as the contracts
// between Strata's parts are read (internal/strictjson): an unknown
// field, a field given twice, a value of the wrong type and anything
// after the object are refused, each named with its place. An empty body
// is the zero value when empty is allowed.
func decodeBody(r *http.Request, v any, empty bool) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if empty && len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	_, err = strictjson.Decode(data, v, "want a JSON object")
	return err
}

// ListDeployments lists the deployments the caller may read.
func (s *Server) ListDeployments(w http.ResponseWriter, r *http.Request, p api.ListDeploymentsParams) {
	out, pr := s.core.Deployments(r.Context(), identity(r.Context()), p)
	respond(w, http.StatusOK, out, pr)
}

// DeployJob serves a finished job's model through its cluster's bridge.
func (s *Server) DeployJob(w http.ResponseWriter, r *http.Request) {
	var req api.DeployRequest
	if err := decodeBody(r, &req, false); err != nil {
		writeProblem(w, core.BadDeployRequest())
		return
	}
	out, p := s.core.Deploy(r.Context(), identity(r.Context()), req)
	respond(w, http.StatusOK, out, p)
}

// RollbackDeployment puts an earlier version of a deployment back.
func (s *Server) RollbackDeployment(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, name api.DeploymentName) {
	var req api.RollbackRequest
	if err := decodeBody(r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, api.BadRequest, "the body is not a rollback request: "+err.Error(),
			`send {} for the previous version, or {"to": "job-4240"}`)
		return
	}
	out, p := s.core.Rollback(r.Context(), identity(r.Context()), cluster, name, req)
	respond(w, http.StatusOK, out, p)
}

// GetDeployment is one deployment with its versions and events.
func (s *Server) GetDeployment(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, name api.DeploymentName) {
	out, pr := s.core.Deployment(r.Context(), identity(r.Context()), cluster, name)
	respond(w, http.StatusOK, out, pr)
}

// DeleteDeployment removes a deployment's objects from Kubernetes.
func (s *Server) DeleteDeployment(w http.ResponseWriter, r *http.Request, cluster api.ClusterName, name api.DeploymentName, p api.DeleteDeploymentParams) {
	out, pr := s.core.DeleteDeployment(r.Context(), identity(r.Context()), cluster, name, deref(p.DryRun))
	respond(w, http.StatusOK, out, pr)
}

// CreateSession starts a session.
func (s *Server) CreateSession(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeSubmission(w, r)
	if !ok {
		return
	}
	if deref(req.DryRun) {
		writeError(w, http.StatusBadRequest, api.BadRequest, "a session takes no dry_run", "POST /v1/submissions checks a batch template with dry_run")
		return
	}
	out, p := s.core.CreateSession(r.Context(), identity(r.Context()), req)
	s.withSessionURL(&out)
	respond(w, http.StatusCreated, out, p)
}

// ListSessions lists the caller's sessions.
func (s *Server) ListSessions(w http.ResponseWriter, r *http.Request) {
	out, p := s.core.Sessions(r.Context(), identity(r.Context()))
	for i := range out.Sessions {
		s.withSessionURL(&out.Sessions[i])
	}
	respond(w, http.StatusOK, out, p)
}

// GetSession returns one of the caller's sessions.
func (s *Server) GetSession(w http.ResponseWriter, r *http.Request, id api.SessionID) {
	out, p := s.core.Session(r.Context(), identity(r.Context()), id)
	s.withSessionURL(&out)
	respond(w, http.StatusOK, out, p)
}

// DeleteSession ends a session: its job is cancelled as the caller.
func (s *Server) DeleteSession(w http.ResponseWriter, r *http.Request, id api.SessionID) {
	out, p := s.core.EndSession(r.Context(), identity(r.Context()), id)
	respond(w, http.StatusOK, out, p)
}

// ExtendSession adds time to a session's job.
func (s *Server) ExtendSession(w http.ResponseWriter, r *http.Request, id api.SessionID) {
	var req api.SessionExtendRequest
	if err := decodeBody(r, &req, false); err != nil {
		req.Minutes = 0 // the core refuses it once the session is found
	}
	out, p := s.core.ExtendSession(r.Context(), identity(r.Context()), id, req.Minutes)
	respond(w, http.StatusOK, out, p)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ListProjects lists the caller's projects with their limits and use.
func (s *Server) ListProjects(w http.ResponseWriter, r *http.Request, p api.ListProjectsParams) {
	out, pr := s.core.Projects(r.Context(), identity(r.Context()), deref(p.Cluster))
	respond(w, http.StatusOK, out, pr)
}
