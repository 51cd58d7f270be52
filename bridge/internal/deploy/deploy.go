// Package deploy turns a finished Slurm job that asked to be served into a
// model server on Kubernetes, and keeps the versions.
//
// Before anything is created the job passes every check (pure functions
// in checks.go): it completed with exit code 0 and asked to be served;
// its account maps to a tenant of serving.json that may serve; the model
// path exists, is under an allowed root and is readable; the deployment
// name is not another tenant's; and the tenant's serving quota has room.
// A refusal (*Refusal) names the check and says how to fix it.
//
// Then the renderer's objects are applied server-side with the bridge's
// field manager, objects of an older version that the new one no longer
// has are pruned, and the rollout is waited for with a timeout. Each
// deploy is a version keyed by the Slurm job id, recorded in the store
// before the apply and finished with its outcome after. A second deploy
// of the same version changes nothing (the apiserver keeps the
// resourceVersion and generation); rollback re-applies a stored version's
// objects; delete removes only the objects that carry the bridge's labels
// for that name, never the tenant's Namespace or ResourceQuota.
package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/render"
	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/bridgeapi"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Jobs is what the deployer needs of slurmrestd (*slurmrest.Client).
type Jobs interface {
	Job(ctx context.Context, id int64) (slurmrest.Job, error)
}

// Config of a Deployer.
type Config struct {
	Kube  *Kube
	Store *store.Store
	// Lease, when given, fences every change: an action starts only
	// while this bridge holds the lease, its store writes carry the
	// generation it started under, and every call that changes the
	// cluster (apply, prune, delete) is preceded by Lease.Check, so a
	// bridge that lost the lease (paused, cut off) makes no further call.
	// nil: nothing is fenced (SQLite, one bridge).
	Lease *store.Lease
	// Jobs reads a job for DeployJob; nil: only jobs with a stored version
	// can be deployed by id.
	Jobs Jobs
	// Serving returns serving.json in force (reloaded by the caller).
	Serving func() *servingquota.File

	AllowedRoots []string     // model paths must be under one of these
	Mount        config.Mount // how pods reach the shared file system
	RuntimesDir  string
	Defaults     servespec.Defaults
	KServe       bool
	// KServeDeploymentMode is config.KServeStandard or
	// config.KServeRawDeployment.
	KServeDeploymentMode string
	SpreadKey            string
	// HostRoot is where this host sees the Slurm side's "/" (for the
	// model and strata-serve.yaml): "" when the shared file system is
	// mounted at the same paths on both.
	HostRoot string

	// NoQuotaCheck leaves the serving quota to the apiserver's
	// ResourceQuota admission alone (CheckServingQuota is skipped): for
	// tests that show the apiserver enforcing it. The tier check stays.
	NoQuotaCheck bool

	RolloutTimeout time.Duration // default 5m
	RolloutPoll    time.Duration // default 1s

	Log     *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
}

// Deployer deploys, rolls back and deletes. One operation runs at a time.
type Deployer struct {
	cfg Config
	mu  sync.Mutex
}

// New makes a deployer.
func New(cfg Config) (*Deployer, error) {
	if cfg.Kube == nil || cfg.Store == nil || cfg.Serving == nil {
		return nil, errors.New("deploy: Kube, Store and Serving are required")
	}
	if cfg.RolloutTimeout <= 0 {
		cfg.RolloutTimeout = 5 * time.Minute
	}
	if cfg.RolloutPoll <= 0 {
		cfg.RolloutPoll = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Deployer{cfg: cfg}, nil
}

// SetLease fences the deployer's changes by l (Config.Lease), for a verb
// that takes the lease after the deployer was made.
func (d *Deployer) SetLease(l *store.Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg.Lease = l
}

// Options of one operation.
type Options struct {
	// DryRun runs the checks and a server-side dry run of the apply (or
	// delete), and records nothing.
	DryRun bool
	// Reason says who asked, for the log line and the event: "job
	// completed and asked to be served", "strata-bridge deploy", "API".
	Reason string
	// resumed: the apply finishes one another bridge began (Resume), so
	// objects it left unchanged were that one's changes, and the event
	// says the rollout's outcome, not "unchanged".
	resumed bool
}

// Outcomes of a Result beyond the store's (ready, timeout, failed).
const (
	OutcomeDryRun    = "dry-run"
	OutcomeUnchanged = "unchanged" // metrics and events: ready, and nothing changed
)

// Result is what a deploy or rollback did; the API answers it as
// bridgeapi.Result (Contract).
type Result struct {
	Action    string      `json:"action"` // deploy or rollback
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	Tenant    string      `json:"tenant"`
	Project   string      `json:"project,omitempty"`
	JobID     int64       `json:"job_id"`
	Version   string      `json:"version"`
	DryRun    bool        `json:"dry_run,omitempty"`
	Changed   bool        `json:"changed"`
	Outcome   string      `json:"outcome"` // ready, timeout, failed, dry-run
	Message   string      `json:"message"`
	Objects   []Applied   `json:"objects"`
	Pruned    []ObjectRef `json:"pruned,omitempty"`
	// Rollout says, before the rollout starts, how the new version
	// replaces the old: with a surge replica, or one replica at a time
	// because the tenant's quota has no room for one.
	Rollout string `json:"rollout,omitempty"`
}

// Contract is the result as the API answers it (internal/bridgeapi):
// the same JSON, without the applied objects themselves.
func (r *Result) Contract() bridgeapi.Result {
	out := bridgeapi.Result{Action: r.Action, Name: r.Name, Namespace: r.Namespace, Tenant: r.Tenant, Project: r.Project, JobID: r.JobID,
		Version: r.Version, DryRun: r.DryRun, Changed: r.Changed, Outcome: r.Outcome, Message: r.Message, Pruned: r.Pruned, Rollout: r.Rollout}
	if r.Objects != nil {
		out.Objects = make([]bridgeapi.Applied, 0, len(r.Objects))
	}
	for _, a := range r.Objects {
		out.Objects = append(out.Objects, bridgeapi.Applied{ObjectRef: a.ObjectRef, Action: a.Action,
			GenerationBefore: a.GenerationBefore, GenerationAfter: a.GenerationAfter})
	}
	return out
}

// plan is a version ready to apply: every check passed.
type plan struct {
	version store.Version
	objects []*unstructured.Unstructured
	rollout string // how it rolls out (SurgeRoom); "" for a rollback
	// rolloutEvent records rollout as an event before the rollout: an
	// update that has no room for a surge replica.
	rolloutEvent bool
}

// hold starts an action that changes the cluster under the lease: the
// generation it runs under rides in the returned context (the store's
// writes carry it); a *store.LostError when this bridge holds no lease.
func (d *Deployer) hold(ctx context.Context) (context.Context, error) {
	if d.cfg.Lease == nil {
		return ctx, nil
	}
	gen := d.cfg.Lease.Generation()
	if err := d.cfg.Lease.Check(ctx, gen); err != nil {
		return ctx, err
	}
	return store.WithGeneration(ctx, gen), nil
}

// fence is asked before every call that changes the cluster: nil while
// the action's generation is still the lease's.
func (d *Deployer) fence(ctx context.Context) error {
	if d.cfg.Lease == nil {
		return nil
	}
	gen, _ := store.GenerationOf(ctx)
	return d.cfg.Lease.Check(ctx, gen)
}

// quotaCheck is CheckServingQuota, unless the configuration leaves the
// quota to the apiserver alone.
func (d *Deployer) quotaCheck(t servingquota.Tenant, others []store.Usage, name string, ask Ask) error {
	if d.cfg.NoQuotaCheck {
		return CheckTierAllowed(t, ask)
	}
	return CheckServingQuota(t, others, name, ask)
}

// local maps a path of the shared file system, as Slurm sees it, to this
// host.
func (d *Deployer) local(p string) string {
	if d.cfg.HostRoot == "" {
		return p
	}
	return filepath.Join(d.cfg.HostRoot, p)
}

// Deploy serves the model of a finished job: the checks, then the apply
// and the rollout.
func (d *Deployer) Deploy(ctx context.Context, j slurmrest.Job, opt Options) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := CheckFinished(j); err != nil {
		return nil, d.refused(ctx, "deploy", "", j.ID, err)
	}
	spec, err := JobSpec(j, d.local, d.cfg.Defaults)
	if err != nil {
		if errors.Is(err, ErrNotRequested) {
			return nil, err
		}
		return nil, d.refused(ctx, "deploy", "", j.ID, err)
	}
	p, err := d.plan(ctx, spec, j.ID, j.User, j.Account)
	if err != nil {
		return nil, d.refused(ctx, "deploy", spec.Name, j.ID, err)
	}
	return d.apply(ctx, "deploy", p, opt)
}

// DeployJob deploys the job with this id, read from slurmrestd; a job
// slurmctld has forgotten (after MinJobAge) is deployed again from its
// stored version, if there is one. A non-empty name serves a job that did
// not ask to be served, as --comment=strata:serve=<name> would have (its
// working directory); a job that asked keeps what it asked for.
func (d *Deployer) DeployJob(ctx context.Context, id int64, name string, opt Options) (*Result, error) {
	var slurmErr error
	if d.cfg.Jobs != nil {
		j, err := d.cfg.Jobs.Job(ctx, id)
		if err == nil {
			if _, marked := servespec.FromComment(j.Comment); !marked && name != "" {
				j.Comment = strings.TrimSpace(j.Comment + " strata:serve=" + name)
			}
			return d.Deploy(ctx, j, opt)
		}
		if !errors.Is(err, slurmrest.ErrNotFound) {
			return nil, fmt.Errorf("read job %d from slurmrestd: %w", id, err)
		}
		slurmErr = err
	}
	v, err := d.cfg.Store.Version(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		if slurmErr != nil {
			return nil, d.refused(ctx, "deploy", "", id, refuse(CheckJob, "check the job id (sacct -j <id>); a job the bridge never deployed must be deployed while slurmctld still lists it (MinJobAge)",
				"slurmctld does not know job %d and the bridge has no version of it", id))
		}
		return nil, fmt.Errorf("job %d: no slurmrestd configured and no stored version", id)
	}
	if err != nil {
		return nil, err
	}
	var spec servespec.Spec
	if err := json.Unmarshal(v.Spec, &spec); err != nil {
		return nil, fmt.Errorf("stored spec of job-%d: %w", id, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.plan(ctx, &spec, v.JobID, v.User, v.Account)
	if err != nil {
		return nil, d.refused(ctx, "deploy", spec.Name, id, err)
	}
	return d.apply(ctx, "deploy", p, opt)
}

// Ping says whether the Kubernetes cluster can be deployed to (see
// Kube.Ping).
func (d *Deployer) Ping(ctx context.Context) error { return d.cfg.Kube.Ping(ctx) }

// plan runs the checks and renders the objects.
func (d *Deployer) plan(ctx context.Context, spec *servespec.Spec, jobID int64, user, account string) (*plan, error) {
	owner, err := CheckAccount(d.cfg.Serving(), account)
	if err != nil {
		return nil, err
	}
	t := owner.Tenant
	existing, err := d.cfg.Store.Deployment(ctx, spec.Name)
	switch {
	case err == nil:
		if err := CheckNameFree(&existing, spec.Name, t.Name, t.Namespace); err != nil {
			return nil, err
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if err := CheckModelPath(spec.ModelPath, d.cfg.AllowedRoots, d.local); err != nil {
		return nil, err
	}
	rt, err := render.LoadRuntime(d.cfg.RuntimesDir, spec.Runtime)
	if err != nil {
		return nil, refuse(CheckSpec, "use a runtime of "+d.cfg.RuntimesDir+" (runtime: in strata-serve.yaml)",
			"runtime %q: %v", spec.Runtime, err)
	}
	if err := servingquota.CheckTier(render.Tier(spec, rt)); err != nil {
		return nil, refuse(CheckSpec, "correct tier: in strata-serve.yaml or the runtime template", "%v", err)
	}
	ask := Ask{GPUs: render.GPUs(spec, rt), Tier: render.Tier(spec, rt), MaxReplicas: spec.MaxReplicas()}
	usage, err := d.cfg.Store.Usage(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	if err := d.quotaCheck(*t, usage, spec.Name, ask); err != nil {
		return nil, err
	}
	surge, note := SurgeRoom(*t, usage, spec.Name, ask)
	// An update without a surge replica takes a replica down before its
	// new one is up: said as an event too, which status shows.
	warn := !surge && existing.State == store.StateActive
	objs, err := render.Render(render.Input{Spec: *spec, JobID: jobID, User: user, Account: account, Tenant: t.Name, Project: owner.Project,
		Namespace: t.Namespace, Quota: *t, Runtime: rt, Mount: d.cfg.Mount, KServe: d.cfg.KServe, KServeDeploymentMode: d.cfg.KServeDeploymentMode,
		SpreadKey: d.cfg.SpreadKey, Surge: surge})
	if err != nil {
		return nil, refuse(CheckSpec, "correct the serve request and deploy again", "render: %v", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	objJSON, err := json.Marshal(objs)
	if err != nil {
		return nil, err
	}
	return &plan{objects: objs, rollout: note, rolloutEvent: warn, version: store.Version{JobID: jobID, Name: spec.Name, Namespace: t.Namespace, Tenant: t.Name,
		Project: owner.Project, Account: account, User: user, GPUs: ask.GPUs, Tier: ask.Tier, MaxReplicas: ask.MaxReplicas, ModelPath: spec.ModelPath,
		Spec: specJSON, Objects: objJSON}}, nil
}

// refused counts and logs a refusal and records it as an event when the
// deployment's name is known; other errors pass through. A refusal whose
// event could not be written (the database locked past every retry) is
// not reported as a refusal: it comes back as an *UnrecordedError, so the
// watcher tries the job again and the API answers 500 rather than a
// verdict nothing remembers.
func (d *Deployer) refused(ctx context.Context, action, name string, jobID int64, err error) error {
	var r *Refusal
	if !errors.As(err, &r) {
		return err
	}
	if name != "" {
		if e := d.cfg.Store.AddEvent(context.WithoutCancel(ctx), store.Event{Name: name, JobID: jobID, Action: action,
			Outcome: "refused", Message: r.Error(), At: d.cfg.Now()}); e != nil {
			d.cfg.Log.Error(action+" refused, but the refusal could not be recorded", "name", name, "job_id", jobID,
				"check", r.Check, "error", e)
			return &UnrecordedError{Action: action + " refusal", Name: name, Outcome: r.Error(), Err: e}
		}
	}
	if d.cfg.Metrics != nil {
		d.cfg.Metrics.Refusals.WithLabelValues(r.Check).Inc()
	}
	d.cfg.Log.Warn(action+" refused", "name", name, "job_id", jobID, "check", r.Check, "reason", r.Reason, "fix", r.Fix)
	return err
}

// UnrecordedError is an action (or a refusal) whose record the store did
// not take: what happened is in Outcome, and it is not reported as done.
type UnrecordedError struct {
	Action, Name string
	Outcome      string
	Err          error
}

func (e *UnrecordedError) Error() string {
	return fmt.Sprintf("%s of %s could not be recorded (%s): %v", e.Action, e.Name, e.Outcome, e.Err)
}

func (e *UnrecordedError) Unwrap() error { return e.Err }

// apply applies a plan's objects, prunes what the version no longer has,
// waits for the rollout and records the outcome.
func (d *Deployer) apply(ctx context.Context, action string, p *plan, opt Options) (*Result, error) {
	v := p.version
	res := &Result{Action: action, Name: v.Name, Namespace: v.Namespace, Tenant: v.Tenant, Project: v.Project, JobID: v.JobID,
		Version: render.Version(v.JobID), DryRun: opt.DryRun, Rollout: p.rollout}
	keep := map[ObjectRef]bool{}
	for _, o := range p.objects {
		keep[Ref(o)] = true
	}
	if opt.DryRun {
		for _, o := range p.objects {
			a, err := d.cfg.Kube.Apply(ctx, o, true)
			if err != nil {
				return nil, fmt.Errorf("dry run of %s: %w", a.ObjectRef, err)
			}
			res.Objects = append(res.Objects, a)
			res.Changed = res.Changed || a.Action != ActionUnchanged
		}
		stale, err := d.stale(ctx, v.Namespace, v.Name, p.objects, keep)
		if err != nil {
			return nil, err
		}
		for _, o := range stale {
			res.Pruned = append(res.Pruned, Ref(o))
		}
		res.Changed = res.Changed || len(res.Pruned) > 0
		res.Outcome, res.Message = OutcomeDryRun, summary(res)
		return res, nil
	}

	ctx, err := d.hold(ctx)
	if err != nil {
		return nil, err
	}
	start := d.cfg.Now()
	v.CreatedAt = start
	if err := d.cfg.Store.StartVersion(ctx, v, action); err != nil {
		var taken *store.NameTakenError
		if errors.As(err, &taken) {
			return nil, d.refused(ctx, action, v.Name, v.JobID, CheckNameFree(&store.Deployment{Name: taken.Name, Tenant: taken.Tenant,
				Namespace: taken.Namespace, State: store.StateActive}, v.Name, v.Tenant, v.Namespace))
		}
		return nil, err
	}
	finish := func(outcome, msg string, applied bool) (*Result, error) {
		res.Outcome, res.Message = outcome, msg
		at := d.cfg.Now()
		eventOutcome := outcome
		if outcome == store.OutcomeReady && !res.Changed && !opt.resumed {
			eventOutcome = OutcomeUnchanged
		}
		// Record even when the caller has gone: the cluster has changed.
		if err := d.cfg.Store.FinishVersion(context.WithoutCancel(ctx), store.Finish{Name: v.Name, JobID: v.JobID, Action: action,
			Outcome: outcome, EventOutcome: eventOutcome, Message: msg, Applied: applied, At: at}); err != nil {
			return res, fmt.Errorf("record the outcome of %s %s: %w", v.Name, res.Version, err)
		}
		if d.cfg.Metrics != nil {
			d.cfg.Metrics.Deploys.WithLabelValues(action, eventOutcome).Inc()
			d.cfg.Metrics.RolloutSeconds.Observe(at.Sub(start).Seconds())
		}
		log := d.cfg.Log.Info
		if outcome != store.OutcomeReady {
			log = d.cfg.Log.Warn
		}
		log(action+" finished", "name", v.Name, "namespace", v.Namespace, "tenant", v.Tenant, "job_id", v.JobID, "version", res.Version,
			"outcome", eventOutcome, "changed", res.Changed, "reason", opt.Reason, "message", msg)
		return res, nil
	}

	if p.rolloutEvent {
		// Said before the rollout starts: in the log, and as an event
		// that strata-bridge status shows.
		d.cfg.Log.Warn(action+" without a surge replica", "name", v.Name, "namespace", v.Namespace, "tenant", v.Tenant, "job_id", v.JobID, "rollout", p.rollout)
		if err := d.cfg.Store.AddEvent(ctx, store.Event{Name: v.Name, JobID: v.JobID, Action: action, Outcome: "rollout",
			Message: p.rollout, At: start}); err != nil {
			r, ferr := finish(store.OutcomeFailed, "record the rollout: "+err.Error(), false)
			return r, errors.Join(err, ferr)
		}
	}
	for _, o := range p.objects {
		if err := d.fence(ctx); err != nil {
			// Not this bridge's to record any more: the holder of the
			// lease finishes the version (Resume).
			return nil, err
		}
		a, err := d.cfg.Kube.Apply(ctx, o, false)
		if err != nil {
			msg := err.Error()
			if len(res.Objects) > 0 {
				msg += fmt.Sprintf(" (after %d of %d objects were applied)", len(res.Objects), len(p.objects))
			}
			r, ferr := finish(store.OutcomeFailed, msg, false)
			return r, errors.Join(fmt.Errorf("%s %s: %w", action, v.Name, err), ferr)
		}
		res.Objects = append(res.Objects, a)
		res.Changed = res.Changed || a.Action != ActionUnchanged
	}
	stale, err := d.stale(ctx, v.Namespace, v.Name, p.objects, keep)
	if err != nil {
		r, ferr := finish(store.OutcomeFailed, "prune: "+err.Error(), true)
		return r, errors.Join(err, ferr)
	}
	for _, o := range stale {
		if err := d.fence(ctx); err != nil {
			return nil, err
		}
		if err := d.cfg.Kube.Delete(ctx, o, false); err != nil {
			r, ferr := finish(store.OutcomeFailed, "prune: "+err.Error(), true)
			return r, errors.Join(err, ferr)
		}
		res.Pruned = append(res.Pruned, Ref(o))
		res.Changed = true
	}
	ro, err := d.wait(ctx, p.objects)
	switch {
	case err != nil:
		r, ferr := finish(store.OutcomeFailed, "rollout: "+err.Error(), true)
		return r, errors.Join(err, ferr)
	case ro.Failed:
		return finish(store.OutcomeFailed, ro.Message, true)
	case !ro.Done:
		return finish(store.OutcomeTimeout, fmt.Sprintf("not rolled out after %s: %s", d.cfg.RolloutTimeout, ro.Message), true)
	}
	return finish(store.OutcomeReady, summary(res)+"; "+ro.Message, true)
}

// summary says in a line what an apply did.
func summary(res *Result) string {
	count := map[string]int{}
	for _, a := range res.Objects {
		count[a.Action]++
	}
	var parts []string
	for _, a := range []string{ActionCreated, ActionConfigured, ActionUnchanged} {
		if count[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[a], a))
		}
	}
	if len(res.Pruned) > 0 {
		parts = append(parts, fmt.Sprintf("%d pruned", len(res.Pruned)))
	}
	if len(parts) == 0 {
		return "no objects"
	}
	s := strings.Join(parts, ", ")
	if res.DryRun {
		s = "would be " + s
	}
	return s
}

// stale lists the deployment's objects in the cluster that the version
// being applied does not have.
func (d *Deployer) stale(ctx context.Context, namespace, name string, objs []*unstructured.Unstructured, keep map[ObjectRef]bool) ([]*unstructured.Unstructured, error) {
	have, err := d.cfg.Kube.ListManaged(ctx, namespace, name, deletableKinds(objs))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range have {
		r := Ref(o)
		if !keep[r] && !shared(r.Kind) {
			out = append(out, o)
		}
	}
	return out, nil
}

// wait polls the workload until its rollout is done, failed, or the
// timeout passes.
func (d *Deployer) wait(ctx context.Context, objs []*unstructured.Unstructured) (Rollout, error) {
	var work *unstructured.Unstructured
	for _, o := range objs {
		if k := o.GetKind(); k == "Deployment" || k == "InferenceService" {
			work = o
		}
	}
	if work == nil {
		return Rollout{Done: true, Message: "no workload to wait for"}, nil
	}
	timeout := time.NewTimer(d.cfg.RolloutTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(d.cfg.RolloutPoll)
	defer tick.Stop()
	last := Rollout{Message: "not read yet"}
	for {
		obj, err := d.cfg.Kube.Get(ctx, Ref(work))
		switch {
		case err != nil:
			return last, err
		case obj == nil:
			return last, fmt.Errorf("%s is gone", Ref(work))
		}
		last = RolloutStatus(obj)
		if last.Done || last.Failed {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-timeout.C:
			return last, nil
		case <-tick.C:
		}
	}
}

// Rollback re-applies a stored version of a deployment: the one whose job
// is to, or (to 0) the newest ready version before the current one. The
// version's model must still be there and the tenant's quota must still
// hold it.
func (d *Deployer) Rollback(ctx context.Context, name string, to int64, opt Options) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dep, err := d.cfg.Store.Deployment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, d.refused(ctx, "rollback", "", to, refuse(CheckVersion, "see the deployments with strata-bridge list",
			"there is no deployment named %q", name))
	}
	if err != nil {
		return nil, err
	}
	if dep.State != store.StateActive {
		return nil, d.refused(ctx, "rollback", name, to, refuse(CheckVersion, "deploy a version again with strata-bridge deploy --job <id>",
			"deployment %s was deleted; there is nothing to roll back", name))
	}
	versions, err := d.cfg.Store.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	target, err := pickRollback(versions, dep.Current, to)
	if err != nil {
		return nil, d.refused(ctx, "rollback", name, to, err)
	}
	p, err := d.replan(ctx, target)
	if err != nil {
		return nil, d.refused(ctx, "rollback", name, target.JobID, err)
	}
	return d.apply(ctx, "rollback", p, opt)
}

// pickRollback chooses the version a rollback restores.
func pickRollback(versions []store.Version, current, to int64) (store.Version, error) {
	var list []string
	for _, v := range versions {
		list = append(list, fmt.Sprintf("%s (%s)", render.Version(v.JobID), v.Outcome))
	}
	known := "its versions are " + strings.Join(list, ", ")
	if to != 0 {
		for _, v := range versions {
			if v.JobID == to {
				return v, nil
			}
		}
		return store.Version{}, refuse(CheckVersion, "name one of them with --to job-<id>", "%s is not a version of this deployment; %s",
			render.Version(to), known)
	}
	idx := -1
	for i, v := range versions {
		if v.JobID == current {
			idx = i
		}
	}
	for i := idx - 1; i >= 0; i-- {
		if versions[i].Outcome == store.OutcomeReady {
			return versions[i], nil
		}
	}
	return store.Version{}, refuse(CheckVersion, "name a version with --to job-<id>",
		"no version before the current one (%s) ever rolled out; %s", render.Version(current), known)
}

// replan checks a stored version again (its account's tenant, its model,
// the quota) and returns its stored objects, less the tenant's shared
// ones.
func (d *Deployer) replan(ctx context.Context, v store.Version) (*plan, error) {
	owner, err := CheckAccount(d.cfg.Serving(), v.Account)
	if err != nil {
		return nil, err
	}
	if owner.Tenant.Name != v.Tenant || owner.Tenant.Namespace != v.Namespace {
		return nil, refuse(CheckTenant, "deploy the model again with strata-bridge deploy --job <id>, which renders it for its new tenant",
			"account %s now belongs to tenant %s (namespace %s), not %s (namespace %s) as when %s was deployed",
			v.Account, owner.Tenant.Name, owner.Tenant.Namespace, v.Tenant, v.Namespace, render.Version(v.JobID))
	}
	if err := CheckModelPath(v.ModelPath, d.cfg.AllowedRoots, d.local); err != nil {
		return nil, err
	}
	usage, err := d.cfg.Store.Usage(ctx, v.Tenant)
	if err != nil {
		return nil, err
	}
	if err := d.quotaCheck(*owner.Tenant, usage, v.Name, Ask{GPUs: v.GPUs, Tier: v.Tier, MaxReplicas: v.MaxReplicas}); err != nil {
		return nil, err
	}
	stored, err := decodeObjects(v.Objects)
	if err != nil {
		return nil, fmt.Errorf("stored objects of %s: %w", render.Version(v.JobID), err)
	}
	// The tenant's Namespace and ResourceQuota stay as the latest deploy
	// left them: the stored ones may hold a quota the policy has changed
	// since.
	var objs []*unstructured.Unstructured
	for _, o := range stored {
		if !shared(o.GetKind()) {
			objs = append(objs, o)
		}
	}
	return &plan{version: v, objects: objs}, nil
}

func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(raw))
	for i, r := range raw {
		out[i] = &unstructured.Unstructured{}
		if err := out[i].UnmarshalJSON(r); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
	}
	return out, nil
}

// deleteFailed records a delete that stopped at an object (what it had
// removed by then, and why it stopped) and returns the error, joined with
// the store's when the event could not be written.
func (d *Deployer) deleteFailed(ctx context.Context, dep store.Deployment, res *DeleteResult, err error, opt Options) error {
	var names []string
	for _, r := range res.Deleted {
		names = append(names, r.Kind+"/"+r.Name)
	}
	msg := fmt.Sprintf("delete failed after %d objects (%s): %v", len(res.Deleted), strings.Join(names, ", "), err)
	d.cfg.Log.Warn("delete failed", "name", dep.Name, "namespace", dep.Namespace, "tenant", dep.Tenant, "objects", len(res.Deleted),
		"reason", opt.Reason, "error", err)
	if e := d.cfg.Store.AddEvent(context.WithoutCancel(ctx), store.Event{Name: dep.Name, Action: "delete", Outcome: store.OutcomeFailed,
		Message: msg, At: d.cfg.Now()}); e != nil {
		d.cfg.Log.Error("recording a failed delete failed", "name", dep.Name, "error", e)
		return errors.Join(err, &UnrecordedError{Action: "failed delete", Name: dep.Name, Outcome: msg, Err: e})
	}
	return err
}

// DeleteResult is what a delete removed (or, dry, would remove): the
// bridge's API contract.
type DeleteResult = bridgeapi.DeleteResult

// Delete removes a deployment's objects: only those that carry the
// bridge's labels for this name (managed-by=strata and
// app.kubernetes.io/name=<name>) in its namespace, never the tenant's
// Namespace or ResourceQuota. The versions stay in the store.
func (d *Deployer) Delete(ctx context.Context, name string, opt Options) (*DeleteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dep, err := d.cfg.Store.Deployment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("there is no deployment named %q (strata-bridge list shows them): %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	versions, err := d.cfg.Store.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	var stored []*unstructured.Unstructured
	for _, v := range versions {
		objs, err := decodeObjects(v.Objects)
		if err == nil {
			stored = append(stored, objs...)
		}
	}
	if !opt.DryRun {
		if ctx, err = d.hold(ctx); err != nil {
			return nil, err
		}
	}
	res := &DeleteResult{Name: name, Namespace: dep.Namespace, DryRun: opt.DryRun, Deleted: []ObjectRef{}}
	objs, err := d.cfg.Kube.ListManaged(ctx, dep.Namespace, name, deletableKinds(stored))
	if err != nil {
		if opt.DryRun {
			return nil, err
		}
		return nil, d.deleteFailed(ctx, dep, res, err, opt)
	}
	for _, o := range objs {
		if shared(o.GetKind()) {
			continue
		}
		if !opt.DryRun {
			if err := d.fence(ctx); err != nil {
				return res, err
			}
		}
		if err := d.cfg.Kube.Delete(ctx, o, opt.DryRun); err != nil {
			if opt.DryRun {
				return res, err
			}
			if d.cfg.Metrics != nil {
				d.cfg.Metrics.Deletes.WithLabelValues(store.OutcomeFailed).Inc()
			}
			return res, d.deleteFailed(ctx, dep, res, err, opt)
		}
		res.Deleted = append(res.Deleted, Ref(o))
	}
	if opt.DryRun {
		return res, nil
	}
	var names []string
	for _, r := range res.Deleted {
		names = append(names, r.Kind+"/"+r.Name)
	}
	msg := fmt.Sprintf("deleted %d objects: %s", len(res.Deleted), strings.Join(names, ", "))
	if err := d.cfg.Store.MarkDeleted(context.WithoutCancel(ctx), name, msg, d.cfg.Now()); err != nil {
		d.cfg.Log.Error("delete done in the cluster, but not recorded", "name", name, "namespace", dep.Namespace,
			"objects", len(res.Deleted), "error", err)
		return res, &UnrecordedError{Action: "delete", Name: name, Outcome: msg, Err: err}
	}
	if d.cfg.Metrics != nil {
		d.cfg.Metrics.Deletes.WithLabelValues("deleted").Inc()
	}
	d.cfg.Log.Info("delete finished", "name", name, "namespace", dep.Namespace, "tenant", dep.Tenant, "objects", len(res.Deleted),
		"reason", opt.Reason, "message", msg)
	return res, nil
}

// Resume finishes every version whose apply began and never finished:
// the bridge that held the lease stopped in the middle (it died, was
// paused, or lost the database). The bridge that takes the lease over
// calls it before it acts on anything else. Each version's stored
// objects are applied again, as the other bridge would have applied
// them: server-side apply makes an object it had already applied
// unchanged, so nothing is created twice, and the version is finished
// with its outcome and one event, the first its deploy or rollback has.
// A version whose checks now fail (its tenant, its model, the quota) is
// finished as failed, saying why, and not applied.
func (d *Deployer) Resume(ctx context.Context) ([]*Result, error) {
	pending, err := d.cfg.Store.Applying(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the versions left applying: %w", err)
	}
	var out []*Result
	for _, p := range pending {
		res, err := d.resume(ctx, p)
		if err != nil {
			return out, fmt.Errorf("resume %s of %s %s: %w", p.Action, p.Name, render.Version(p.JobID), err)
		}
		out = append(out, res)
	}
	return out, nil
}

func (d *Deployer) resume(ctx context.Context, p store.Pending) (*Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg.Log.Info("resuming "+p.Action+" left applying", "name", p.Name, "job_id", p.JobID)
	pl, err := d.replan(ctx, p.Version)
	if err != nil {
		var r *Refusal
		if !errors.As(err, &r) {
			return nil, err
		}
		hctx, err := d.hold(ctx)
		if err != nil {
			return nil, err
		}
		msg := "not resumed after the lease changed hands: " + r.Error()
		if err := d.cfg.Store.FinishVersion(hctx, store.Finish{Name: p.Name, JobID: p.JobID, Action: p.Action, Outcome: store.OutcomeFailed,
			Message: msg, At: d.cfg.Now()}); err != nil {
			return nil, err
		}
		return &Result{Action: p.Action, Name: p.Name, Namespace: p.Namespace, Tenant: p.Tenant, Project: p.Project, JobID: p.JobID,
			Version: render.Version(p.JobID), Outcome: store.OutcomeFailed, Message: msg}, nil
	}
	if p.Action == "deploy" {
		// A first deploy may have stopped before the tenant's Namespace
		// was made: apply every object it stored, in its order.
		all, err := decodeObjects(p.Objects)
		if err != nil {
			return nil, fmt.Errorf("stored objects: %w", err)
		}
		pl.objects = all
	}
	return d.apply(ctx, p.Action, pl, Options{Reason: "resumed after the lease changed hands", resumed: true})
}
