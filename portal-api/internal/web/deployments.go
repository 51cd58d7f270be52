package web

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
)

// DeploySource is what the deployments pages ask of the core: the
// deployments the caller may read, one with its versions, and deploy,
// rollback and delete as the caller. The core asks rbac and the cluster's bridge,
// as for the API.
type DeploySource interface {
	Deployments(ctx context.Context, id auth.Identity) (api.DeploymentList, error)
	Deployment(ctx context.Context, id auth.Identity, cluster, name string) (api.DeploymentDetail, error)
	Rollback(ctx context.Context, id auth.Identity, cluster, name, to string) error
	DeleteDeployment(ctx context.Context, id auth.Identity, cluster, name string) error
	// Deploy serves a finished job's model (name: for a job that did not
	// ask to be served), or with dry says what it would do.
	Deploy(ctx context.Context, id auth.Identity, cluster string, job int64, name string, dry bool) (api.DeployResult, error)
}

func (s coreSource) Deployments(ctx context.Context, id auth.Identity) (api.DeploymentList, error) {
	l, p := s.c.Deployments(ctx, id, api.ListDeploymentsParams{})
	return l, errOf(p)
}

func (s coreSource) Deployment(ctx context.Context, id auth.Identity, cluster, name string) (api.DeploymentDetail, error) {
	d, p := s.c.Deployment(ctx, id, cluster, name)
	return d, errOf(p)
}

func (s coreSource) Rollback(ctx context.Context, id auth.Identity, cluster, name, to string) error {
	req := api.RollbackRequest{}
	if to != "" {
		req.To = &to
	}
	_, p := s.c.Rollback(ctx, id, cluster, name, req)
	return errOf(p)
}

func (s coreSource) DeleteDeployment(ctx context.Context, id auth.Identity, cluster, name string) error {
	_, p := s.c.DeleteDeployment(ctx, id, cluster, name, false)
	return errOf(p)
}

func (s coreSource) Deploy(ctx context.Context, id auth.Identity, cluster string, job int64, name string, dry bool) (api.DeployResult, error) {
	req := api.DeployRequest{Cluster: cluster, Job: job}
	if name != "" {
		req.Name = &name
	}
	if dry {
		req.DryRun = &dry
	}
	res, p := s.c.Deploy(ctx, id, req)
	return res, errOf(p)
}

func (h *Handler) routeDeployments(mux *http.ServeMux) {
	if _, ok := h.cfg.Source.(DeploySource); !ok {
		return
	}
	mux.HandleFunc("GET /deployments", h.signedIn(h.deploymentsPage))
	mux.HandleFunc("GET /deployments/{cluster}/{name}", h.signedIn(h.deploymentPage))
	mux.HandleFunc("GET /deployments/{cluster}/{name}/confirm/{action}", h.signedIn(h.deploymentConfirm))
	mux.HandleFunc("POST /deployments/{cluster}/{name}/{action}", h.signedIn(h.deploymentAction))
	mux.HandleFunc("GET /jobs/{cluster}/{id}/serve", h.signedIn(h.serveForm))
	mux.HandleFunc("POST /jobs/{cluster}/{id}/serve", h.signedIn(h.serveModel))
}

// deploymentGroup is one project's deployments on one cluster.
type deploymentGroup struct {
	Cluster, Tenant, Project string
	Deployments              []api.Deployment
}

type deploymentsData struct {
	Groups      []deploymentGroup
	Unavailable []string
	Error       bool
	Done        string
}

func (h *Handler) deploymentsPage(w http.ResponseWriter, r *http.Request, v visitor) {
	l, err := h.cfg.Source.(DeploySource).Deployments(r.Context(), identityOf(v))
	d := deploymentsData{Error: err != nil}
	if err != nil {
		h.log.Warn("deployments unavailable", "user", v.sess.User, "error", err)
	}
	if l.UnavailableClusters != nil {
		d.Unavailable = *l.UnavailableClusters
	}
	// The core lists them by cluster and name: group by project.
	at := map[[3]string]int{}
	for _, dep := range l.Deployments {
		k := [3]string{dep.Cluster, dep.Tenant, dep.Project}
		i, ok := at[k]
		if !ok {
			i = len(d.Groups)
			at[k] = i
			d.Groups = append(d.Groups, deploymentGroup{Cluster: dep.Cluster, Tenant: dep.Tenant, Project: dep.Project})
		}
		d.Groups[i].Deployments = append(d.Groups[i].Deployments, dep)
	}
	if r.URL.Query().Get("done") == "delete" {
		d.Done = "deploy.done.delete"
	}
	h.render(w, r, http.StatusOK, "deployments", h.page(r, v, "deploy.title", "deployments", d))
}

type deploymentData struct {
	D api.DeploymentDetail
	// Previous is the version a plain rollback puts back: the newest
	// one before the current that rolled out; "" for none.
	Previous string
	Done     string
	// MayChange: the caller's role lets them roll back and delete (the
	// core decides; a viewer is not offered the buttons).
	MayChange bool
}

// mayChange says whether the caller's roles (their projects on the
// deployment's cluster) let them change it, as rbac's deploy models
// does: a member of its project, or an admin of its tenant or cluster.
func mayChange(pl api.ProjectList, d api.Deployment) bool {
	for _, p := range pl.Projects {
		if p.Cluster != d.Cluster || p.Tenant != d.Tenant || p.Role == nil {
			continue
		}
		switch *p.Role {
		case "tenant-admin", "cluster-admin":
			return true
		case "member":
			if d.Project != "" && p.Project == d.Project {
				return true
			}
		}
	}
	return false
}

// deploymentOf is the caller's deployment of the path, or the page of
// one that is not there (another tenant's is the same "not found").
func (h *Handler) deploymentOf(w http.ResponseWriter, r *http.Request, v visitor) (api.DeploymentDetail, bool) {
	d, err := h.cfg.Source.(DeploySource).Deployment(r.Context(), identityOf(v), r.PathValue("cluster"), r.PathValue("name"))
	switch core.StatusOf(err) {
	case 0:
		return d, true
	case http.StatusNotFound:
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
	default:
		h.log.Warn("deployment unavailable", "user", v.sess.User, "error", err)
		h.problem(w, r, http.StatusServiceUnavailable, "error.unavailable.title", "error.unavailable")
	}
	return api.DeploymentDetail{}, false
}

func previous(d api.DeploymentDetail) string {
	seen := false
	for i := len(d.Versions) - 1; i >= 0; i-- {
		v := d.Versions[i]
		if v.Current {
			seen = true
			continue
		}
		if seen && v.Outcome == "ready" {
			return v.Version
		}
	}
	return ""
}

func (h *Handler) deploymentPage(w http.ResponseWriter, r *http.Request, v visitor) {
	d, ok := h.deploymentOf(w, r, v)
	if !ok {
		return
	}
	data := deploymentData{D: d, Previous: previous(d)}
	if pl, err := h.cfg.Source.Projects(r.Context(), identityOf(v)); err == nil {
		data.MayChange = mayChange(pl, d.Deployment)
	}
	switch r.URL.Query().Get("done") {
	case "rollback", "deploy":
		data.Done = "deploy.done." + r.URL.Query().Get("done")
	}
	h.render(w, r, http.StatusOK, "deployment", h.page(r, v, "deploy.detail.title", "deployments", data))
}

// versionRE is a version a rollback names.
var versionRE = regexp.MustCompile(`^job-[0-9]{1,19}$`)

type deploymentConfirmData struct {
	D      api.Deployment
	Action string // rollback or delete
	To     string // the version a rollback puts back
}

// deploymentConfirm asks before a rollback (to a version of the
// deployment's, ?to=job-<id>) or a delete.
func (h *Handler) deploymentConfirm(w http.ResponseWriter, r *http.Request, v visitor) {
	action, to := r.PathValue("action"), r.URL.Query().Get("to")
	if action != "rollback" && action != "delete" || action == "rollback" && !versionRE.MatchString(to) {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return
	}
	d, ok := h.deploymentOf(w, r, v)
	if !ok {
		return
	}
	if action == "rollback" && !hasVersion(d, to) {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return
	}
	h.render(w, r, http.StatusOK, "deployment_confirm", h.page(r, v, "deploy.confirm.title", "deployments",
		deploymentConfirmData{D: d.Deployment, Action: action, To: to}))
}

func hasVersion(d api.DeploymentDetail, version string) bool {
	for _, v := range d.Versions {
		if v.Version == version && !v.Current {
			return true
		}
	}
	return false
}

// deploymentAction rolls back or deletes, once confirmed, as the caller:
// the core asks rbac (deploy models) and audits it.
func (h *Handler) deploymentAction(w http.ResponseWriter, r *http.Request, v visitor) {
	action, to := r.PathValue("action"), r.PostFormValue("to")
	if action != "rollback" && action != "delete" {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return
	}
	if r.PostFormValue("confirm") != "yes" || action == "rollback" && !versionRE.MatchString(to) {
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "deploy.confirm.missing")
		return
	}
	src := h.cfg.Source.(DeploySource)
	cluster, name := r.PathValue("cluster"), r.PathValue("name")
	var err error
	if action == "rollback" {
		err = src.Rollback(r.Context(), identityOf(v), cluster, name, to)
	} else {
		err = src.DeleteDeployment(r.Context(), identityOf(v), cluster, name)
	}
	if err != nil {
		h.log.Info("deployment action refused", "user", v.sess.User, "cluster", cluster, "name", name, "action", action, "error", err)
		switch core.StatusOf(err) {
		case http.StatusNotFound:
			h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		case http.StatusForbidden:
			h.problem(w, r, http.StatusForbidden, "error.forbidden.title", "deploy.forbidden")
		default:
			h.problem(w, r, http.StatusBadGateway, "error.unavailable.title", "deploy.refused")
		}
		return
	}
	if action == "delete" {
		http.Redirect(w, r, "/deployments?done=delete", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/deployments/"+url.PathEscape(cluster)+"/"+url.PathEscape(name)+"?done=rollback", http.StatusSeeOther)
}

// when is a time as the deployments pages show it.
func when(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// serveData is the page that serves a finished job's model: the name
// asked, and the bridge's plan (a check) or its refusal.
type serveData struct {
	Job     api.Job
	Name    string
	Plan    *api.DeployResult
	Problem *core.Problem
}

// serveForm asks how to serve a job's model: a name for a job that did
// not ask for one, then a check (the bridge's dry run) or the deploy.
func (h *Handler) serveForm(w http.ResponseWriter, r *http.Request, v visitor) {
	if j, ok := h.jobOf(w, r, v); ok {
		h.render(w, r, http.StatusOK, "job_serve", h.page(r, v, "serve.title", "jobs", serveData{Job: j}))
	}
}

// serveModel checks (action=check: the bridge's dry run, which changes
// nothing) or deploys the job's model as the caller: the core asks rbac
// (deploy models), that the job completed, and audits the deploy. A
// deploy leads to its deployment's page; a refusal comes back on the
// form in the core's words.
func (h *Handler) serveModel(w http.ResponseWriter, r *http.Request, v visitor) {
	j, ok := h.jobOf(w, r, v)
	if !ok {
		return
	}
	action, name := r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("name"))
	if action != "check" && action != "deploy" {
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "serve.missing")
		return
	}
	d := serveData{Job: j, Name: name}
	res, err := h.cfg.Source.(DeploySource).Deploy(r.Context(), identityOf(v), j.Cluster, j.Id, name, action == "check")
	if err != nil {
		h.log.Info("model not served", "user", v.sess.User, "cluster", j.Cluster, "job_id", j.Id, "dry_run", action == "check", "error", err)
		d.Problem = core.AsProblem(err)
		h.render(w, r, d.Problem.Status, "job_serve", h.page(r, v, "serve.title", "jobs", d))
		return
	}
	if action == "check" {
		d.Plan = &res
		h.render(w, r, http.StatusOK, "job_serve", h.page(r, v, "serve.title", "jobs", d))
		return
	}
	http.Redirect(w, r, "/deployments/"+url.PathEscape(j.Cluster)+"/"+url.PathEscape(res.Name)+"?done=deploy", http.StatusSeeOther)
}
