package deploy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/userfile"
)

// Checks, as they appear in refusals and in the refusals metric.
const (
	CheckJob     = "job"     // the job finished well and asked to be served
	CheckSpec    = "spec"    // strata-serve.yaml or the comment is valid
	CheckTenant  = "tenant"  // the job's account maps to a tenant that may serve
	CheckModel   = "model"   // the model path exists, is under an allowed root and is readable
	CheckQuota   = "quota"   // the tenant's serving quota has room
	CheckName    = "name"    // the deployment name is not another tenant's
	CheckVersion = "version" // rollback: the version asked for exists
)

// Refusal is a check that failed before anything was created: which
// check, what is wrong, and what to do about it.
type Refusal struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
	Fix    string `json:"fix"`
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("refused by the %s check: %s (fix: %s)", r.Check, r.Reason, r.Fix)
}

func refuse(check, fix, format string, args ...any) *Refusal {
	return &Refusal{Check: check, Reason: fmt.Sprintf(format, args...), Fix: fix}
}

// CheckFinished refuses a job that has not finished with exit code 0.
func CheckFinished(j slurmrest.Job) error {
	if j.State.Base() != "COMPLETED" || j.ExitCode != 0 {
		return refuse(CheckJob, "serve the model of a job that completed; or resubmit the job and let it finish",
			"job %d is %s with exit code %d: only a job that completed with exit code 0 is served", j.ID, stateText(j.State), j.ExitCode)
	}
	return nil
}

func stateText(s slurmrest.JobState) string {
	if len(s) == 0 {
		return "in an unknown state"
	}
	return s.String()
}

// CheckAccount finds the tenant and project of the job's account in
// serving.json and refuses an account that is not there, or a tenant
// without a serving quota.
func CheckAccount(f *servingquota.File, account string) (servingquota.Owner, error) {
	if account == "" {
		return servingquota.Owner{}, refuse(CheckTenant, "submit the job with --account=<a project's account>",
			"the job has no account")
	}
	o, ok := f.Lookup(account)
	if !ok {
		return o, refuse(CheckTenant,
			"add the account to a tenant's project in the policy (policy.yaml), run `strata-policy render` to rewrite serving.json, then deploy again",
			"account %q is not in serving.json: no tenant or project owns it", account)
	}
	if o.Tenant.GPUs == 0 && o.Tenant.Replicas == 0 {
		return o, refuse(CheckTenant,
			"give the tenant a serving: block (gpus, replicas) in policy.yaml and run `strata-policy render`",
			"tenant %s may not serve models: its serving quota is 0 GPUs and 0 replicas", o.Tenant.Name)
	}
	return o, nil
}

// CheckModelPath checks a model path as the job gave it (a path on the
// shared file system, as the Slurm side sees it): absolute and clean,
// under one of the allowed roots, and, seen through local (how this host
// reaches that path), present and readable, and not leaving the root by a
// symbolic link.
func CheckModelPath(path string, allowedRoots []string, local func(string) string) error {
	const fixPath = "write the model under one of the allowed roots (models.allowed_roots in bridge.yaml) and give its absolute path"
	if path == "" {
		return refuse(CheckModel, "set model: in strata-serve.yaml", "the job names no model path")
	}
	if !filepath.IsAbs(path) {
		return refuse(CheckModel, fixPath, "model path %q is not absolute", path)
	}
	if filepath.Clean(path) != path {
		return refuse(CheckModel, fixPath, "model path %q is not clean (write it as %q)", path, filepath.Clean(path))
	}
	root := ""
	for _, r := range allowedRoots {
		if under(path, filepath.Clean(r)) {
			root = filepath.Clean(r)
			break
		}
	}
	if root == "" {
		return refuse(CheckModel, fixPath, "model path %s is not under an allowed root (%s)", path, strings.Join(allowedRoots, ", "))
	}
	lp, lroot := local(path), local(root)
	resolved, err := filepath.EvalSymlinks(lp)
	if errors.Is(err, fs.ErrNotExist) {
		return refuse(CheckModel, "check the path; the job must write the model before it ends",
			"model path %s does not exist (looked at %s)", path, lp)
	}
	if err != nil {
		return refuse(CheckModel, "make the path and its folders readable by the strata-bridge user (and the serving pods)",
			"model path %s cannot be resolved: %v", path, err)
	}
	realRoot, err := filepath.EvalSymlinks(lroot)
	if err != nil {
		return refuse(CheckModel, "check models.allowed_roots in bridge.yaml", "allowed root %s cannot be resolved: %v", root, err)
	}
	if !under(resolved, realRoot) {
		return refuse(CheckModel, fixPath, "model path %s leads outside %s by a symbolic link (to %s)", path, root, resolved)
	}
	rel, err := filepath.Rel(realRoot, resolved)
	if err != nil {
		return refuse(CheckModel, fixPath, "model path %s cannot be placed under %s: %v", path, root, err)
	}
	if err := readable(realRoot, filepath.ToSlash(rel)); err != nil {
		switch {
		case errors.Is(err, userfile.ErrNotRegular):
			return refuse(CheckModel, "give the path of the model's folder or file", "model path %s is neither a file nor a folder", path)
		case errors.Is(err, userfile.ErrSymlink), errors.Is(err, userfile.ErrEscapes):
			return refuse(CheckModel, fixPath+"; do not change it while the bridge checks it",
				"model path %s changed while it was checked: a component became a symbolic link", path)
		}
		return refuse(CheckModel, "make the model readable by all (chmod -R a+rX), as the serving pods run as another user",
			"model path %s is not readable: %v", path, err)
	}
	return nil
}

// under reports whether p is root or inside it (both clean).
func under(p, root string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// readable opens name (resolved already: it should hold no link) beneath
// root and reads from it: a byte of a file, a name of a folder. It opens
// as userfile does, so a component swapped for a link since it was
// resolved, or a file swapped for a FIFO, is refused instead of followed
// or waited on. The model may be another user's (a project's shared
// checkpoint): its owner is not checked, only that the bridge can read it.
func readable(root, name string) error {
	f, err := userfile.Open(root, name, userfile.Policy{AnyOwner: true, AllowDir: true})
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		if _, err := f.Readdirnames(1); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	if _, err := f.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Ask is what one deployment asks of its tenant's serving quota.
type Ask struct {
	GPUs        int // per replica
	MaxReplicas int
}

// CheckServingQuota refuses a deployment when the tenant's other active
// deployments (not name: a new version replaces the old one) plus this one
// would ask for more GPUs (GPUs per replica times the most replicas) or
// replicas than the tenant's serving quota.
func CheckServingQuota(t servingquota.Tenant, others []store.Usage, name string, ask Ask) error {
	usedGPUs, usedReplicas := 0, 0
	var held []string
	for _, u := range others {
		if u.Name == name || u.Tenant != t.Name {
			continue
		}
		usedGPUs += u.GPUs * u.MaxReplicas
		usedReplicas += u.MaxReplicas
		held = append(held, fmt.Sprintf("%s (%d GPUs x %d replicas)", u.Name, u.GPUs, u.MaxReplicas))
	}
	askGPUs := ask.GPUs * ask.MaxReplicas
	holding := "no other deployment holds any"
	if len(held) > 0 {
		holding = fmt.Sprintf("%s hold %d GPUs and %d replicas", strings.Join(held, ", "), usedGPUs, usedReplicas)
	}
	const fix = "lower gpus, replicas or autoscale.max_replicas in strata-serve.yaml, delete a deployment (strata-bridge delete <name>), " +
		"or raise the tenant's serving quota in policy.yaml and run `strata-policy render`"
	if usedGPUs+askGPUs > t.GPUs {
		return refuse(CheckQuota, fix,
			"tenant %s's serving quota is %d GPUs; %s; %s asks for %d (%d per replica x %d replicas): %d > %d",
			t.Name, t.GPUs, holding, name, askGPUs, ask.GPUs, ask.MaxReplicas, usedGPUs+askGPUs, t.GPUs)
	}
	if usedReplicas+ask.MaxReplicas > t.Replicas {
		return refuse(CheckQuota, fix,
			"tenant %s's serving quota is %d replicas; %s; %s asks for %d: %d > %d",
			t.Name, t.Replicas, holding, name, ask.MaxReplicas, usedReplicas+ask.MaxReplicas, t.Replicas)
	}
	return nil
}

// CheckNameFree refuses a name that is an active deployment of another tenant
// or namespace.
func CheckNameFree(existing *store.Deployment, name, tenant, namespace string) error {
	if existing == nil || existing.State != store.StateActive {
		return nil
	}
	if existing.Tenant != tenant || existing.Namespace != namespace {
		return refuse(CheckName, "choose another name (name: in strata-serve.yaml, or --comment=strata:serve=<name>)",
			"deployment name %q is in use by tenant %s (namespace %s)", name, existing.Tenant, existing.Namespace)
	}
	return nil
}
