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
	CheckTier    = "tier"    // the tenant may use the GPU sharing tier asked for
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
	if !o.Tenant.MayServe() {
		return o, refuse(CheckTenant,
			"give the tenant a serving: block (gpus, replicas, tiers) in policy.yaml and run `strata-policy render`",
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
	GPUs        int    // per replica, of Tier's resource
	Tier        string // "": dedicated
	MaxReplicas int
}

func tierOf(t string) string {
	if t == "" {
		return servingquota.TierDedicated
	}
	return t
}

// held is what the tenant's other active deployments hold: of the tier
// asked for, and replicas.
type held struct {
	tierGPUs, replicas int
	text               string // "a (2 GPUs x 2 replicas), b (...) hold 4 GPUs and 3 replicas"
}

func holding(t servingquota.Tenant, others []store.Usage, name, tier, unit string) held {
	var h held
	var list []string
	for _, u := range others {
		if u.Name == name || u.Tenant != t.Name {
			continue
		}
		h.replicas += u.MaxReplicas
		if u.GPUs > 0 && tierOf(u.Tier) == tier {
			h.tierGPUs += u.GPUs * u.MaxReplicas
			list = append(list, fmt.Sprintf("%s (%d %s x %d replicas)", u.Name, u.GPUs, unit, u.MaxReplicas))
		} else {
			list = append(list, fmt.Sprintf("%s (%d replicas)", u.Name, u.MaxReplicas))
		}
	}
	h.text = "no other deployment holds any"
	if len(list) > 0 {
		h.text = fmt.Sprintf("%s hold %d %s and %d replicas", strings.Join(list, ", "), h.tierGPUs, unit, h.replicas)
	}
	return h
}

// unit names what a tier's quota counts, in messages.
func unit(tier servingquota.Tier) string {
	if tier.Name == servingquota.TierDedicated {
		return "GPUs"
	}
	return tier.Resource
}

// policyLine says where in the policy a quota comes from.
func policyLine(line int) string {
	if line == 0 {
		return "in the policy"
	}
	return fmt.Sprintf("at line %d of the policy", line)
}

// CheckTierAllowed refuses a deployment whose GPUs are of a tier the
// tenant may not use, naming the policy line of the tenant's serving:
// block and the tiers it may use.
func CheckTierAllowed(t servingquota.Tenant, ask Ask) error {
	tierName := tierOf(ask.Tier)
	if ask.GPUs > 0 {
		if _, ok := t.Allowed(tierName); !ok {
			may := strings.Join(t.TierNames(), ", ")
			if may == "" {
				may = "none (it may serve on CPUs only)"
			}
			fixTier := "name a tier the tenant may use (tier: in strata-serve.yaml, or the runtime's), or add " + tierName +
				" to the tenant's serving.tiers in policy.yaml and run `strata-policy render`"
			if tierName == servingquota.TierDedicated {
				fixTier = "name a tier the tenant may use (tier: in strata-serve.yaml, or the runtime's), or give the tenant serving.gpus in policy.yaml and run `strata-policy render`"
			}
			if tierName == servingquota.TierTimeSliced && t.Isolation {
				fixTier = "name an isolated tier (mig-<profile>, mps or dedicated) the tenant may use: time slices share GPU memory and faults, and the tenant asks for isolation (serving.isolation)"
			}
			why := ""
			if tierName == servingquota.TierTimeSliced && t.Isolation {
				why = "; time slices share a GPU's memory and faults, and the tenant asks for isolation"
			}
			return refuse(CheckTier, fixTier, "tenant %s may not use GPU tier %s (its serving: block, %s, allows %s)%s",
				t.Name, tierName, policyLine(t.ServingLine), may, why)
		}
	}
	return nil
}

// CheckServingQuota refuses a deployment whose GPUs are of a tier the
// tenant may not use (CheckTierAllowed), or when the tenant's other
// active deployments (not name: a new version replaces the old one) plus
// this one would ask for more of the tier (GPUs per replica times the
// most replicas) or more replicas than the tenant's serving quota.
func CheckServingQuota(t servingquota.Tenant, others []store.Usage, name string, ask Ask) error {
	const fix = "lower gpus, replicas or autoscale.max_replicas in strata-serve.yaml, delete a deployment (strata-bridge delete <name>), " +
		"or raise the tenant's serving quota in policy.yaml and run `strata-policy render`"
	if err := CheckTierAllowed(t, ask); err != nil {
		return err
	}
	tierName := tierOf(ask.Tier)
	tier := servingquota.Tier{Name: tierName, Resource: servingquota.Resource(tierName)}
	if ask.GPUs > 0 {
		tier, _ = t.Allowed(tierName)
	}
	u := unit(tier)
	h := holding(t, others, name, tierName, u)
	askGPUs := ask.GPUs * ask.MaxReplicas
	if askGPUs > 0 && h.tierGPUs+askGPUs > tier.Quota {
		what := fmt.Sprintf("%d %s", tier.Quota, u)
		if tierName != servingquota.TierDedicated {
			what = fmt.Sprintf("%d %s (tier %s, %s)", tier.Quota, u, tierName, policyLine(tier.Line))
		}
		return refuse(CheckQuota, fix,
			"tenant %s's serving quota is %s; %s; %s asks for %d (%d per replica x %d replicas): %d > %d",
			t.Name, what, h.text, name, askGPUs, ask.GPUs, ask.MaxReplicas, h.tierGPUs+askGPUs, tier.Quota)
	}
	if h.replicas+ask.MaxReplicas > t.Replicas {
		return refuse(CheckQuota, fix,
			"tenant %s's serving quota is %d replicas; %s; %s asks for %d: %d > %d",
			t.Name, t.Replicas, h.text, name, ask.MaxReplicas, h.replicas+ask.MaxReplicas, t.Replicas)
	}
	return nil
}

// SurgeRoom says whether the tenant's serving quota leaves room for one
// surge replica of a deployment that passed CheckServingQuota (its tier's
// GPUs and a replica beyond what the tenant's deployments hold with this
// one), and says what that means for its rollout, for the deploy output
// and the status before the rollout starts.
func SurgeRoom(t servingquota.Tenant, others []store.Usage, name string, ask Ask) (bool, string) {
	tierName := tierOf(ask.Tier)
	tier, _ := t.Allowed(tierName)
	h := holding(t, others, name, tierName, unit(tier))
	needGPUs := h.tierGPUs + ask.GPUs*(ask.MaxReplicas+1)
	needReplicas := h.replicas + ask.MaxReplicas + 1
	var short []string
	if ask.GPUs > 0 && needGPUs > tier.Quota {
		short = append(short, fmt.Sprintf("tier %s would need %d of its %d %s", tierName, needGPUs, tier.Quota, unit(tier)))
	}
	if needReplicas > t.Replicas {
		short = append(short, fmt.Sprintf("replicas would need %d of %d", needReplicas, t.Replicas))
	}
	if len(short) == 0 {
		return true, "rolls out with one surge replica: each new replica starts before an old one stops, so the model stays up"
	}
	return false, fmt.Sprintf("no room in tenant %s's serving quota for a surge replica (%s): the rollout replaces one replica at a time, "+
		"and a model of one replica is down while its new version loads (raise the quota in policy.yaml for a rollout without downtime)",
		t.Name, strings.Join(short, "; "))
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
