package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// Deployments are served through each cluster's strata-bridge (its JSON
// API, with the token of bridge_token_file). The bridge knows every
// tenant's deployments; the portal shows a caller those of the tenants
// and projects whose jobs they may read, and acts only on what they may
// read: a job is found in the snapshot and a deployment in the bridge's
// list before the bridge is asked to do anything with it, and a caller
// with no role on a cluster makes no request to its bridge at all.

// deploymentTarget is whose a deployment is, for rbac: its tenant and
// project (the bridge's, from the same policy as the tenant map).
func deploymentTarget(d bridgeclient.Deployment) rbac.Target {
	return rbac.Target{Tenant: d.Tenant, Project: d.Project}
}

func deploymentOf(cluster string, d bridgeclient.Deployment) api.Deployment {
	out := api.Deployment{Cluster: cluster, Name: d.Name, Namespace: d.Namespace, Tenant: d.Tenant, Project: d.Project, State: d.State,
		CreatedAt: nonZeroTime(d.CreatedAt), UpdatedAt: nonZeroTime(d.UpdatedAt)}
	if d.Version != "" {
		out.Version = ptr(d.Version)
	}
	if d.JobID() != 0 {
		out.JobId = ptr(d.JobID())
	}
	if v := d.Current; v != nil && v.Version != nil {
		out.User, out.Account = optional(v.User), optional(v.Account)
		out.Outcome, out.Message, out.Model, out.Tier = optional(v.Outcome), optional(v.Message), optional(v.ModelPath), optional(v.Tier)
		out.Gpus, out.Replicas = ptr(v.GPUs), ptr(replicas(d))
	}
	return out
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// replicas of a deployment: its current version's most replicas; none
// for a deployment that serves nothing.
func replicas(d bridgeclient.Deployment) int {
	if d.State != "active" || d.Current == nil || d.Current.Version == nil {
		return 0
	}
	return max(d.Current.MaxReplicas, 1)
}

// bridged is a cluster's deployments that user may read. ok is false when
// the cluster has no bridge or the user has no role there (the bridge is
// not asked); err is the bridge's failure.
func (s *Core) bridged(ctx context.Context, c Cluster, user string) (ds []bridgeclient.Deployment, ok bool, err error) {
	if c.Bridge == nil {
		return nil, false, nil
	}
	grants := rbac.Grants(c.Tenants(), user)
	if len(grants) == 0 {
		return nil, false, nil
	}
	all, err := c.Bridge.Deployments(ctx)
	if err != nil {
		s.log.Warn("bridge did not answer", "cluster", c.Poller.Name(), "error", err)
		return nil, true, err
	}
	for _, d := range all {
		if rbac.AllowedBy(grants, user, rbac.ReadJobs, deploymentTarget(d)) {
			ds = append(ds, d)
		}
	}
	return ds, true, nil
}

// Deployments lists the deployments the caller may read, of every
// cluster with a bridge.
func (s *Core) Deployments(ctx context.Context, who auth.Identity, p api.ListDeploymentsParams) (api.DeploymentList, *Problem) {
	only := deref(p.Cluster)
	if only != "" {
		if _, ok := s.byName[only]; !ok {
			return api.DeploymentList{}, noCluster(only)
		}
	}
	user := who.User
	out := api.DeploymentList{Deployments: []api.Deployment{}}
	var down []string
	for _, c := range s.clusters {
		name := c.Poller.Name()
		if only != "" && name != only {
			continue
		}
		ds, asked, err := s.bridged(ctx, c, user)
		if err != nil {
			down = append(down, name)
			continue
		}
		if !asked {
			continue
		}
		for _, d := range ds {
			if p.Tenant != nil && d.Tenant != *p.Tenant || p.Project != nil && d.Project != *p.Project {
				continue
			}
			out.Deployments = append(out.Deployments, deploymentOf(name, d))
		}
	}
	slices.SortFunc(out.Deployments, func(a, b api.Deployment) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Name, b.Name))
	})
	if len(down) > 0 {
		out.UnavailableClusters = &down
	}
	return out, nil
}

// served are the active deployments whose current version serves job id,
// for GET /v1/jobs/{cluster}/{id}; nil without a bridge or when it did
// not answer.
func (s *Core) served(ctx context.Context, c Cluster, user string, id int64) *[]api.Deployment {
	ds, asked, err := s.bridged(ctx, c, user)
	if !asked || err != nil {
		return nil
	}
	out := []api.Deployment{}
	for _, d := range ds {
		if d.JobID() == id && d.State == "active" {
			out = append(out, deploymentOf(c.Poller.Name(), d))
		}
	}
	return &out
}

// BadDeployRequest is the problem of a deploy request without the
// cluster and the job (or a body that is not one).
func BadDeployRequest() *Problem {
	return problem(http.StatusBadRequest, api.BadRequest, "give the cluster and the finished job whose model to serve",
		`send {"cluster": "gpu1", "job": 4242}, with "name" for a job that did not ask to be served`)
}

// Deploy serves a finished job's model through its cluster's bridge.
func (s *Core) Deploy(ctx context.Context, who auth.Identity, req api.DeployRequest) (api.DeployResult, *Problem) {
	if req.Job <= 0 || req.Cluster == "" {
		return api.DeployResult{}, BadDeployRequest()
	}
	v, c, p := s.find(who, req.Cluster, req.Job)
	if p != nil {
		return api.DeployResult{}, p
	}
	if !rbac.Allowed(c.Tenants(), who.User, rbac.DeployModels, v.owner) {
		return api.DeployResult{}, problem(http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not deploy the model of job %d", req.Job),
			"the project's members and its tenant's admins may")
	}
	if v.job.State.Base() != "COMPLETED" {
		return api.DeployResult{}, problem(http.StatusConflict, api.BadRequest, fmt.Sprintf("job %d is %s: only a completed job's model is served", req.Job, v.job.State.Base()),
			"deploy it once the job has completed")
	}
	if c.Bridge == nil {
		return api.DeployResult{}, problem(http.StatusNotImplemented, api.Unavailable, fmt.Sprintf("cluster %q has no bridge", req.Cluster),
			"the portal's admins set bridge_url for the cluster")
	}
	name, dry := deref(req.Name), deref(req.DryRun)
	aid, p := s.intent(ctx, who, req.Cluster, "deploy", strconv.FormatInt(req.Job, 10), name, dry)
	if p != nil {
		return api.DeployResult{}, p
	}
	res, err := c.Bridge.Deploy(ctx, req.Job, name, dry)
	s.finish(ctx, who, aid, req.Cluster, "deploy", strconv.FormatInt(req.Job, 10), dry, err)
	if err != nil {
		return api.DeployResult{}, s.bridgeError(req.Cluster, fmt.Sprintf("the model of job %d was not deployed", req.Job), err)
	}
	return resultOf(req.Cluster, aid, res), nil
}

// deployment finds a deployment the caller may read on a cluster, from
// the bridge's list; the problem is the same whether it does not exist or
// is not theirs.
func (s *Core) deployment(ctx context.Context, who auth.Identity, clusterName, name string) (bridgeclient.Deployment, Cluster, *Problem) {
	notFound := problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("no deployment %q on cluster %q", name, clusterName),
		"GET /v1/deployments lists the deployments you may see")
	c, ok := s.byName[clusterName]
	if !ok {
		return bridgeclient.Deployment{}, Cluster{}, notFound
	}
	ds, asked, err := s.bridged(ctx, c, who.User)
	if err != nil {
		return bridgeclient.Deployment{}, Cluster{}, problem(http.StatusServiceUnavailable, api.Unavailable,
			fmt.Sprintf("the bridge of cluster %q did not answer", clusterName), "try again shortly")
	}
	if asked {
		for _, d := range ds {
			if d.Name == name {
				return d, c, nil
			}
		}
	}
	return bridgeclient.Deployment{}, Cluster{}, notFound
}

// Deployment is a deployment the caller may read, with every version
// the bridge keeps and its events.
func (s *Core) Deployment(ctx context.Context, who auth.Identity, clusterName, name string) (api.DeploymentDetail, *Problem) {
	d, c, p := s.deployment(ctx, who, clusterName, name)
	if p != nil {
		return api.DeploymentDetail{}, p
	}
	det, err := c.Bridge.Deployment(ctx, name)
	if err != nil {
		return api.DeploymentDetail{}, s.bridgeError(clusterName, fmt.Sprintf("deployment %s could not be read", name), err)
	}
	out := api.DeploymentDetail{Deployment: deploymentOf(clusterName, d), Versions: []api.DeploymentVersion{}, Events: []api.DeploymentEvent{}}
	for _, v := range det.Versions {
		if v.Version == nil {
			continue
		}
		out.Versions = append(out.Versions, api.DeploymentVersion{Version: v.Label, JobId: v.JobID, User: optional(v.User), Account: optional(v.Account),
			Model: optional(v.ModelPath), Gpus: ptr(v.GPUs), Tier: optional(v.Tier), Replicas: ptr(max(v.MaxReplicas, 1)), Outcome: v.Outcome,
			Message: optional(v.Message), Current: d.State == "active" && v.JobID == d.JobID(), CreatedAt: v.CreatedAt.UTC(), FinishedAt: finished(v.FinishedAt)})
	}
	for _, e := range det.Events {
		ev := api.DeploymentEvent{Action: e.Action, Outcome: e.Outcome, Message: optional(e.Message), At: e.At.UTC()}
		if e.JobID != 0 {
			ev.JobId = ptr(e.JobID)
		}
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

func finished(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return nonZeroTime(*t)
}

// Rollback puts an earlier version of a deployment back: req.To, or the
// previous version that rolled out.
func (s *Core) Rollback(ctx context.Context, who auth.Identity, clusterName, name string, req api.RollbackRequest) (api.DeployResult, *Problem) {
	d, c, p := s.deployment(ctx, who, clusterName, name)
	if p != nil {
		return api.DeployResult{}, p
	}
	if p := s.mayDeploy(c, who, d, "roll back"); p != nil {
		return api.DeployResult{}, p
	}
	to, dry := deref(req.To), deref(req.DryRun)
	aid, p := s.intent(ctx, who, clusterName, "rollback", name, to, dry)
	if p != nil {
		return api.DeployResult{}, p
	}
	res, err := c.Bridge.Rollback(ctx, name, to, dry)
	s.finish(ctx, who, aid, clusterName, "rollback", name, dry, err)
	if err != nil {
		return api.DeployResult{}, s.bridgeError(clusterName, fmt.Sprintf("deployment %s was not rolled back", name), err)
	}
	return resultOf(clusterName, aid, res), nil
}

// DeleteDeployment removes a deployment's objects from Kubernetes (dry:
// says what it would remove).
func (s *Core) DeleteDeployment(ctx context.Context, who auth.Identity, clusterName, name string, dry bool) (api.DeleteResult, *Problem) {
	d, c, p := s.deployment(ctx, who, clusterName, name)
	if p != nil {
		return api.DeleteResult{}, p
	}
	if p := s.mayDeploy(c, who, d, "delete"); p != nil {
		return api.DeleteResult{}, p
	}
	aid, p := s.intent(ctx, who, clusterName, "delete", name, "", dry)
	if p != nil {
		return api.DeleteResult{}, p
	}
	res, err := c.Bridge.Delete(ctx, name, dry)
	s.finish(ctx, who, aid, clusterName, "delete", name, dry, err)
	if err != nil {
		return api.DeleteResult{}, s.bridgeError(clusterName, fmt.Sprintf("deployment %s was not deleted", name), err)
	}
	out := api.DeleteResult{Cluster: clusterName, Name: res.Name, Namespace: res.Namespace, Deleted: objectsOf(res.Deleted)}
	if res.DryRun {
		out.DryRun = ptr(true)
	}
	if aid != 0 {
		out.AuditId = ptr(aid)
	}
	return out, nil
}

func (s *Core) mayDeploy(c Cluster, who auth.Identity, d bridgeclient.Deployment, what string) *Problem {
	if rbac.Allowed(c.Tenants(), who.User, rbac.DeployModels, deploymentTarget(d)) {
		return nil
	}
	return problem(http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not %s deployment %s", what, d.Name),
		"the project's members and its tenant's admins may")
}

// intent writes the audit record of an action before it is taken; a dry
// run changes nothing and has none (id 0). A problem when the record
// could not be written: the action is not taken.
func (s *Core) intent(ctx context.Context, who auth.Identity, cluster, action, target, detail string, dry bool) (int64, *Problem) {
	if dry {
		return 0, nil
	}
	aid, err := s.cfg.Store.Intent(ctx, store.Audit{User: who.User, Via: who.Via, Cluster: cluster, Action: action, Target: target, Detail: detail})
	if err != nil {
		s.log.Error("audit record not written: action not taken", "cluster", cluster, "target", target, "action", action, "error", err)
		return 0, notAudited()
	}
	return aid, nil
}

// finish writes an action's result after it, and logs it.
func (s *Core) finish(ctx context.Context, who auth.Identity, aid int64, cluster, action, target string, dry bool, err error) {
	if aid != 0 {
		// The bridge may have acted even when the caller has gone.
		if ferr := s.cfg.Store.Finish(context.WithoutCancel(ctx), aid, err); ferr != nil {
			s.log.Error("audit result not written", "audit_id", aid, "error", ferr)
		}
	}
	s.log.Info("deployment action", "cluster", cluster, "target", target, "action", action, "dry_run", dry, "user", who.User, "via", who.Via,
		"audit_id", aid, "ok", err == nil, "error", errString(err))
}

// bridgeError is the problem of what the bridge said. A refusal is the
// caller's to change and says which check refused it, except that a name
// another tenant holds is not said to be whose.
func (s *Core) bridgeError(cluster, what string, err error) *Problem {
	var be *bridgeclient.Error
	if !errors.As(err, &be) {
		return problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("%s: the bridge of cluster %q cannot be reached", what, cluster), "try again shortly")
	}
	switch {
	case be.Refused():
		msg, hint := be.Msg, be.Fix
		if be.Check == "name" {
			msg, hint = "the deployment name is in use by another tenant", "choose another name"
		}
		p := problem(http.StatusUnprocessableEntity, api.BridgeRefused, what+": "+msg, hint)
		if be.Check != "" {
			p.Details = []string{"check: " + be.Check}
		}
		return p
	case be.Status == http.StatusNotFound:
		return problem(http.StatusNotFound, api.NotFound, what+": "+be.Msg, "GET /v1/deployments lists the deployments you may see")
	case be.Status == http.StatusBadRequest:
		return problem(http.StatusBadRequest, api.BadRequest, what+": "+be.Msg, "")
	case be.Status == http.StatusUnauthorized || be.Status == http.StatusMisdirectedRequest ||
		be.Status == http.StatusUnsupportedMediaType || be.Status == http.StatusServiceUnavailable:
		s.log.Error("the bridge refused the portal", "cluster", cluster, "status", be.Status, "error", be.Msg)
		return problem(http.StatusBadGateway, api.Unavailable, fmt.Sprintf("%s: the bridge of cluster %q refused the portal", what, cluster),
			"tell the portal's admins: bridge_url or bridge_token_file does not match the bridge")
	default:
		return problem(http.StatusBadGateway, api.Unavailable, what+": "+be.Error(), "see the message; the bridge's log says more")
	}
}

func resultOf(cluster string, aid int64, res *bridgeclient.Result) api.DeployResult {
	out := api.DeployResult{Cluster: cluster, Action: res.Action, Name: res.Name, Namespace: res.Namespace, Tenant: res.Tenant,
		Project: res.Project, JobId: res.JobID, Version: res.Version, Changed: res.Changed, Outcome: res.Outcome, Message: res.Message,
		Objects: []api.KubeObject{}, Rollout: optional(res.Rollout)}
	if aid != 0 {
		out.AuditId = ptr(aid)
	}
	if res.DryRun {
		out.DryRun = ptr(true)
	}
	for _, o := range res.Objects {
		k := kubeObject(o.ObjectRef)
		k.Action = optional(o.Action)
		out.Objects = append(out.Objects, k)
	}
	if len(res.Pruned) > 0 {
		out.Pruned = ptr(objectsOf(res.Pruned))
	}
	return out
}

func kubeObject(o bridgeclient.ObjectRef) api.KubeObject {
	return api.KubeObject{ApiVersion: o.APIVersion, Kind: o.Kind, Namespace: optional(o.Namespace), Name: o.Name}
}

func objectsOf(refs []bridgeclient.ObjectRef) []api.KubeObject {
	out := []api.KubeObject{}
	for _, o := range refs {
		out = append(out, kubeObject(o))
	}
	return out
}

// overviewDeployments counts the active deployments of a cluster's bridge
// and their replicas, per tenant the overview shows (all for a cluster
// admin, else the caller's tenants) into by, making the entry of a tenant
// with deployments and no job. The totals are nil without a bridge;
// unavailable is set when it did not answer.
func (s *Core) overviewDeployments(ctx context.Context, c Cluster, user string, admin bool, tenants map[string]bool,
	by map[string]*api.TenantOverview, reasons map[string]map[string]int) (count, reps *int, unavailable *bool) {
	ds, asked, err := s.bridged(ctx, c, user)
	if err != nil {
		return nil, nil, ptr(true)
	}
	if !asked {
		return nil, nil, nil
	}
	n, total := 0, 0
	for tenant := range by {
		if !strings.HasPrefix(tenant, "account:") {
			by[tenant].Deployments, by[tenant].Replicas = ptr(0), ptr(0)
		}
	}
	for _, d := range ds {
		if d.State != "active" || !admin && !tenants[d.Tenant] {
			continue
		}
		to, ok := by[d.Tenant]
		if !ok {
			to = &api.TenantOverview{Tenant: d.Tenant, TopReasons: []api.ReasonCount{}, Deployments: ptr(0), Replicas: ptr(0)}
			by[d.Tenant], reasons[d.Tenant] = to, map[string]int{}
		}
		*to.Deployments++
		*to.Replicas += replicas(d)
		n++
		total += replicas(d)
	}
	return &n, &total, nil
}
