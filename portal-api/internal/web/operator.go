package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
)

// OperatorSource is what the operator screen adds to Source: the lists
// behind its numbers (jobs by filter, a cluster's nodes), a node's drain
// and resume, and each cluster's snapshot age. The core decides who may
// read or do each, as for the API.
type OperatorSource interface {
	JobsWhere(ctx context.Context, id auth.Identity, filter api.ListJobsParams) (api.JobPage, error)
	Nodes(ctx context.Context, id auth.Identity, cluster string) (api.NodeList, error)
	ControlNode(ctx context.Context, id auth.Identity, cluster, node string, action api.NodeAction, reason string) error
	// Ages is each cluster's snapshot age; a cluster never read is absent.
	Ages() map[string]time.Duration
}

func (s coreSource) JobsWhere(ctx context.Context, id auth.Identity, filter api.ListJobsParams) (api.JobPage, error) {
	if filter.Limit == nil {
		filter.Limit = ptrTo(maxJobs)
	}
	page, p := s.c.Jobs(ctx, id, filter)
	return page, errOf(p)
}

func (s coreSource) Nodes(ctx context.Context, id auth.Identity, cluster string) (api.NodeList, error) {
	l, p := s.c.Nodes(ctx, id, cluster)
	return l, errOf(p)
}

func (s coreSource) ControlNode(ctx context.Context, id auth.Identity, cluster, node string, action api.NodeAction, reason string) error {
	_, p := s.c.ControlNode(ctx, id, cluster, node, action, reason)
	return errOf(p)
}

func (s coreSource) Ages() map[string]time.Duration {
	health, _ := s.c.Health()
	out := map[string]time.Duration{}
	for name, h := range health {
		if secs, ok := h["age_seconds"].(float64); ok {
			out[name] = time.Duration(secs * float64(time.Second))
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// routeOperator adds the lists behind the operator screen's numbers and
// the nodes' controls when the source has them.
func (h *Handler) routeOperator(mux *http.ServeMux) {
	if _, ok := h.cfg.Source.(OperatorSource); !ok {
		return
	}
	mux.HandleFunc("GET /operator/jobs", h.signedIn(h.operatorJobs))
	mux.HandleFunc("GET /operator/nodes/{cluster}", h.signedIn(h.operatorNodes))
	mux.HandleFunc("GET /operator/nodes/{cluster}/{node}/confirm/{action}", h.signedIn(h.nodeConfirm))
	mux.HandleFunc("POST /operator/nodes/{cluster}/{node}/{action}", h.signedIn(h.nodeControl))
}

// totals are the operator screen's numbers summed over its clusters.
type totals struct {
	Clusters, GpusTotal, GpusAllocated, InUse, Idle, Running, Pending, Deployments, Replicas int
	HasTotal, HasUse, HasDeployments                                                         bool
}

func totalOf(ov api.Overview) totals {
	var t totals
	for _, c := range ov.Clusters {
		t.Clusters++
		if c.GpusTotal != nil {
			t.GpusTotal += *c.GpusTotal
			t.HasTotal = true
		}
		t.GpusAllocated += c.GpusAllocated
		t.Running += c.Running
		t.Pending += c.Pending
		if c.GpuUse != nil {
			t.InUse += c.GpuUse.InUse
			t.Idle += c.GpuUse.Idle
			t.HasUse = true
		}
		if c.Deployments != nil {
			t.Deployments += *c.Deployments
			t.HasDeployments = true
		}
		if c.Replicas != nil {
			t.Replicas += *c.Replicas
		}
	}
	return t
}

// ageText is how long ago a stale cluster was last read, in minutes (or
// hours past two).
func ageText(d time.Duration) (n int, unit string) {
	if d >= 2*time.Hour {
		return int(d.Hours()), "h"
	}
	return int(d.Minutes()), "m"
}

type staleAge struct {
	N    int
	Unit string
}

// operatorLists are the operator screen's additions for the template.
type operatorLists struct {
	Total totals
	// Age is each stale cluster's snapshot age.
	Age map[string]staleAge
}

func (h *Handler) operatorExtras(ov api.Overview) operatorLists {
	x := operatorLists{Total: totalOf(ov), Age: map[string]staleAge{}}
	if src, ok := h.cfg.Source.(OperatorSource); ok {
		ages := src.Ages()
		for _, c := range ov.Clusters {
			if d, ok := ages[c.Cluster]; ok && c.Stale {
				n, u := ageText(d)
				x.Age[c.Cluster] = staleAge{N: n, Unit: u}
			}
		}
	}
	return x
}

// jobFilter is the filter of /operator/jobs, from its query: cluster,
// tenant, project, user, state, class; and its page: limit (1 to
// maxJobs, maxJobs by default) and offset, as the API's.
type jobFilter struct {
	Cluster, Tenant, Project, User, State, Class string
	Limit, Offset                                int
}

// pageOf reads limit and offset from q: a value that is no number, or
// out of range, is the default, as a person who edits the address
// expects a page rather than an error.
func pageOf(q url.Values) (limit, offset int) {
	limit, offset = maxJobs, 0
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n >= 1 && n <= maxJobs {
		limit = n
	}
	if n, err := strconv.Atoi(q.Get("offset")); err == nil && n >= 0 {
		offset = n
	}
	return limit, offset
}

// at is the address of the filter's page that starts at offset.
func (f jobFilter) at(offset int) string {
	q := url.Values{}
	for _, kv := range [][2]string{{"cluster", f.Cluster}, {"tenant", f.Tenant}, {"project", f.Project}, {"user", f.User}, {"state", f.State}, {"class", f.Class}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	if f.Limit != maxJobs {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return "/operator/jobs?" + q.Encode()
}

func (f jobFilter) params() api.ListJobsParams {
	p := api.ListJobsParams{Limit: ptrTo(f.Limit), Offset: ptrTo(f.Offset)}
	for dst, v := range map[**string]string{&p.Cluster: f.Cluster, &p.Tenant: f.Tenant, &p.Project: f.Project, &p.User: f.User, &p.State: f.State, &p.Class: f.Class} {
		if v != "" {
			*dst = ptrTo(v)
		}
	}
	return p
}

// Words are the filter as "key value" pairs, for the page's heading.
func (f jobFilter) Words() []string {
	var out []string
	for _, kv := range [][2]string{{"cluster", f.Cluster}, {"tenant", f.Tenant}, {"project", f.Project}, {"user", f.User}, {"state", f.State}, {"class", f.Class}} {
		if kv[1] != "" {
			out = append(out, kv[0]+"="+kv[1])
		}
	}
	return out
}

type operatorJobsData struct {
	Filter jobFilter
	Rows   []jobRow
	Total  int
	Error  bool
	// First and Last number the rows shown (from 1), when the filter
	// holds more jobs than one page; Prev and Next are the pages beside
	// it ("" where there is none).
	First, Last int
	Prev, Next  string
}

// operatorJobs is the list behind a number of the operator screen: the
// jobs the caller oversees, filtered as the number counts them.
func (h *Handler) operatorJobs(w http.ResponseWriter, r *http.Request, v visitor) {
	q := r.URL.Query()
	f := jobFilter{Cluster: q.Get("cluster"), Tenant: q.Get("tenant"), Project: q.Get("project"), User: q.Get("user"), State: q.Get("state"), Class: q.Get("class")}
	f.Limit, f.Offset = pageOf(q)
	// Only an operator reads this list: the same rule as the screen's.
	if _, err := h.cfg.Source.Overview(r.Context(), identityOf(v)); err != nil && core.AsProblem(err).Status == http.StatusForbidden {
		h.problem(w, r, http.StatusForbidden, "error.forbidden.title", "operator.forbidden")
		return
	}
	d := operatorJobsData{Filter: f}
	page, err := h.cfg.Source.(OperatorSource).JobsWhere(r.Context(), identityOf(v), f.params())
	if err != nil {
		h.log.Warn("operator jobs unavailable", "user", v.sess.User, "error", err)
		d.Error = true
	}
	for _, j := range page.Jobs {
		d.Rows = append(d.Rows, jobRow{Job: j, GPUs: len(j.Gpus), TimeLeft: clock(j.TimeLeftSeconds), Why: why(v.l, j.Reason)})
	}
	d.Total = page.Total
	switch {
	case len(d.Rows) == 0 && d.Total > 0: // past the last page
		d.Prev = f.at(0)
	case len(d.Rows) < d.Total:
		d.First, d.Last = f.Offset+1, f.Offset+len(d.Rows)
		if f.Offset > 0 {
			d.Prev = f.at(max(0, f.Offset-f.Limit))
		}
		if d.Last < d.Total {
			d.Next = f.at(d.Last)
		}
	}
	h.render(w, r, http.StatusOK, "operator_jobs", h.page(r, v, "operator.jobs.title", "operator", d))
}

// nodeRow is a node as the nodes page lists it: drained (or draining)
// nodes are offered a resume, the others a drain.
type nodeRow struct {
	api.Node
	Drainable bool
}

type operatorNodesData struct {
	Cluster string
	Nodes   []nodeRow
	Stale   bool
	// Done is the control just done, Node its node.
	Done, Node string
}

// drainable is whether a node can be drained now (not already), and
// resumable whether it can be resumed.
func drainable(n api.Node) bool {
	return !slices.ContainsFunc(n.State, func(s string) bool { return s == "DRAIN" || s == "DRAINED" || s == "DRAINING" })
}

func (h *Handler) operatorNodes(w http.ResponseWriter, r *http.Request, v visitor) {
	cluster := r.PathValue("cluster")
	l, err := h.cfg.Source.(OperatorSource).Nodes(r.Context(), identityOf(v), cluster)
	if err != nil {
		h.nodeProblem(w, r, err)
		return
	}
	d := operatorNodesData{Cluster: cluster, Stale: l.Stale != nil && *l.Stale}
	for _, n := range l.Nodes {
		d.Nodes = append(d.Nodes, nodeRow{Node: n, Drainable: drainable(n)})
	}
	if a := r.URL.Query().Get("done"); a == string(api.Drain) || a == string(api.Resume) {
		d.Done, d.Node = a, r.URL.Query().Get("node")
	}
	h.render(w, r, http.StatusOK, "operator_nodes", h.page(r, v, "operator.nodes.title", "operator", d))
}

func (h *Handler) nodeProblem(w http.ResponseWriter, r *http.Request, err error) {
	switch core.StatusOf(err) {
	case http.StatusForbidden:
		h.problem(w, r, http.StatusForbidden, "error.forbidden.title", "operator.nodes.forbidden")
	case http.StatusNotFound:
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
	case http.StatusBadRequest:
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "operator.node.reason_missing")
	default:
		h.problem(w, r, http.StatusServiceUnavailable, "error.unavailable.title", "error.unavailable")
	}
}

type nodeConfirmData struct {
	Cluster string
	Node    api.Node
	Action  api.NodeAction
}

func nodeActionOf(s string) (api.NodeAction, bool) {
	a := api.NodeAction(s)
	return a, a.Valid()
}

// nodeOf is the node named in the path, read as the caller.
func (h *Handler) nodeOf(w http.ResponseWriter, r *http.Request, v visitor) (api.Node, bool) {
	l, err := h.cfg.Source.(OperatorSource).Nodes(r.Context(), identityOf(v), r.PathValue("cluster"))
	if err != nil {
		h.nodeProblem(w, r, err)
		return api.Node{}, false
	}
	for _, n := range l.Nodes {
		if n.Name == r.PathValue("node") {
			return n, true
		}
	}
	h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
	return api.Node{}, false
}

// nodeConfirm asks for the reason before a drain or a resume, on a page
// of its own, so that it works without JavaScript.
func (h *Handler) nodeConfirm(w http.ResponseWriter, r *http.Request, v visitor) {
	a, ok := nodeActionOf(r.PathValue("action"))
	if !ok {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
		return
	}
	n, ok := h.nodeOf(w, r, v)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "operator_node_confirm", h.page(r, v, "operator.node.confirm.title", "operator",
		nodeConfirmData{Cluster: r.PathValue("cluster"), Node: n, Action: a}))
}

// nodeControl drains or resumes a node as the caller: the core checks
// that they are the cluster's admin, writes the reason and audits it.
func (h *Handler) nodeControl(w http.ResponseWriter, r *http.Request, v visitor) {
	a, ok := nodeActionOf(r.PathValue("action"))
	if !ok || r.PostFormValue("confirm") != "yes" {
		h.problem(w, r, http.StatusBadRequest, "error.forbidden.title", "job.confirm.missing")
		return
	}
	cluster, node := r.PathValue("cluster"), r.PathValue("node")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if err := h.cfg.Source.(OperatorSource).ControlNode(r.Context(), identityOf(v), cluster, node, a, reason); err != nil {
		h.log.Info("node control refused", "user", v.sess.User, "cluster", cluster, "node", node, "action", a, "error", err)
		h.nodeProblem(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/operator/nodes/%s?done=%s&node=%s", url.PathEscape(cluster), a, url.QueryEscape(node)), http.StatusSeeOther)
}
