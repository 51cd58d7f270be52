package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/portal-api/internal/api"
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
	if v := d.Current; v != nil {
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
	if d.State != "active" || d.Current == nil {
		return 0
	}
	return max(d.Current.MaxReplicas, 1)
}

// bridged is a cluster's deployments that user may read. ok is false when
// the cluster has no bridge or the user has no role there (the bridge is
// not asked); err is the bridge's failure.
func (s *Server) bridged(ctx context.Context, c Cluster, user string) (ds []bridgeclient.Deployment, ok bool, err error) {
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

// ListDeployments lists the deployments the caller may read, of every
// cluster with a bridge.
func (s *Server) ListDeployments(w http.ResponseWriter, r *http.Request, p api.ListDeploymentsParams) {
	only := deref(p.Cluster)
	if only != "" {
		if _, ok := s.byName[only]; !ok {
			writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no cluster %q", only), "GET /v1/clusters lists them")
			return
		}
	}
	user := identity(r.Context()).User
	out := api.DeploymentList{Deployments: []api.Deployment{}}
	var down []string
	for _, c := range s.clusters {
		name := c.Poller.Name()
		if only != "" && name != only {
			continue
		}
		ds, asked, err := s.bridged(r.Context(), c, user)
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
	writeJSON(w, http.StatusOK, out)
}

// served are the active deployments whose current version serves job id,
// for GET /v1/jobs/{cluster}/{id}; nil without a bridge or when it did
// not answer.
func (s *Server) served(ctx context.Context, c Cluster, user string, id int64) *[]api.Deployment {
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

// decodeBody reads a JSON body strictly; an empty body is the zero value
// when empty is allowed.
func decodeBody(r *http.Request, v any, empty bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && empty {
		return nil
	}
	if err == nil && dec.More() {
		return errors.New("more than one JSON value")
	}
	return err
}

// DeployJob serves a finished job's model through its cluster's bridge.
func (s *Server) DeployJob(w http.ResponseWriter, r *http.Request) {
	var req api.DeployRequest
	if err := decodeBody(r, &req, false); err != nil || req.Job <= 0 || req.Cluster == "" {
		writeError(w, http.StatusBadRequest, api.BadRequest, "give the cluster and the finished job whose model to serve",
			`send {"cluster": "gpu1", "job": 4242}, with "name" for a job that did not ask to be served`)
		return
	}
	v, c, ok := s.find(w, r, req.Cluster, req.Job)
	if !ok {
		return
	}
	who := identity(r.Context())
	if !rbac.Allowed(c.Tenants(), who.User, rbac.DeployModels, v.owner) {
		writeError(w, http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not deploy the model of job %d", req.Job),
			"the project's members and its tenant's admins may")
		return
	}
	if v.job.State.Base() != "COMPLETED" {
		writeError(w, http.StatusConflict, api.BadRequest, fmt.Sprintf("job %d is %s: only a completed job's model is served", req.Job, v.job.State.Base()),
			"deploy it once the job has completed")
		return
	}
	if c.Bridge == nil {
		writeError(w, http.StatusNotImplemented, api.Unavailable, fmt.Sprintf("cluster %q has no bridge", req.Cluster),
			"the portal's admins set bridge_url for the cluster")
		return
	}
	name, dry := deref(req.Name), deref(req.DryRun)
	detail := name
	aid, ok := s.intent(w, r, req.Cluster, "deploy", strconv.FormatInt(req.Job, 10), detail, dry)
	if !ok {
		return
	}
	res, err := c.Bridge.Deploy(r.Context(), req.Job, name, dry)
	s.finish(r, aid, req.Cluster, "deploy", strconv.FormatInt(req.Job, 10), dry, err)
	if err != nil {
		s.bridgeError(w, req.Cluster, fmt.Sprintf("the model of job %d was not deployed", req.Job), err)
		return
	}
	writeJSON(w, http.StatusOK, resultOf(req.Cluster, aid, res))
}

// deployment finds a deployment the caller may read on a cluster, from
// the bridge's list; the answer is the same whether it does not exist or
// is not theirs.
func (s *Server) deployment(w http.ResponseWriter, r *http.Request, clusterName, name string) (bridgeclient.Deployment, Cluster, bool) {
	notFound := func() {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("no deployment %q on cluster %q", name, clusterName),
			"GET /v1/deployments lists the deployments you may see")
	}
	c, ok := s.byName[clusterName]
	if !ok {
		notFound()
		return bridgeclient.Deployment{}, Cluster{}, false
	}
	ds, asked, err := s.bridged(r.Context(), c, identity(r.Context()).User)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("the bridge of cluster %q did not answer", clusterName), "try again shortly")
		return bridgeclient.Deployment{}, Cluster{}, false
	}
	if asked {
		for _, d := range ds {
			if d.Name == name {
				return d, c, true
			}
		}
	}
	notFound()
	return bridgeclient.Deployment{}, Cluster{}, false
}

// RollbackDeployment puts an earlier version of a deployment back.
func (s *Server) RollbackDeployment(w http.ResponseWriter, r *http.Request, clusterName api.ClusterName, name api.DeploymentName) {
	var req api.RollbackRequest
	if err := decodeBody(r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, api.BadRequest, "the body is not a rollback request: "+err.Error(),
			`send {} for the previous version, or {"to": "job-4240"}`)
		return
	}
	d, c, ok := s.deployment(w, r, clusterName, name)
	if !ok || !s.mayDeploy(w, r, c, d, "roll back") {
		return
	}
	to, dry := deref(req.To), deref(req.DryRun)
	aid, ok := s.intent(w, r, clusterName, "rollback", name, to, dry)
	if !ok {
		return
	}
	res, err := c.Bridge.Rollback(r.Context(), name, to, dry)
	s.finish(r, aid, clusterName, "rollback", name, dry, err)
	if err != nil {
		s.bridgeError(w, clusterName, fmt.Sprintf("deployment %s was not rolled back", name), err)
		return
	}
	writeJSON(w, http.StatusOK, resultOf(clusterName, aid, res))
}

// DeleteDeployment removes a deployment's objects from Kubernetes.
func (s *Server) DeleteDeployment(w http.ResponseWriter, r *http.Request, clusterName api.ClusterName, name api.DeploymentName, p api.DeleteDeploymentParams) {
	d, c, ok := s.deployment(w, r, clusterName, name)
	if !ok || !s.mayDeploy(w, r, c, d, "delete") {
		return
	}
	dry := deref(p.DryRun)
	aid, ok := s.intent(w, r, clusterName, "delete", name, "", dry)
	if !ok {
		return
	}
	res, err := c.Bridge.Delete(r.Context(), name, dry)
	s.finish(r, aid, clusterName, "delete", name, dry, err)
	if err != nil {
		s.bridgeError(w, clusterName, fmt.Sprintf("deployment %s was not deleted", name), err)
		return
	}
	out := api.DeleteResult{Cluster: clusterName, Name: res.Name, Namespace: res.Namespace, Deleted: objectsOf(res.Deleted)}
	if res.DryRun {
		out.DryRun = ptr(true)
	}
	if aid != 0 {
		out.AuditId = ptr(aid)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) mayDeploy(w http.ResponseWriter, r *http.Request, c Cluster, d bridgeclient.Deployment, what string) bool {
	if rbac.Allowed(c.Tenants(), identity(r.Context()).User, rbac.DeployModels, deploymentTarget(d)) {
		return true
	}
	writeError(w, http.StatusForbidden, api.Forbidden, fmt.Sprintf("you may not %s deployment %s", what, d.Name),
		"the project's members and its tenant's admins may")
	return false
}

// intent writes the audit record of an action before it is taken; a dry
// run changes nothing and has none (id 0). ok is false when the record
// could not be written: the action is not taken.
func (s *Server) intent(w http.ResponseWriter, r *http.Request, cluster, action, target, detail string, dry bool) (int64, bool) {
	if dry {
		return 0, true
	}
	who := identity(r.Context())
	aid, err := s.cfg.Store.Intent(r.Context(), store.Audit{User: who.User, Via: who.Via, Cluster: cluster, Action: action, Target: target, Detail: detail})
	if err != nil {
		s.log.Error("audit record not written: action not taken", "cluster", cluster, "target", target, "action", action, "error", err)
		writeError(w, http.StatusInternalServerError, api.Internal, "the action could not be recorded, so it was not taken", "try again; tell the portal's admins if it persists")
		return 0, false
	}
	return aid, true
}

// finish writes an action's result after it, and logs it.
func (s *Server) finish(r *http.Request, aid int64, cluster, action, target string, dry bool, err error) {
	if aid != 0 {
		// The bridge may have acted even when the caller has gone.
		if ferr := s.cfg.Store.Finish(context.WithoutCancel(r.Context()), aid, err); ferr != nil {
			s.log.Error("audit result not written", "audit_id", aid, "error", ferr)
		}
	}
	who := identity(r.Context())
	s.log.Info("deployment action", "cluster", cluster, "target", target, "action", action, "dry_run", dry, "user", who.User, "via", who.Via,
		"audit_id", aid, "ok", err == nil, "error", errString(err))
}

// bridgeError answers for what the bridge said. A refusal is the
// caller's to change and says which check refused it, except that a name
// another tenant holds is not said to be whose.
func (s *Server) bridgeError(w http.ResponseWriter, cluster, what string, err error) {
	var be *bridgeclient.Error
	if !errors.As(err, &be) {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("%s: the bridge of cluster %q cannot be reached", what, cluster), "try again shortly")
		return
	}
	switch {
	case be.Refused():
		msg, hint := be.Msg, be.Fix
		if be.Check == "name" {
			msg, hint = "the deployment name is in use by another tenant", "choose another name"
		}
		e := api.Error{Code: api.BridgeRefused, Message: what + ": " + msg}
		if be.Check != "" {
			e.Details = &[]string{"check: " + be.Check}
		}
		if hint != "" {
			e.Hint = &hint
		}
		writeJSON(w, http.StatusUnprocessableEntity, e)
	case be.Status == http.StatusNotFound:
		writeError(w, http.StatusNotFound, api.NotFound, what+": "+be.Msg, "GET /v1/deployments lists the deployments you may see")
	case be.Status == http.StatusBadRequest:
		writeError(w, http.StatusBadRequest, api.BadRequest, what+": "+be.Msg, "")
	case be.Status == http.StatusUnauthorized || be.Status == http.StatusMisdirectedRequest ||
		be.Status == http.StatusUnsupportedMediaType || be.Status == http.StatusServiceUnavailable:
		s.log.Error("the bridge refused the portal", "cluster", cluster, "status", be.Status, "error", be.Msg)
		writeError(w, http.StatusBadGateway, api.Unavailable, fmt.Sprintf("%s: the bridge of cluster %q refused the portal", what, cluster),
			"tell the portal's admins: bridge_url or bridge_token_file does not match the bridge")
	default:
		writeError(w, http.StatusBadGateway, api.Unavailable, what+": "+be.Error(), "see the message; the bridge's log says more")
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
func (s *Server) overviewDeployments(ctx context.Context, c Cluster, user string, admin bool, tenants map[string]bool,
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
