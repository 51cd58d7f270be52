package core

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"context"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// view is a job of a snapshot with whose it is.
type view struct {
	cluster string
	job     *slurmrest.Job
	owner   rbac.Target
	class   string
	// finished is slurmdbd's record of a job no longer in the snapshot.
	finished *slurmrest.FinishedJob
}

func owner(m *tenantmap.Map, j *slurmrest.Job) rbac.Target {
	t := rbac.Target{User: j.User}
	if o, ok := m.Lookup(j.Account); ok {
		t.Tenant, t.Project = o.Tenant, o.Project
	} else {
		// An account outside the policy: its own tenant, no project, so
		// that only a cluster admin sees it.
		t.Tenant = "account:" + j.Account
	}
	return t
}

// classOf is the job's workload class: the one it asked for with
// --comment=strata:class=<name>, else its QOS, which job_submit sets to
// the class.
func classOf(j *slurmrest.Job) string {
	for _, f := range strings.FieldsFunc(j.Comment, func(r rune) bool { return r == ',' || r == ' ' }) {
		if c, ok := strings.CutPrefix(f, "strata:class="); ok {
			return c
		}
	}
	return j.QOS
}

// visible are the jobs of the clusters (all when only is "") that user
// may read.
func (s *Core) visible(only, user string) ([]view, []string) {
	var out []view
	var stale []string
	for _, c := range s.clusters {
		name := c.Poller.Name()
		if only != "" && name != only {
			continue
		}
		if c.Poller.Health().Stale {
			stale = append(stale, name)
		}
		if x := s.indexes.of(c); x != nil {
			out = x.readable(out, name, user)
		}
	}
	return out, stale
}

func (s *Core) jobOf(v view) api.Job {
	j := v.job
	out := api.Job{
		Cluster: v.cluster, Id: j.ID, Name: j.Name, User: j.User, Account: j.Account,
		Tenant: v.owner.Tenant, Project: v.owner.Project, Partition: j.Partition, Class: v.class,
		State: j.State.Base(), Held: j.Held, RestartCount: j.RestartCount, Gpus: []string{},
		SubmitTime: nonZeroTime(j.SubmitTime), StartTime: nonZeroTime(j.StartTime), EndTime: nonZeroTime(j.EndTime),
	}
	if strings.HasPrefix(out.Tenant, "account:") {
		out.Tenant = ""
	}
	if j.QOS != "" {
		out.Qos = ptr(j.QOS)
	}
	if len(j.State) > 1 {
		out.StateFlags = ptr([]string(slices.Clone(j.State[1:])))
	}
	for _, g := range j.GPUs {
		out.Gpus = append(out.Gpus, g.String())
	}
	if len(j.Nodes) > 0 {
		out.Nodes = ptr(slices.Clone(j.Nodes))
	}
	if j.WorkDir != "" {
		out.WorkDir = ptr(j.WorkDir)
	}
	if j.ArrayJobID > 0 {
		out.ArrayJobId = ptr(j.ArrayJobID)
		if j.ArrayTaskID >= 0 {
			out.ArrayTaskId = ptr(j.ArrayTaskID)
		}
	}
	now := s.cfg.Now()
	if j.TimeLimit > 0 {
		out.TimeLimitSeconds = ptr(int64(j.TimeLimit / time.Second))
	}
	if !j.StartTime.IsZero() && j.StartTime.Unix() > 0 {
		end := now
		if !j.Running() && !j.EndTime.IsZero() && j.EndTime.Unix() > 0 {
			end = j.EndTime
		}
		used := max(end.Sub(j.StartTime), 0)
		out.TimeUsedSeconds = ptr(int64(used / time.Second))
		if j.Running() && j.TimeLimit > 0 {
			out.TimeLeftSeconds = ptr(int64(max(j.TimeLimit-used, 0) / time.Second))
		}
	}
	if !j.Running() && !j.State.Has("PENDING") {
		out.ExitCode = ptr(j.ExitCode)
	}
	if j.State.Has("PENDING") {
		out.Reason = reason(j)
	}
	return out
}

// reason is why a pending job waits: Slurm's code and what it means.
func reason(j *slurmrest.Job) *api.Reason {
	r := &api.Reason{Slurm: cmp.Or(j.StateReason, "None")}
	if j.StateDesc != "" {
		r.Detail = ptr(j.StateDesc)
	}
	if m := explain.Meaning(j.StateReason); m != "" {
		r.Meaning = ptr(m)
	}
	return r
}

// explained adds to a pending job's reason its case in plain words, the
// limit that holds it and that limit's policy line (internal/explain, as
// strata-policy explain says it); w nil adds nothing.
func explained(r *api.Reason, w *explain.Why) {
	if w == nil {
		return
	}
	if w.Meaning != "" {
		r.Meaning = ptr(w.Meaning)
	}
	if w.Detail != "" {
		r.Text = ptr(w.Detail)
	}
	if w.Hint != "" {
		r.Hint = ptr(w.Hint)
	}
	if w.Limit != nil && w.Limit.Limit.Source != nil {
		r.PolicyLine = ptr(w.Limit.Limit.Source.String())
	}
	if w.Limit != nil {
		r.Limit = reasonLimit(w.Limit)
	}
}

// reasonLimit is the limit holding a job as fields a page renders in its
// own language: who holds it (kind and name: "project" "acme-llm", "user"
// "alice" in account "acme-llm", "qos", "class", "partition"), the limit
// and its unit, what is used and what the job asks for.
func reasonLimit(b *explain.Blocker) *api.ReasonLimit {
	kind, name, _ := strings.Cut(b.Level, " ")
	out := &api.ReasonLimit{Kind: strings.ToLower(kind), Level: name, Name: b.Limit.Name, Unit: b.Limit.Unit, Used: b.Limit.Used,
		Asked: ptr(b.Ask)}
	if user, account, ok := strings.Cut(name, " in "); ok && out.Kind == "user" {
		out.Level, out.Account = user, ptr(account)
	}
	if b.Limit.Slurm != "" {
		out.Slurm = ptr(b.Limit.Slurm)
	}
	switch {
	case b.Limit.Live != nil:
		out.Limit = ptr(*b.Limit.Live)
	case b.Limit.Policy != nil:
		out.Limit = ptr(*b.Limit.Policy)
	}
	return out
}

func newest(a, b view) int {
	if c := b.job.SubmitTime.Compare(a.job.SubmitTime); c != 0 {
		return c
	}
	if c := cmp.Compare(b.job.ID, a.job.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.cluster, b.cluster)
}

// Jobs lists the jobs the caller may read, newest first, filtered and
// a page at a time as p asks.
func (s *Core) Jobs(ctx context.Context, who auth.Identity, p api.ListJobsParams) (api.JobPage, *Problem) {
	only := deref(p.Cluster)
	if only != "" {
		if _, ok := s.byName[only]; !ok {
			return api.JobPage{}, noCluster(only)
		}
	}
	views, stale := s.visible(only, who.User)
	match := views[:0:0]
	for _, v := range views {
		if p.Tenant != nil && v.owner.Tenant != *p.Tenant ||
			p.Project != nil && v.owner.Project != *p.Project ||
			p.User != nil && v.job.User != *p.User ||
			p.State != nil && !strings.EqualFold(v.job.State.Base(), *p.State) ||
			p.Class != nil && v.class != *p.Class {
			continue
		}
		match = append(match, v)
	}
	slices.SortFunc(match, newest)
	limit, offset := 100, 0
	if p.Limit != nil {
		limit = *p.Limit
	}
	if p.Offset != nil {
		offset = *p.Offset
	}
	if limit < 1 || limit > 1000 || offset < 0 {
		return api.JobPage{}, problem(http.StatusBadRequest, api.BadRequest, "limit must be 1 to 1000 and offset 0 or more", "")
	}
	page := api.JobPage{Jobs: []api.Job{}, Total: len(match)}
	for i := offset; i < len(match) && i < offset+limit; i++ {
		page.Jobs = append(page.Jobs, s.jobOf(match[i]))
	}
	if offset+limit < len(match) {
		page.NextOffset = ptr(offset + limit)
	}
	if len(stale) > 0 {
		page.StaleClusters = &stale
	}
	return page, nil
}

// find returns the job of a cluster the caller may read; the problem is
// the same whether the job does not exist or is not theirs.
func (s *Core) find(who auth.Identity, clusterName string, jobID int64) (view, Cluster, *Problem) {
	notFound := problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no job %d on cluster %q", jobID, clusterName),
		"GET /v1/jobs lists the jobs you may see; a job just submitted shows after the next poll")
	c, ok := s.byName[clusterName]
	if !ok {
		return view{}, Cluster{}, notFound
	}
	snap := c.Poller.Snapshot()
	if snap == nil {
		return view{}, Cluster{}, notFound
	}
	m := c.Tenants()
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if j.ID != jobID {
			continue
		}
		o := owner(m, j)
		if !rbac.Allowed(m, who.User, rbac.ReadJobs, o) {
			break
		}
		return view{cluster: clusterName, job: j, owner: o, class: classOf(j)}, c, nil
	}
	return view{}, Cluster{}, notFound
}

// Job is one job the caller may read, its pending reason explained and
// the deployments that serve its model.
//
// A job that has left the snapshot (past slurmctld's MinJobAge) is read
// from slurmdbd, with its GPU-hours.
func (s *Core) Job(ctx context.Context, who auth.Identity, clusterName string, id int64) (api.Job, *Problem) {
	v, c, p := s.findAny(ctx, who, clusterName, id)
	if p != nil {
		return api.Job{}, p
	}
	out := s.jobOf(v)
	if out.Reason != nil {
		if x := s.indexes.of(c); x != nil {
			out.Reason = x.reason(v.job)
		}
	}
	if v.finished != nil {
		out.GpuHours = ptr(math.Round(v.finished.GPUHours()*1000) / 1000)
	}
	out.Served = s.served(ctx, c, who.User, v.job.ID)
	return out, nil
}

// ControlJob cancels, holds, releases or requeues a job as the caller,
// audited before and after.
func (s *Core) ControlJob(ctx context.Context, who auth.Identity, clusterName string, id int64, action api.JobAction) (api.ActionResult, *Problem) {
	if !action.Valid() {
		return api.ActionResult{}, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no action %q", action), "use cancel, hold, release or requeue")
	}
	v, c, p := s.find(who, clusterName, id)
	if p != nil {
		return api.ActionResult{}, s.refuse(ctx, who, clusterName, string(action), strconv.FormatInt(id, 10), p)
	}
	m := c.Tenants()
	if !rbac.CanControl(m, who.User, v.owner) {
		return api.ActionResult{}, s.refuse(ctx, who, clusterName, string(action), string(v.job.Ref()),
			problem(http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not %s job %d", action, id), "only the job's user, or an admin of its tenant, may"))
	}
	client, err := c.Poller.Client(ctx)
	if err != nil {
		return api.ActionResult{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q cannot be reached", clusterName), "try again shortly")
	}
	target := string(v.job.Ref())
	aid, err := s.cfg.Store.Intent(ctx, store.Audit{User: who.User, Via: who.Via, Cluster: clusterName, Action: string(action), Target: target})
	if err != nil {
		s.log.Error("audit record not written: action not taken", "cluster", clusterName, "job_id", target, "action", action, "error", err)
		return api.ActionResult{}, notAudited()
	}
	as := client.As(who.User)
	ref := v.job.Ref()
	switch action {
	case api.Cancel:
		err = as.CancelRef(ctx, ref)
	case api.Hold:
		err = as.UpdateRef(ctx, slurmrest.RefOf(v.job.ID), slurmrest.JobUpdate{Hold: ptr(true)})
	case api.Release:
		err = as.UpdateRef(ctx, slurmrest.RefOf(v.job.ID), slurmrest.JobUpdate{Hold: ptr(false)})
	case api.Requeue:
		err = as.RequeueRef(ctx, ref, slurmrest.RequeueOptions{Reason: "strata: requeued by " + who.User + " through the portal"})
	}
	s.settleAudit(ctx, aid, err)
	s.log.Info("job action", "cluster", clusterName, "job_id", target, "action", action, "user", who.User, "via", who.Via,
		"audit_id", aid, "ok", err == nil, "error", errString(err))
	if err != nil {
		return api.ActionResult{}, slurmProblem(err, fmt.Sprintf("Slurm did not %s job %d: %s", action, id, userText(err)))
	}
	return api.ActionResult{Cluster: clusterName, Target: target, Action: string(action), AuditId: aid}, nil
}

// notAudited is the problem of an action whose audit record could not be
// written: nothing was done.
func notAudited() *Problem {
	return problem(http.StatusInternalServerError, api.Internal, "the action could not be recorded, so it was not taken", "try again; tell the portal's admins if it persists")
}

// slurmProblem is what slurmrestd said, as a problem with msg.
func slurmProblem(err error, msg string) *Problem {
	code, ec, hint := slurmStatus(err)
	return problem(code, ec, msg, hint)
}

// slurmStatus maps what slurmrestd said to an answer.
//
// An action Slurm refused for the caller's user is 403: the portal's own
// rules let the caller ask (a tenant's admin), but Slurm's, which are the
// ones that count, do not let that user do it, and no change of the
// job's state would; that is a refusal of who asks, which 403 means. A
// refusal for the job's state (it ended, it is pending) is 409: the same
// request may succeed once the state changes.
func slurmStatus(err error) (int, api.ErrorCode, string) {
	var ae *slurmrest.AuthError
	switch {
	case errors.As(err, &ae), errors.Is(err, slurmrest.ErrPermission):
		return http.StatusForbidden, api.SlurmRefused, "Slurm refused it for your user: only the job's user, a coordinator of its account or a Slurm operator may"
	case errors.Is(err, slurmrest.ErrAlreadyDone):
		return http.StatusConflict, api.SlurmRefused, "the job has ended or is ending"
	case errors.Is(err, slurmrest.ErrRefused):
		return http.StatusConflict, api.SlurmRefused, "Slurm's message says why"
	case errors.Is(err, slurmrest.ErrNotFound):
		return http.StatusNotFound, api.NotFound, "the job may have ended; GET /v1/jobs shows it after the next poll"
	case errors.Is(err, slurmrest.ErrUnsupported):
		return http.StatusNotImplemented, api.Unavailable, "this cluster's Slurm (25.11 or older) has no REST requeue: use scontrol requeue, " +
			"or ask the portal's admins to set the cluster's scontrol, so the portal requeues through it as you"
	case errors.Is(err, slurmrest.ErrJobPending):
		return http.StatusConflict, api.SlurmRefused, "the job is pending"
	}
	var apiErr *slurmrest.APIError
	if errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 {
		// Slurm judged the request (a job_submit refusal, a bad state):
		// the caller's to change, not a failure of the cluster.
		return http.StatusUnprocessableEntity, api.SlurmRefused, "Slurm's message says why"
	}
	return http.StatusBadGateway, api.SlurmRefused, "see the message; try again shortly if it says the cluster did not answer"
}

// Queue groups the pending jobs the caller may read by cluster, tenant
// and project, each job with its place in its partition's queue.
func (s *Core) Queue(ctx context.Context, who auth.Identity, p api.GetQueueParams) (api.Queue, *Problem) {
	only := deref(p.Cluster)
	if only != "" {
		if _, ok := s.byName[only]; !ok {
			return api.Queue{}, noCluster(only)
		}
	}
	views, stale := s.visible(only, who.User)
	places := s.places(views)
	type key struct{ cluster, tenant, project string }
	groups := map[key]*api.QueueGroup{}
	counts := map[key]map[string]int{}
	var order []key
	for _, v := range views {
		if !v.job.State.Has("PENDING") {
			continue
		}
		tenant := v.owner.Tenant
		if strings.HasPrefix(tenant, "account:") {
			tenant = ""
		}
		k := key{v.cluster, tenant, v.owner.Project}
		g, ok := groups[k]
		if !ok {
			g = &api.QueueGroup{Cluster: k.cluster, Tenant: k.tenant, Project: k.project, Jobs: &[]api.QueueJob{}}
			groups[k], counts[k] = g, map[string]int{}
			order = append(order, k)
		}
		reason := cmp.Or(v.job.StateReason, "None")
		g.Pending++
		counts[k][reason]++
		*g.Jobs = append(*g.Jobs, s.queueJob(v, reason, places))
	}
	slices.SortFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.project, b.project))
	})
	out := api.Queue{Groups: []api.QueueGroup{}}
	for _, k := range order {
		g := groups[k]
		for reason, n := range counts[k] {
			g.Reasons = append(g.Reasons, struct {
				Count  int    `json:"count"`
				Reason string `json:"reason"`
			}{n, reason})
		}
		slices.SortFunc(g.Reasons, func(a, b struct {
			Count  int    `json:"count"`
			Reason string `json:"reason"`
		}) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
		})
		slices.SortFunc(*g.Jobs, func(a, b api.QueueJob) int { return cmp.Compare(a.Id, b.Id) })
		out.Groups = append(out.Groups, *g)
	}
	if len(stale) > 0 {
		out.StaleClusters = &stale
	}
	return out, nil
}

// Clusters lists the clusters with their health, and how many of their
// jobs the caller may read.
func (s *Core) Clusters(ctx context.Context, who auth.Identity) api.ClusterList {
	user := who.User
	out := api.ClusterList{Clusters: []api.Cluster{}}
	for _, c := range s.clusters {
		h := c.Poller.Health()
		ac := api.Cluster{Name: c.Poller.Name(), Healthy: h.Healthy, Stale: h.Stale}
		if h.Err != "" {
			ac.Error = ptr(h.Err)
		}
		if snap := c.Poller.Snapshot(); snap != nil {
			ac.AgeSeconds = ptr(float32(h.Age.Seconds()))
			ac.SnapshotTime = nonZeroTime(snap.At)
			ac.SlurmRelease, ac.Parser = ptr(snap.Info.Release), ptr(snap.Info.Parser)
			views, _ := s.visible(c.Poller.Name(), user)
			ac.Jobs = ptr(len(views))
		}
		out.Clusters = append(out.Clusters, ac)
	}
	return out
}

// Me says who the caller is and what roles they hold on each cluster.
func (s *Core) Me(ctx context.Context, id auth.Identity) api.Me {
	out := api.Me{User: id.User, Via: api.MeVia(id.Via), Clusters: []api.Membership{}}
	for _, c := range s.clusters {
		mb := api.Membership{Cluster: c.Poller.Name(), TenantAdmin: []string{}, Projects: []struct {
			Project string                     `json:"project"`
			Role    api.MembershipProjectsRole `json:"role"`
			Tenant  string                     `json:"tenant"`
		}{}}
		for _, g := range rbac.Grants(c.Tenants(), id.User) {
			switch {
			case g.Role == rbac.ClusterAdmin:
				mb.ClusterAdmin = true
			case g.Role == rbac.TenantAdmin && g.Project == "":
				if !slices.Contains(mb.TenantAdmin, g.Tenant) {
					mb.TenantAdmin = append(mb.TenantAdmin, g.Tenant)
				}
			case g.Project != "":
				mb.Projects = append(mb.Projects, struct {
					Project string                     `json:"project"`
					Role    api.MembershipProjectsRole `json:"role"`
					Tenant  string                     `json:"tenant"`
				}{g.Project, api.MembershipProjectsRole(g.Role), g.Tenant})
			}
		}
		out.Clusters = append(out.Clusters, mb)
	}
	return out
}

// Nodes lists a cluster's nodes, for its admins.
func (s *Core) Nodes(ctx context.Context, who auth.Identity, clusterName string) (api.NodeList, *Problem) {
	c, ok := s.byName[clusterName]
	if !ok {
		return api.NodeList{}, noCluster(clusterName)
	}
	if !rbac.Allowed(c.Tenants(), who.User, rbac.OperatorViews, rbac.Target{}) {
		return api.NodeList{}, problem(http.StatusForbidden, api.Forbidden, "the nodes are for the cluster's admins", "")
	}
	out := api.NodeList{Nodes: []api.Node{}, Stale: ptr(c.Poller.Health().Stale)}
	if snap := c.Poller.Snapshot(); snap != nil {
		for _, n := range snap.Nodes {
			an := api.Node{Name: n.Name, State: nonNil(n.State), Gpus: n.GPUs, GpusUsed: n.GPUsUsed, Cpus: ptr(n.CPUs), AllocCpus: ptr(n.AllocCPUs)}
			if n.Reason != "" {
				an.Reason = ptr(n.Reason)
			}
			if n.GPUType != "" {
				an.GpuType = ptr(n.GPUType)
			}
			if len(n.Partitions) > 0 {
				an.Partitions = ptr(slices.Clone(n.Partitions))
			}
			out.Nodes = append(out.Nodes, an)
		}
	}
	return out, nil
}

// ControlNode drains or resumes a node, as the caller, with their reason
// marked "strata: " as everything Strata writes into Slurm; audited.
func (s *Core) ControlNode(ctx context.Context, who auth.Identity, clusterName, node string, action api.NodeAction, reason string) (api.ActionResult, *Problem) {
	c, ok := s.byName[clusterName]
	if !ok || !action.Valid() {
		return api.ActionResult{}, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no cluster %q or action %q", clusterName, action), "")
	}
	if !rbac.Allowed(c.Tenants(), who.User, rbac.DrainNodes, rbac.Target{}) {
		return api.ActionResult{}, s.refuse(ctx, who, clusterName, string(action), node,
			problem(http.StatusForbidden, api.Forbidden, "only the cluster's admins drain and resume nodes", ""))
	}
	if strings.TrimSpace(reason) == "" || len(reason) > 200 {
		return api.ActionResult{}, BadNodeReason()
	}
	snap := c.Poller.Snapshot()
	if snap == nil || !slices.ContainsFunc(snap.Nodes, func(n slurmrest.Node) bool { return n.Name == node }) {
		return api.ActionResult{}, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no node %q on cluster %q", node, clusterName), "GET /v1/nodes/{cluster} lists them")
	}
	client, err := c.Poller.Client(ctx)
	if err != nil {
		return api.ActionResult{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q cannot be reached", clusterName), "try again shortly")
	}
	reason = "strata: " + strings.TrimPrefix(strings.TrimSpace(reason), "strata: ")
	aid, err := s.cfg.Store.Intent(ctx, store.Audit{User: who.User, Via: who.Via, Cluster: clusterName, Action: string(action), Target: node, Detail: reason})
	if err != nil {
		s.log.Error("audit record not written: action not taken", "cluster", clusterName, "node", node, "action", action, "error", err)
		return api.ActionResult{}, notAudited()
	}
	state := slurmrest.NodeDrain
	if action == api.Resume {
		state = slurmrest.NodeResume
	}
	err = client.As(who.User).UpdateNode(ctx, node, state, reason)
	s.settleAudit(ctx, aid, err)
	s.log.Info("node action", "cluster", clusterName, "node", node, "action", action, "user", who.User, "reason", reason,
		"audit_id", aid, "ok", err == nil, "error", errString(err))
	if err != nil {
		return api.ActionResult{}, slurmProblem(err, fmt.Sprintf("Slurm did not %s node %s: %s", action, node, userText(err)))
	}
	return api.ActionResult{Cluster: clusterName, Target: node, Action: string(action), AuditId: aid}, nil
}

// BadNodeReason is the problem of a drain or resume without a reason of 1
// to 200 characters (or a body that is not one).
func BadNodeReason() *Problem {
	return problem(http.StatusBadRequest, api.BadRequest, "give a reason of 1 to 200 characters", `send {"reason": "..."}`)
}
