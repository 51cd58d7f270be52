package web

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/svgchart"
)

// Source is the portal's core as the pages use it: every answer is for
// the caller, decided by the same rbac.Allowed as the API's, in the API's
// own types. The pages reach data no other way.
type Source interface {
	Me(ctx context.Context, id auth.Identity) (api.Me, error)
	Jobs(ctx context.Context, id auth.Identity) (api.JobPage, error)
	Job(ctx context.Context, id auth.Identity, cluster string, job int64) (api.Job, error)
	JobGPU(ctx context.Context, id auth.Identity, cluster string, job int64) (api.JobGpuUse, error)
	JobOutput(ctx context.Context, id auth.Identity, cluster string, job int64) (api.JobOutput, error)
	JobReclaim(ctx context.Context, id auth.Identity, cluster string, job int64) (api.Reclaim, error)
	Queue(ctx context.Context, id auth.Identity) (api.Queue, error)
	Control(ctx context.Context, id auth.Identity, cluster string, job int64, action api.JobAction) error
	Overview(ctx context.Context, id auth.Identity) (api.Overview, error)
	Projects(ctx context.Context, id auth.Identity) (api.ProjectList, error)
	JobHistory(ctx context.Context, id auth.Identity, p api.ListJobHistoryParams) (api.JobHistory, error)
}

func num(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }

// word is the catalogue's word for key+"."+w, or w itself when there is
// none (a kind or unit added later shows in the API's words).
func word(l i18n.L, group, w string) string {
	k := strings.Join([]string{"reason", group, strings.ToLower(strings.ReplaceAll(w, "-", "_"))}, ".")
	if i18n.Has(k) {
		return l.T(k)
	}
	return w
}

// why is a pending job's reason in the page's language: from the limit's
// fields when the API gives them, else the API's English words.
func why(l i18n.L, r *api.Reason) string {
	if r == nil {
		return ""
	}
	if lim := r.Limit; lim != nil && lim.Used != nil && lim.Limit != nil && lim.Asked != nil {
		return l.T("reason.limit", word(l, "kind", lim.Kind), lim.Level, num(*lim.Used), num(*lim.Limit),
			word(l, "unit", lim.Unit), num(*lim.Asked))
	}
	switch {
	case r.Text != nil:
		return *r.Text
	case r.Meaning != nil:
		return *r.Meaning
	}
	return r.Slurm
}

// Actions are the job controls, each confirmed on a page of its own.
var Actions = []api.JobAction{api.Cancel, api.Hold, api.Release, api.Requeue}

func identityOf(v visitor) auth.Identity { return auth.Identity{User: v.sess.User, Via: v.sess.Via} }

func (h *Handler) routeData(mux *http.ServeMux) {
	mux.HandleFunc("GET /jobs", h.signedIn(h.jobs))
	mux.HandleFunc("GET /jobs/finished", h.signedIn(h.finished))
	mux.HandleFunc("GET /jobs/{cluster}/{id}", h.signedIn(h.job))
	mux.HandleFunc("GET /jobs/{cluster}/{id}/confirm/{action}", h.signedIn(h.confirm))
	mux.HandleFunc("POST /jobs/{cluster}/{id}/{action}", h.signedIn(h.control))
	mux.HandleFunc("GET /operator", h.signedIn(h.operator))
	h.routeSubmit(mux)
	h.routeDeployments(mux)
	h.routeOperator(mux)
}

// jobRow is a job as the list shows it.
type jobRow struct {
	api.Job
	GPUs     int
	TimeLeft string
	// Why is a pending job's reason in the page's language.
	Why string
	// Position is a pending job's place in its partition's queue; 0:
	// not known.
	Position int
}

func clock(secs *int64) string {
	if secs == nil {
		return "–"
	}
	d := time.Duration(*secs) * time.Second
	return fmt.Sprintf("%d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

type jobsData struct {
	Rows  []jobRow
	Stale []string
	Error bool
}

func (h *Handler) jobsData(r *http.Request, v visitor) jobsData {
	id := identityOf(v)
	page, err := h.cfg.Source.Jobs(r.Context(), id)
	if err != nil {
		h.log.Warn("jobs page: jobs unavailable", "user", id.User, "error", err)
		return jobsData{Error: true}
	}
	pos := map[string]int{}
	if q, err := h.cfg.Source.Queue(r.Context(), id); err == nil {
		for _, g := range q.Groups {
			if g.Jobs == nil {
				continue
			}
			for _, j := range *g.Jobs {
				if j.Position != nil {
					pos[g.Cluster+"/"+strconv.FormatInt(j.Id, 10)] = *j.Position
				}
			}
		}
	}
	d := jobsData{}
	if page.StaleClusters != nil {
		d.Stale = *page.StaleClusters
	}
	for _, j := range page.Jobs {
		if j.User != id.User {
			continue // "my jobs": a tenant admin sees the tenant's on the operator screen
		}
		d.Rows = append(d.Rows, jobRow{Job: j, GPUs: len(j.Gpus), TimeLeft: clock(j.TimeLeftSeconds), Why: why(v.l, j.Reason),
			Position: pos[j.Cluster+"/"+strconv.FormatInt(j.Id, 10)]})
	}
	return d
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request, v visitor) {
	p := h.page(r, v, "jobs.title", "jobs", h.jobsData(r, v))
	if r.URL.Query().Get("fragment") == "1" {
		if err := h.pages.Fragment(w, "jobs", "jobs_table", p); err != nil {
			h.log.Error("fragment not rendered", "error", err)
		}
		return
	}
	h.render(w, r, http.StatusOK, "jobs", p)
}

type jobData struct {
	Job      api.Job
	Why      string
	GPUs     int
	TimeLeft string
	TimeUsed string
	Chart    template.HTML
	Samples  []api.GpuPoint
	GPUError bool
	Output   string
	// Reclaim is what reclaimd decided about the job, newest last: each
	// decision's time, action, reason and outcome (reclaimd's record).
	Reclaim []reclaimRow
	Actions []api.JobAction
	Done    string
	// Serve offers to serve the model of a completed job, on a cluster
	// whose bridge answered; Served are the deployments serving it now.
	Serve  bool
	Served []api.Deployment
}

func (h *Handler) jobOf(w http.ResponseWriter, r *http.Request, v visitor) (api.Job, bool) {
	jobID, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return api.Job{}, false
	}
	j, err := h.cfg.Source.Job(r.Context(), identityOf(v), r.PathValue("cluster"), jobID)
	if err != nil {
		// Not found and not allowed look the same: no job of another
		// tenant is confirmed to exist.
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return api.Job{}, false
	}
	return j, true
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request, v visitor) {
	j, ok := h.jobOf(w, r, v)
	if !ok {
		return
	}
	id := identityOf(v)
	d := jobData{Job: j, Why: why(v.l, j.Reason), GPUs: len(j.Gpus), TimeLeft: clock(j.TimeLeftSeconds), TimeUsed: clock(j.TimeUsedSeconds), Actions: Actions,
		Done: r.URL.Query().Get("done")}
	if j.GpuHours != nil {
		d.Actions = nil // slurmdbd's record of a job slurmctld has forgotten: nothing to control
	}
	if _, ok := h.cfg.Source.(DeploySource); ok && j.Served != nil && j.GpuHours == nil {
		d.Served = *j.Served
		d.Serve = j.State == "COMPLETED"
	}
	if len(j.Gpus) > 0 {
		use, err := h.cfg.Source.JobGPU(r.Context(), id, j.Cluster, j.Id)
		if err != nil {
			d.GPUError = true
		} else {
			d.Chart, d.Samples = h.chart(v, use)
		}
	}
	if out, err := h.cfg.Source.JobOutput(r.Context(), id, j.Cluster, j.Id); err == nil && out.Stdout.Tail != nil {
		d.Output = *out.Stdout.Tail
	}
	if rec, err := h.cfg.Source.JobReclaim(r.Context(), id, j.Cluster, j.Id); err == nil {
		for _, dec := range rec.Decisions {
			d.Reclaim = append(d.Reclaim, reclaimRow{At: str(dec["decided_at"]), Action: str(dec["action"]), Reason: str(dec["reason"]),
				Outcome: str(dec["outcome"])})
		}
	}
	h.render(w, r, http.StatusOK, "job", h.page(r, v, "job.title", "jobs", d))
}

// chart draws a job's GPU use: the mean boldest, then each GPU.
func (h *Handler) chart(v visitor, use api.JobGpuUse) (template.HTML, []api.GpuPoint) {
	toSeries := func(s api.GpuSeries) svgchart.Series {
		out := svgchart.Series{Name: s.Gpu}
		for _, p := range s.Points {
			out.Points = append(out.Points, svgchart.Point{T: p.Time, V: p.Util})
		}
		return out
	}
	c := svgchart.Chart{ID: fmt.Sprintf("gpu-%d", use.JobId), Series: []svgchart.Series{toSeries(use.Mean)}}
	for _, g := range use.Gpus {
		c.Series = append(c.Series, toSeries(g))
	}
	st := svgchart.StatsOf(c.Series[0])
	c.Title = v.l.T("chart.title", strconv.FormatInt(use.JobId, 10))
	if st.Samples == 0 {
		c.Desc = v.l.T("chart.empty")
	} else {
		c.Desc = v.l.T("chart.desc", math.Round(st.Mean), math.Round(st.Min), math.Round(st.Max), len(use.Gpus), st.Samples)
	}
	svg, err := svgchart.Render(c)
	if err != nil {
		h.log.Error("chart not drawn", "error", err)
		return "", nil
	}
	return svg, use.Mean.Points
}

// reclaimRow is one of reclaimd's decisions about a job.
type reclaimRow struct{ At, Action, Reason, Outcome string }

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

type confirmData struct {
	Job    api.Job
	Action api.JobAction
}

func actionOf(s string) (api.JobAction, bool) {
	for _, a := range Actions {
		if string(a) == s {
			return a, true
		}
	}
	return "", false
}

// confirm asks before a control: a page with the job and one button, so
// that the question works without JavaScript.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, v visitor) {
	a, ok := actionOf(r.PathValue("action"))
	if !ok {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return
	}
	j, ok := h.jobOf(w, r, v)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "confirm", h.page(r, v, "job.confirm.title", "jobs", confirmData{Job: j, Action: a}))
}

func (h *Handler) control(w http.ResponseWriter, r *http.Request, v visitor) {
	a, ok := actionOf(r.PathValue("action"))
	if !ok || r.PostFormValue("confirm") != "yes" {
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "job.confirm.missing")
		return
	}
	j, ok := h.jobOf(w, r, v)
	if !ok {
		return
	}
	if err := h.cfg.Source.Control(r.Context(), identityOf(v), j.Cluster, j.Id, a); err != nil {
		h.log.Info("job control refused", "user", v.sess.User, "cluster", j.Cluster, "job_id", j.Id, "action", a, "error", err)
		h.problem(w, r, http.StatusForbidden, "error.forbidden.title", "job.control.refused")
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/jobs/%s/%d?done=%s", j.Cluster, j.Id, a), http.StatusSeeOther)
}

type operatorData struct {
	Overview api.Overview
	// Lists are the cross-cluster total and the stale clusters' ages.
	Lists operatorLists
	Error bool
}

func (h *Handler) operator(w http.ResponseWriter, r *http.Request, v visitor) {
	ov, err := h.cfg.Source.Overview(r.Context(), identityOf(v))
	if core.StatusOf(err) == http.StatusForbidden {
		h.problem(w, r, http.StatusForbidden, "error.forbidden.title", "operator.forbidden")
		return
	}
	for i := range ov.Clusters {
		// An empty list shows as no table at all.
		c := &ov.Clusters[i]
		if c.NodesUnavailable != nil && len(*c.NodesUnavailable) == 0 {
			c.NodesUnavailable = nil
		}
		if c.GpuUse != nil && c.GpuUse.IdleGpus != nil && len(*c.GpuUse.IdleGpus) == 0 {
			c.GpuUse.IdleGpus = nil
		}
	}
	d := operatorData{Overview: ov, Lists: h.operatorExtras(ov), Error: err != nil}
	p := h.page(r, v, "operator.title", "operator", d)
	if r.URL.Query().Get("fragment") == "1" {
		if err := h.pages.Fragment(w, "operator", "operator_body", p); err != nil {
			h.log.Error("fragment not rendered", "error", err)
		}
		return
	}
	h.render(w, r, http.StatusOK, "operator", p)
}

type homeData struct {
	Me       api.Me
	Projects []api.Project
	Running  int
	Pending  int
	Error    bool
}

func (h *Handler) homeData(r *http.Request, v visitor) homeData {
	id := identityOf(v)
	me, err := h.cfg.Source.Me(r.Context(), id)
	if err != nil {
		return homeData{Error: true}
	}
	d := homeData{Me: me}
	if pl, err := h.cfg.Source.Projects(r.Context(), id); err == nil {
		d.Projects = pl.Projects
	}
	if page, err := h.cfg.Source.Jobs(r.Context(), id); err == nil {
		for _, j := range page.Jobs {
			if j.User != id.User {
				continue
			}
			switch j.State {
			case "RUNNING":
				d.Running++
			case "PENDING":
				d.Pending++
			}
		}
	}
	return d
}
