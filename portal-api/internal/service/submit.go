package service

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// ListTemplates lists the templates, with their parameters.
func (s *Server) ListTemplates(w http.ResponseWriter, r *http.Request) {
	out := api.TemplateList{Templates: []api.Template{}}
	if s.cfg.Templates != nil {
		if set := s.cfg.Templates(); set != nil {
			for _, t := range set.List() {
				out.Templates = append(out.Templates, templateOf(t))
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func templateOf(t templates.Template) api.Template {
	at := api.Template{Name: t.Name, Description: t.Description, Class: t.Class, Type: string(t.Type), Parameters: []api.TemplateParam{}}
	for _, p := range t.Parameters {
		ap := api.TemplateParam{Name: p.Name, Type: api.TemplateParamType(p.Type), Required: p.Default == nil, Default: p.Default, Min: p.Min, Max: p.Max}
		if p.Description != "" {
			ap.Description = ptr(p.Description)
		}
		if len(p.Values) > 0 {
			ap.Values = ptr(slices.Clone(p.Values))
		}
		if p.Pattern != "" {
			ap.Pattern = ptr(p.Pattern)
		}
		if len(p.Roots) > 0 {
			ap.Roots = ptr(slices.Clone(p.Roots))
		}
		at.Parameters = append(at.Parameters, ap)
	}
	return at
}

// defaultAccount is the account of the user's default project in m, else
// the policy's default account of the user.
func defaultAccount(m *tenantmap.Map, p *jobpolicy.Policy, user string) string {
	if m != nil {
		for _, t := range m.Tenants {
			for _, pr := range t.Projects {
				for _, mb := range pr.Members {
					if mb.User == user && mb.Default {
						return pr.Account
					}
				}
			}
		}
	}
	if p != nil {
		return p.Users[user]
	}
	return ""
}

// SubmitJob renders a template, checks it as job_submit.lua will, and
// submits it as the caller; the submission is audited and recorded.
func (s *Server) SubmitJob(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeSubmission(w, r)
	if !ok {
		return
	}
	out, ok := s.submit(w, r, req, submitOpts{want: templates.TypeBatch})
	if !ok {
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func decodeSubmission(w http.ResponseWriter, r *http.Request) (api.SubmissionRequest, bool) {
	var req api.SubmissionRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
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

// submitOpts is what a route adds to the one submission path.
type submitOpts struct {
	// want is the template type the route starts.
	want templates.Type
	// env is added to the job's environment (a session's id and folder).
	env []string
	// before runs once every check passed, before the audit record and
	// Slurm: an error stops the submission (500).
	before func(account string) error
	// after runs with Slurm's answer, before the route answers.
	after func(jobID int64, err error)
}

// submit renders a template, checks it as job_submit.lua will, and
// submits it as the caller, audited and recorded: the path of every
// route that starts a job. It writes every refusal itself; ok false
// means it answered.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, req api.SubmissionRequest, o submitOpts) (api.Submission, bool) {
	who := identity(r.Context())
	c, ok := s.byName[req.Cluster]
	if !ok {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no cluster %q", req.Cluster), "GET /v1/clusters lists them")
		return api.Submission{}, false
	}
	var set *templates.Set
	if s.cfg.Templates != nil {
		set = s.cfg.Templates()
	}
	if set == nil {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no template %q", req.Template), "GET /v1/templates lists them")
		return api.Submission{}, false
	}
	if t, ok := set.Get(req.Template); ok && t.Type != o.want {
		if t.Type == templates.TypeSession {
			writeError(w, http.StatusBadRequest, api.BadRequest, fmt.Sprintf("template %q starts a session", req.Template), "POST /v1/sessions starts it")
		} else {
			writeError(w, http.StatusBadRequest, api.BadRequest, fmt.Sprintf("template %q is a batch job, not a session", req.Template), "POST /v1/submissions submits it")
		}
		return api.Submission{}, false
	}
	var policy *jobpolicy.Policy
	if c.Policy != nil {
		policy = c.Policy()
	}
	if policy == nil {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q takes no submissions through the portal", req.Cluster),
			"its admins give the cluster a job_policy_file (jobpolicy.json, which strata-policy render writes)")
		return api.Submission{}, false
	}
	m := c.Tenants()
	account := deref(req.Account)
	if account == "" {
		account = defaultAccount(m, policy, who.User)
	}
	if account == "" {
		writeError(w, http.StatusBadRequest, api.BadRequest, "you have no default project on this cluster", "give the project's account")
		return api.Submission{}, false
	}
	o2, known := m.Lookup(account)
	target := rbac.Target{Tenant: o2.Tenant, Project: o2.Project}
	if !known || !rbac.Allowed(m, who.User, rbac.ReadJobs, target) {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no project account %q on cluster %q", account, req.Cluster), "GET /v1/me lists your projects")
		return api.Submission{}, false
	}
	if !rbac.Allowed(m, who.User, rbac.Submit, target) {
		writeError(w, http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not submit to %s", account), "only the project's members submit; viewers see its jobs")
		return api.Submission{}, false
	}
	params := deref(req.Params)
	spec, err := set.WithPolicy(policy).Render(req.Template, params, templates.User{Name: who.User, Account: account,
		WorkDir: strings.ReplaceAll(cmp.Or(c.WorkDir, "/tmp"), "{user}", who.User), Environment: o.env})
	var refusal *jobpolicy.Refusal
	switch {
	case errors.Is(err, templates.ErrUnknownTemplate):
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no template %q", req.Template), "GET /v1/templates lists them")
		return api.Submission{}, false
	case errors.As(err, &refusal):
		e := api.Error{Code: api.PolicyRefused, Message: refusal.Message, Hint: ptr("the policy refuses this job as job_submit would: change the parameters, or ask the project's admins")}
		if refusal.Line > 0 {
			e.PolicyLine = ptr(fmt.Sprintf("%s:%d", policy.Source, refusal.Line))
		}
		writeJSON(w, http.StatusForbidden, e)
		return api.Submission{}, false
	case err != nil:
		var details []string
		var pe *templates.ParamError
		for _, e := range unjoin(err) {
			if errors.As(e, &pe) {
				details = append(details, pe.Error())
			}
		}
		if len(details) == 0 {
			writeError(w, http.StatusInternalServerError, api.Internal, "the template does not render: "+err.Error(), "tell the portal's admins")
			return api.Submission{}, false
		}
		writeJSON(w, http.StatusBadRequest, api.Error{Code: api.BadRequest, Message: fmt.Sprintf("%d parameter values are refused", len(details)),
			Details: &details, Hint: ptr("GET /v1/templates gives each parameter's rule")})
		return api.Submission{}, false
	}
	client, err := c.Poller.Client(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q cannot be reached", req.Cluster), "try again shortly")
		return api.Submission{}, false
	}
	if o.before != nil {
		if err := o.before(account); err != nil {
			s.log.Error("not recorded: job not submitted", "cluster", req.Cluster, "template", req.Template, "error", err)
			writeError(w, http.StatusInternalServerError, api.Internal, "the submission could not be recorded, so it was not made", "try again; tell the portal's admins if it persists")
			return api.Submission{}, false
		}
	}
	detail, _ := json.Marshal(map[string]any{"account": account, "params": params})
	aid, err := s.cfg.Store.Intent(r.Context(), store.Audit{User: who.User, Via: who.Via, Cluster: req.Cluster, Action: "submit", Target: req.Template, Detail: string(detail)})
	if err != nil {
		s.log.Error("audit record not written: job not submitted", "cluster", req.Cluster, "template", req.Template, "error", err)
		if o.after != nil {
			o.after(0, err)
		}
		writeError(w, http.StatusInternalServerError, api.Internal, "the submission could not be recorded, so it was not made", "try again; tell the portal's admins if it persists")
		return api.Submission{}, false
	}
	res, err := client.Submit(r.Context(), who.User, spec)
	if err == nil {
		c.Poller.Soon() // the job shows after the next poll: make it soon
	}
	if ferr := s.cfg.Store.Finish(r.Context(), aid, err); ferr != nil {
		s.log.Error("audit result not written", "audit_id", aid, "error", ferr)
	}
	pj, _ := json.Marshal(params)
	sid, rerr := s.cfg.Store.RecordSubmission(r.Context(), store.Submission{User: who.User, Cluster: req.Cluster, Template: req.Template,
		Params: string(pj), JobID: res.JobID, AuditID: aid})
	if rerr != nil {
		s.log.Error("submission not recorded", "audit_id", aid, "job_id", res.JobID, "error", rerr)
	}
	if o.after != nil {
		o.after(res.JobID, err)
	}
	s.log.Info("job submitted through the portal", "cluster", req.Cluster, "template", req.Template, "account", account, "user", who.User,
		"job_id", res.JobID, "audit_id", aid, "ok", err == nil, "error", errString(err))
	if err != nil {
		code, ec, hint := slurmStatus(err)
		writeError(w, code, ec, fmt.Sprintf("Slurm refused the job: %s", err), hint)
		return api.Submission{}, false
	}
	out := api.Submission{Cluster: req.Cluster, Template: req.Template, Account: ptr(account), JobId: res.JobID, AuditId: aid, SubmissionId: sid}
	if res.UserMessage != "" {
		out.Message = ptr(res.UserMessage)
	}
	return out, true
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
