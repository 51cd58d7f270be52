package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
)

// SubmitSource is the core's submission path as the Start a job page
// uses it: the templates, the policy's answer before submitting (a dry
// run), and the submission itself, each as the caller.
type SubmitSource interface {
	Templates(ctx context.Context, id auth.Identity) (api.TemplateList, error)
	CheckSubmission(ctx context.Context, id auth.Identity, req api.SubmissionRequest) (api.SubmissionCheck, error)
	Submit(ctx context.Context, id auth.Identity, req api.SubmissionRequest) (api.Submission, error)
}

func (s coreSource) Templates(ctx context.Context, id auth.Identity) (api.TemplateList, error) {
	return s.c.Templates(ctx, id), nil
}

func (s coreSource) CheckSubmission(ctx context.Context, id auth.Identity, req api.SubmissionRequest) (api.SubmissionCheck, error) {
	c, p := s.c.CheckSubmission(ctx, id, req)
	return c, errOf(p)
}

func (s coreSource) Submit(ctx context.Context, id auth.Identity, req api.SubmissionRequest) (api.Submission, error) {
	sub, p := s.c.Submit(ctx, id, req)
	return sub, errOf(p)
}

// routeSubmit adds Start a job when the source can submit.
func (h *Handler) routeSubmit(mux *http.ServeMux) {
	if _, ok := h.cfg.Source.(SubmitSource); !ok {
		return
	}
	mux.HandleFunc("GET /submit", h.signedIn(h.submitList))
	mux.HandleFunc("GET /submit/{template}", h.signedIn(h.submitForm))
	mux.HandleFunc("POST /submit/{template}", h.signedIn(h.submitPost))
}

// projectChoice is a project the caller may submit to on one cluster:
// the form's value is "<cluster>/<account>".
type projectChoice struct {
	Value, Cluster, Tenant, Project, Account string
}

// field is a template parameter as a form field: its rules as the
// input's attributes, its value as given (or the default), and what the
// core said of it.
type field struct {
	api.TemplateParam
	ID      string
	Value   string
	Min     string
	Max     string
	Pattern string
	Help    string
	Roots   string
	Choices []string
	Problem string
}

type submitTemplate struct {
	api.Template
	Projects []projectChoice
}

type submitData struct {
	// Templates are the batch templates the caller's projects may use
	// (the list); Template is the one chosen (the form).
	Templates []submitTemplate
	Template  *submitTemplate
	Fields    []field
	Project   string
	// Check is the policy's answer to a dry run.
	Check *api.SubmissionCheck
	// CheckTime is the checked job's time limit, h:mm.
	CheckTime string
	// Problem is what the core refused, in its words, with its hint,
	// policy line and the values it refused.
	Problem *core.Problem
	// ProblemKey is the catalogue key of the refusal's heading.
	ProblemKey string
	// Refusal is the policy's refusal (of the check or the submission)
	// in the page's language; "": the policy's message is shown as it is.
	Refusal string
	// Submitted is the job just submitted: cluster and id.
	SubmittedCluster string
	SubmittedID      string
	Error            bool
	// Action is where the form posts; Session: it starts a session (no
	// check with the policy: a session takes no dry run).
	Action  string
	Session bool
}

// usableProjects are the caller's projects that may run a template of
// class: every project it holds a role in but viewer, whose classes (if
// the policy names any) include it.
func usableProjects(pl api.ProjectList, class string) []projectChoice {
	var out []projectChoice
	for _, p := range pl.Projects {
		if p.Role == nil || *p.Role == "viewer" {
			continue
		}
		if p.Classes != nil && class != "" && !slices.Contains(*p.Classes, class) {
			continue
		}
		out = append(out, projectChoice{Value: p.Cluster + "/" + p.Account, Cluster: p.Cluster, Tenant: p.Tenant, Project: p.Project, Account: p.Account})
	}
	return out
}

// submitTemplates are the batch templates with the caller's projects
// that may use each; a template no project may use is left out.
func (h *Handler) submitTemplates(r *http.Request, v visitor) ([]submitTemplate, error) {
	return h.templatesOf(r, v, "batch")
}

// templatesOf are the templates of a type ("batch", "session") with the
// caller's projects that may use each; a template no project may use is
// left out.
func (h *Handler) templatesOf(r *http.Request, v visitor, kind string) ([]submitTemplate, error) {
	src, ok := h.cfg.Source.(SubmitSource)
	if !ok {
		return nil, nil
	}
	id := identityOf(v)
	tl, err := src.Templates(r.Context(), id)
	if err != nil {
		return nil, err
	}
	pl, err := h.cfg.Source.Projects(r.Context(), id)
	if err != nil {
		return nil, err
	}
	var out []submitTemplate
	for _, t := range tl.Templates {
		if t.Type != kind {
			continue // batch jobs and sessions start from pages of their own
		}
		if ps := usableProjects(pl, t.Class); len(ps) > 0 {
			out = append(out, submitTemplate{Template: t, Projects: ps})
		}
	}
	return out, nil
}

func (h *Handler) submitList(w http.ResponseWriter, r *http.Request, v visitor) {
	ts, err := h.submitTemplates(r, v)
	if err != nil {
		h.log.Warn("start a job: templates unavailable", "user", v.sess.User, "error", err)
	}
	h.render(w, r, http.StatusOK, "submit", h.page(r, v, "submit.title", "submit", submitData{Templates: ts, Error: err != nil}))
}

// chosen is the template named in the path among the caller's, or a
// "not found" answered.
func (h *Handler) chosen(w http.ResponseWriter, r *http.Request, v visitor) (*submitTemplate, bool) {
	return h.chosenOf(w, r, v, "batch")
}

// chosenOf is chosen among the templates of a type.
func (h *Handler) chosenOf(w http.ResponseWriter, r *http.Request, v visitor, kind string) (*submitTemplate, bool) {
	ts, err := h.templatesOf(r, v, kind)
	if err != nil {
		h.log.Warn("start a job: templates unavailable", "user", v.sess.User, "error", err)
		h.problem(w, r, http.StatusServiceUnavailable, "error.unavailable.title", "error.unavailable")
		return nil, false
	}
	for i := range ts {
		if ts[i].Name == r.PathValue("template") {
			return &ts[i], true
		}
	}
	h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
	return nil, false
}

// fieldsOf are t's parameters as form fields, with the values given
// (else each default).
func fieldsOf(t api.Template, given url.Values, fromForm bool) []field {
	var out []field
	for _, p := range t.Parameters {
		f := field{TemplateParam: p, ID: "p-" + p.Name}
		switch {
		case fromForm:
			f.Value = given.Get("p." + p.Name)
		case p.Default != nil:
			f.Value = *p.Default
		}
		if p.Min != nil {
			f.Min = strconv.FormatInt(*p.Min, 10)
		}
		if p.Max != nil {
			f.Max = strconv.FormatInt(*p.Max, 10)
		}
		if p.Pattern != nil {
			// internal/templates refuses a pattern a browser would not
			// compile under the v flag, so the field checks what the
			// portal checks.
			f.Pattern = *p.Pattern
		}
		if p.Description != nil {
			f.Help = *p.Description
		}
		if p.Roots != nil {
			f.Roots = strings.Join(*p.Roots, ", ")
		}
		if p.Values != nil {
			f.Choices = *p.Values
		}
		out = append(out, f)
	}
	return out
}

func (h *Handler) submitForm(w http.ResponseWriter, r *http.Request, v visitor) {
	t, ok := h.chosen(w, r, v)
	if !ok {
		return
	}
	d := submitData{Template: t, Fields: fieldsOf(t.Template, nil, false), Project: t.Projects[0].Value, Action: "/submit/" + t.Name}
	q := r.URL.Query()
	if c, id := q.Get("cluster"), q.Get("job"); c != "" && id != "" {
		if _, err := strconv.ParseInt(id, 10, 64); err == nil {
			d.SubmittedCluster, d.SubmittedID = c, id
		}
	}
	h.render(w, r, http.StatusOK, "submit", h.page(r, v, "submit.title", "submit", d))
}

// problemKeys are the headings of the core's refusals, by their code.
var problemKeys = map[api.ErrorCode]string{
	api.PolicyRefused: "submit.problem.policy",
	api.BadRequest:    "submit.problem.values",
	api.Forbidden:     "submit.problem.forbidden",
	api.NotFound:      "submit.problem.not_found",
}

// submitPost checks (action=check) or submits the form. Whatever the
// answer, the form comes back with the values as given; a submission
// made goes to the form's own page with the job named (so a reload
// submits nothing again).
func (h *Handler) submitPost(w http.ResponseWriter, r *http.Request, v visitor) {
	t, ok := h.chosen(w, r, v)
	if !ok {
		return
	}
	src := h.cfg.Source.(SubmitSource)
	h.postForm(w, r, v, t, submitData{Action: "/submit/" + t.Name}, "submit", func(req api.SubmissionRequest, d *submitData) (string, error) {
		if r.PostFormValue("action") == "check" {
			c, err := src.CheckSubmission(r.Context(), identityOf(v), req)
			if err == nil {
				d.Check = &c
				d.Refusal = refusalText(v.l, c.Refusal)
				if c.Job != nil {
					d.CheckTime = clock(c.Job.TimeLimitSeconds)
				}
			}
			return "", err
		}
		sub, err := src.Submit(r.Context(), identityOf(v), req)
		if err != nil {
			return "", err
		}
		h.log.Info("job submitted from the pages", "user", v.sess.User, "cluster", sub.Cluster, "job_id", sub.JobId, "template", t.Name)
		return fmt.Sprintf("/submit/%s?cluster=%s&job=%d", url.PathEscape(t.Name), url.QueryEscape(sub.Cluster), sub.JobId), nil
	})
}

// postForm reads a template's form (the project, each parameter) into a
// request for send, which checks or starts it. send's redirect ends the
// request there; else the page comes back with the values as given and
// what the core said: its refusal beside the field it refused.
func (h *Handler) postForm(w http.ResponseWriter, r *http.Request, v visitor, t *submitTemplate, d submitData, page string,
	send func(api.SubmissionRequest, *submitData) (redirect string, err error)) {
	if err := r.ParseForm(); err != nil {
		h.problem(w, r, http.StatusBadRequest, "error.not_found.title", "error.not_found")
		return
	}
	d.Template, d.Fields, d.Project = t, fieldsOf(t.Template, r.PostForm, true), r.PostFormValue("project")
	var choice *projectChoice
	for i := range t.Projects {
		if t.Projects[i].Value == d.Project {
			choice = &t.Projects[i]
		}
	}
	code := http.StatusOK
	params := map[string]string{}
	for _, f := range d.Fields {
		if f.Value != "" {
			params[f.Name] = f.Value
		}
	}
	var err error
	if choice == nil {
		// Not one of the caller's projects for this template: the core
		// is not asked, and nothing tells whether it exists.
		d.Problem = &core.Problem{Status: http.StatusNotFound, Code: api.NotFound, Message: "no such project of yours for this template"}
	} else {
		req := api.SubmissionRequest{Cluster: choice.Cluster, Account: &choice.Account, Template: t.Name, Params: &params}
		var to string
		if to, err = send(req, &d); err == nil && to != "" {
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
	}
	if p := core.AsProblem(err); p != nil {
		d.Problem = p
	}
	if d.Problem != nil {
		code = d.Problem.Status
		if code < 400 {
			code = http.StatusBadRequest
		}
		d.ProblemKey = problemKeys[d.Problem.Code]
		d.Refusal = refusalText(v.l, d.Problem.Refusal)
		if d.ProblemKey == "" {
			d.ProblemKey = "submit.problem.other"
		}
		// A refused value is said beside its field.
		for _, det := range d.Problem.Details {
			for i := range d.Fields {
				if rest, ok := strings.CutPrefix(det, "parameter "+d.Fields[i].Name+": "); ok {
					d.Fields[i].Problem = rest
				}
			}
		}
	}
	title, nav := "submit.title", "submit"
	if d.Session {
		title, nav = "session.start.title", "sessions"
	}
	h.render(w, r, code, page, h.page(r, v, title, nav, d))
}
