package core

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"context"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// Templates lists the templates, with their parameters.
func (s *Core) Templates(ctx context.Context, who auth.Identity) api.TemplateList {
	out := api.TemplateList{Templates: []api.Template{}}
	if s.cfg.Templates != nil {
		if set := s.cfg.Templates(); set != nil {
			for _, t := range set.List() {
				out.Templates = append(out.Templates, templateOf(t))
			}
		}
	}
	return out
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

// Submit renders a template, checks it as job_submit.lua will, and
// submits it as the caller; the submission is audited and recorded.
func (s *Core) Submit(ctx context.Context, who auth.Identity, req api.SubmissionRequest) (api.Submission, *Problem) {
	return s.submit(ctx, who, req, submitOpts{want: templates.TypeBatch})
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

// rendered is a job rendered from a template for the caller, ready to
// be submitted: every check but the policy's passed.
type rendered struct {
	c       Cluster
	policy  *jobpolicy.Policy
	account string
	params  map[string]string
	spec    slurmrest.JobSpec
}

// CheckSubmission is the policy's answer to a submission before it is
// made (dry_run): the template rendered for the caller and checked as
// job_submit.lua will check it; nothing is submitted or audited. A
// refusal by the policy is an answer (Accepted false, with its message
// and policy line); what the submission could not pass before the policy
// (no such cluster, template or project, the caller's rights, parameter
// values) is a problem, as for Submit.
func (s *Core) CheckSubmission(ctx context.Context, who auth.Identity, req api.SubmissionRequest) (api.SubmissionCheck, *Problem) {
	r, refusal, p := s.render(who, req, templates.TypeBatch, nil)
	if p != nil {
		return api.SubmissionCheck{}, p
	}
	out := api.SubmissionCheck{Cluster: req.Cluster, Template: req.Template, Account: r.account, DryRun: true, Accepted: refusal == nil}
	if refusal != nil {
		out.Message = ptr(refusal.Message)
		out.Refusal = refusalOf(refusal)
		if refusal.Line > 0 {
			out.PolicyLine = ptr(fmt.Sprintf("%s:%d", r.policy.Source, refusal.Line))
		}
		return out, nil
	}
	// The job as job_submit.lua lets it through: with the partition, QOS
	// and time limit the policy fills in.
	d := r.policy.Decide(who.User, jobpolicy.FromSpec(r.spec)).Job
	j := api.CheckedJob{}
	for dst, v := range map[**string]string{&j.Partition: d.Partition, &j.Qos: d.QOS, &j.Gpus: r.spec.TRESPerNode, &j.Nodes: r.spec.Nodes} {
		if v != "" {
			*dst = ptr(v)
		}
	}
	if d.TimeLimit > 0 && d.TimeLimit != jobpolicy.Unlimited {
		j.TimeLimitSeconds = ptr(d.TimeLimit * 60)
	}
	out.Job = &j
	return out, nil
}

// render renders a template for the caller and checks it as
// job_submit.lua will: the policy's refusal, or a problem of anything
// before it.
func (s *Core) render(who auth.Identity, req api.SubmissionRequest, want templates.Type, env []string) (rendered, *jobpolicy.Refusal, *Problem) {
	c, ok := s.byName[req.Cluster]
	if !ok {
		return rendered{}, nil, noCluster(req.Cluster)
	}
	var set *templates.Set
	if s.cfg.Templates != nil {
		set = s.cfg.Templates()
	}
	if set == nil {
		return rendered{}, nil, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no template %q", req.Template), "GET /v1/templates lists them")
	}
	if t, ok := set.Get(req.Template); ok && t.Type != want {
		if t.Type == templates.TypeSession {
			return rendered{}, nil, problem(http.StatusBadRequest, api.BadRequest, fmt.Sprintf("template %q starts a session", req.Template), "POST /v1/sessions starts it")
		}
		return rendered{}, nil, problem(http.StatusBadRequest, api.BadRequest, fmt.Sprintf("template %q is a batch job, not a session", req.Template), "POST /v1/submissions submits it")
	}
	var policy *jobpolicy.Policy
	if c.Policy != nil {
		policy = c.Policy()
	}
	if policy == nil {
		return rendered{}, nil, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q takes no submissions through the portal", req.Cluster),
			"its admins give the cluster a job_policy_file (jobpolicy.json, which strata-policy render writes)")
	}
	m := c.Tenants()
	account := deref(req.Account)
	if account == "" {
		account = defaultAccount(m, policy, who.User)
	}
	if account == "" {
		return rendered{}, nil, problem(http.StatusBadRequest, api.BadRequest, "you have no default project on this cluster", "give the project's account")
	}
	o2, known := m.Lookup(account)
	target := rbac.Target{Tenant: o2.Tenant, Project: o2.Project}
	if !known || !rbac.Allowed(m, who.User, rbac.ReadJobs, target) {
		return rendered{}, nil, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no project account %q on cluster %q", account, req.Cluster), "GET /v1/me lists your projects")
	}
	if !rbac.Allowed(m, who.User, rbac.Submit, target) {
		return rendered{}, nil, problem(http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not submit to %s", account), "only the project's members submit; viewers see its jobs")
	}
	params := deref(req.Params)
	spec, err := set.WithPolicy(policy).Render(req.Template, params, templates.User{Name: who.User, Account: account,
		WorkDir: strings.ReplaceAll(cmp.Or(c.WorkDir, "/tmp"), "{user}", who.User), Environment: env})
	var refusal *jobpolicy.Refusal
	switch {
	case errors.Is(err, templates.ErrUnknownTemplate):
		return rendered{}, nil, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no template %q", req.Template), "GET /v1/templates lists them")
	case errors.As(err, &refusal):
		return rendered{c: c, policy: policy, account: account, params: params}, refusal, nil
	case err != nil:
		var details []string
		var pe *templates.ParamError
		for _, e := range unjoin(err) {
			if errors.As(e, &pe) {
				details = append(details, pe.Error())
			}
		}
		if len(details) == 0 {
			return rendered{}, nil, problem(http.StatusInternalServerError, api.Internal, "the template does not render: "+err.Error(), "tell the portal's admins")
		}
		p := problem(http.StatusBadRequest, api.BadRequest, fmt.Sprintf("%d parameter values are refused", len(details)), "GET /v1/templates gives each parameter's rule")
		p.Details = details
		return rendered{}, nil, p
	}
	return rendered{c: c, policy: policy, account: account, params: params, spec: spec}, nil, nil
}

// submit renders a template, checks it as job_submit.lua will, and
// submits it as the caller, audited and recorded: the path of every
// route that starts a job.
func (s *Core) submit(ctx context.Context, who auth.Identity, req api.SubmissionRequest, o submitOpts) (api.Submission, *Problem) {
	r, refusal, p := s.render(who, req, o.want, o.env)
	if p != nil {
		if p.Code == api.Forbidden { // the caller may not submit there: a refused write
			p = s.refuse(ctx, who, req.Cluster, "submit", req.Template, p)
		}
		return api.Submission{}, p
	}
	if refusal != nil {
		p := problem(http.StatusForbidden, api.PolicyRefused, refusal.Message, "the policy refuses this job as job_submit would: change the parameters, or ask the project's admins")
		p.Refusal = refusalOf(refusal)
		if refusal.Line > 0 {
			p.PolicyLine = fmt.Sprintf("%s:%d", r.policy.Source, refusal.Line)
		}
		return api.Submission{}, s.refuse(ctx, who, req.Cluster, "submit", req.Template, p)
	}
	c, account, params, spec := r.c, r.account, r.params, r.spec
	client, err := c.Poller.Client(ctx)
	if err != nil {
		return api.Submission{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q cannot be reached", req.Cluster), "try again shortly")
	}
	if o.before != nil {
		if err := o.before(account); err != nil {
			s.log.Error("not recorded: job not submitted", "cluster", req.Cluster, "template", req.Template, "error", err)
			return api.Submission{}, problem(http.StatusInternalServerError, api.Internal, "the submission could not be recorded, so it was not made", "try again; tell the portal's admins if it persists")
		}
	}
	detail, _ := json.Marshal(map[string]any{"account": account, "params": params})
	aid, err := s.cfg.Store.Intent(ctx, store.Audit{User: who.User, Via: who.Via, Cluster: req.Cluster, Action: "submit", Target: req.Template, Detail: string(detail)})
	if err != nil {
		s.log.Error("audit record not written: job not submitted", "cluster", req.Cluster, "template", req.Template, "error", err)
		if o.after != nil {
			o.after(0, err)
		}
		return api.Submission{}, problem(http.StatusInternalServerError, api.Internal, "the submission could not be recorded, so it was not made", "try again; tell the portal's admins if it persists")
	}
	res, err := client.Submit(ctx, who.User, spec)
	if err == nil {
		c.Poller.Soon() // the job shows after the next poll: make it soon
	}
	s.settleAudit(ctx, aid, err)
	pj, _ := json.Marshal(params)
	sid, rerr := s.cfg.Store.RecordSubmission(ctx, store.Submission{User: who.User, Cluster: req.Cluster, Template: req.Template,
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
		return api.Submission{}, slurmProblem(err, fmt.Sprintf("Slurm refused the job: %s", userText(err)))
	}
	out := api.Submission{Cluster: req.Cluster, Template: req.Template, Account: ptr(account), JobId: res.JobID, AuditId: aid, SubmissionId: sid}
	if res.UserMessage != "" {
		out.Message = ptr(res.UserMessage)
	}
	return out, nil
}

// refusalOf is the policy's refusal as the API's fields; nil for one that
// names no rule.
func refusalOf(r *jobpolicy.Refusal) *api.PolicyRefusal {
	if r == nil || r.Rule == "" {
		return nil
	}
	f := r.Facts
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &api.PolicyRefusal{Rule: f.Rule, Owner: opt(f.Owner), User: opt(f.User), Class: opt(f.Class), Limit: opt(f.Limit),
		Asked: opt(f.Asked), Unit: opt(f.Unit), Item: opt(f.Item), Allowed: opt(f.Allowed)}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
