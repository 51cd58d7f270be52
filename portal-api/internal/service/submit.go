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
	var req api.SubmissionRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, api.TooLarge, "the request body is too large", "send the template's name and parameter values only")
			return
		}
		writeError(w, http.StatusBadRequest, api.BadRequest, "the body is not a submission: "+err.Error(), `send {"cluster": ..., "template": ..., "params": {...}}`)
		return
	}
	who := identity(r.Context())
	c, ok := s.byName[req.Cluster]
	if !ok {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no cluster %q", req.Cluster), "GET /v1/clusters lists them")
		return
	}
	var set *templates.Set
	if s.cfg.Templates != nil {
		set = s.cfg.Templates()
	}
	if set == nil {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no template %q", req.Template), "GET /v1/templates lists them")
		return
	}
	var policy *jobpolicy.Policy
	if c.Policy != nil {
		policy = c.Policy()
	}
	if policy == nil {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q takes no submissions through the portal", req.Cluster),
			"its admins give the cluster a job_policy_file (jobpolicy.json, which strata-policy render writes)")
		return
	}
	m := c.Tenants()
	account := deref(req.Account)
	if account == "" {
		account = defaultAccount(m, policy, who.User)
	}
	if account == "" {
		writeError(w, http.StatusBadRequest, api.BadRequest, "you have no default project on this cluster", "give the project's account")
		return
	}
	o, known := m.Lookup(account)
	target := rbac.Target{Tenant: o.Tenant, Project: o.Project}
	if !known || !rbac.Allowed(m, who.User, rbac.ReadJobs, target) {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no project account %q on cluster %q", account, req.Cluster), "GET /v1/me lists your projects")
		return
	}
	if !rbac.Allowed(m, who.User, rbac.Submit, target) {
		writeError(w, http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not submit to %s", account), "only the project's members submit; viewers see its jobs")
		return
	}
	params := deref(req.Params)
	spec, err := set.WithPolicy(policy).Render(req.Template, params, templates.User{Name: who.User, Account: account,
		WorkDir: strings.ReplaceAll(cmp.Or(c.WorkDir, "/tmp"), "{user}", who.User)})
	var refusal *jobpolicy.Refusal
	switch {
	case errors.Is(err, templates.ErrUnknownTemplate):
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no template %q", req.Template), "GET /v1/templates lists them")
		return
	case errors.As(err, &refusal):
		e := api.Error{Code: api.PolicyRefused, Message: refusal.Message, Hint: ptr("the policy refuses this job as job_submit would: change the parameters, or ask the project's admins")}
		if refusal.Line > 0 {
			e.PolicyLine = ptr(fmt.Sprintf("%s:%d", policy.Source, refusal.Line))
		}
		writeJSON(w, http.StatusForbidden, e)
		return
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
			return
		}
		writeJSON(w, http.StatusBadRequest, api.Error{Code: api.BadRequest, Message: fmt.Sprintf("%d parameter values are refused", len(details)),
			Details: &details, Hint: ptr("GET /v1/templates gives each parameter's rule")})
		return
	}
	client, err := c.Poller.Client(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q cannot be reached", req.Cluster), "try again shortly")
		return
	}
	detail, _ := json.Marshal(map[string]any{"account": account, "params": params})
	aid, err := s.cfg.Store.Intent(r.Context(), store.Audit{User: who.User, Via: who.Via, Cluster: req.Cluster, Action: "submit", Target: req.Template, Detail: string(detail)})
	if err != nil {
		s.log.Error("audit record not written: job not submitted", "cluster", req.Cluster, "template", req.Template, "error", err)
		writeError(w, http.StatusInternalServerError, api.Internal, "the submission could not be recorded, so it was not made", "try again; tell the portal's admins if it persists")
		return
	}
	res, err := client.Submit(r.Context(), who.User, spec)
	if ferr := s.cfg.Store.Finish(r.Context(), aid, err); ferr != nil {
		s.log.Error("audit result not written", "audit_id", aid, "error", ferr)
	}
	pj, _ := json.Marshal(params)
	sid, rerr := s.cfg.Store.RecordSubmission(r.Context(), store.Submission{User: who.User, Cluster: req.Cluster, Template: req.Template,
		Params: string(pj), JobID: res.JobID, AuditID: aid})
	if rerr != nil {
		s.log.Error("submission not recorded", "audit_id", aid, "job_id", res.JobID, "error", rerr)
	}
	s.log.Info("job submitted through the portal", "cluster", req.Cluster, "template", req.Template, "account", account, "user", who.User,
		"job_id", res.JobID, "audit_id", aid, "ok", err == nil, "error", errString(err))
	if err != nil {
		code, ec, hint := slurmStatus(err)
		writeError(w, code, ec, fmt.Sprintf("Slurm refused the job: %s", err), hint)
		return
	}
	out := api.Submission{Cluster: req.Cluster, Template: req.Template, Account: ptr(account), JobId: res.JobID, AuditId: aid, SubmissionId: sid}
	if res.UserMessage != "" {
		out.Message = ptr(res.UserMessage)
	}
	writeJSON(w, http.StatusCreated, out)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
