package spec

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// Validate returns every semantic problem of p, each located with
// p.Positions (line 0 for a policy built in code, whose diagnostics name
// the path instead), sorted; nil when there is none. It accepts p before
// and after ApplyDefaults. file names the file in the diagnostics.
func (p *Policy) Validate(file string) Diagnostics {
	v := newValidator(file, p)
	v.header(p)
	v.cluster(p)
	v.classes(p)
	v.users("admins", "cluster admin", p.Admins)
	v.tenants(p)
	v.images(p)
	v.partitionUse(p)
	v.diags.Sort()
	return v.diags
}

// MaxAccountLen is the longest Slurm account name the policy allows.
const MaxAccountLen = 64

// maxCount is the largest number a count may hold: Slurm keeps shares,
// priorities and job limits in 32 bits.
const maxCount = math.MaxInt32

var (
	nameRE      = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	partitionRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	hostlistRE  = regexp.MustCompile(`^[A-Za-z0-9_.,\[\]-]+$`)
	diskPathRE  = regexp.MustCompile(`^/[A-Za-z0-9._+@/-]*$`)
)

// roles are the roles a project member may have.
var roles = []string{RoleMember, RoleViewer, RoleTenantAdmin}

// preemptModes are the values of Class.PreemptMode.
var preemptModes = []string{PreemptRequeue, PreemptCancel, PreemptSuspend}

// filesystems are the values of Disk.Filesystem.
var filesystems = []string{FilesystemXFS, FilesystemLustre}

// validator collects the diagnostics of one policy. Its indexes keep
// every check linear in the size of the policy, which aliases can make
// large.
type validator struct {
	file  string
	pos   Positions
	diags Diagnostics

	classIndex map[string]int    // class name → index of its first definition
	classNames []string          // in order
	preempts   []map[string]bool // the preempt list of each class, as a set
	gpuTypes   map[string]bool   // cluster.gpu_types
	hints      map[string]string // classHint's answers, by name
}

func newValidator(file string, p *Policy) *validator {
	v := &validator{file: file, pos: p.Positions, classIndex: map[string]int{},
		gpuTypes: map[string]bool{}, hints: map[string]string{}}
	for i, c := range p.Classes {
		if _, dup := v.classIndex[c.Name]; !dup && c.Name != "" {
			v.classIndex[c.Name] = i
		}
		v.classNames = append(v.classNames, c.Name)
		set := make(map[string]bool, len(c.Preempt))
		for _, target := range c.Preempt {
			set[target] = true
		}
		v.preempts = append(v.preempts, set)
	}
	for _, t := range p.Cluster.GPUTypes {
		v.gpuTypes[t] = true
	}
	return v
}

// owner is what holds a name that must be unique: its path and what it
// is, for messages.
type owner struct{ path, what string }

func (v *validator) add(path, hint, format string, args ...any) {
	p := v.pos.At(path)
	v.diags = append(v.diags, Diagnostic{File: v.file, Line: p.Line, Col: p.Col, Path: path,
		Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// where says where path is, for messages: "12:7", or the path when the
// position is unknown.
func (v *validator) where(path string) string {
	if p := v.pos.At(path); p.Line > 0 {
		return p.String()
	}
	return path
}

func (v *validator) header(p *Policy) {
	switch p.APIVersion {
	case APIVersion:
	case "":
		v.add("apiVersion", "start the file with apiVersion: "+APIVersion, "missing apiVersion")
	default:
		v.add("apiVersion", "use apiVersion: "+APIVersion, "apiVersion %q is not supported", p.APIVersion)
	}
	switch p.Kind {
	case Kind:
	case "":
		v.add("kind", "add kind: "+Kind, "missing kind")
	default:
		v.add("kind", "use kind: "+Kind+" (this file is read by strata-policy)", "kind %q is not a policy", p.Kind)
	}
}

// name checks the name of a cluster, class, tenant, project or GPU type.
func (v *validator) name(path, what, name string) bool {
	switch {
	case name == "":
		v.add(path, "give it a name: lowercase letters, digits, '_' and '-', starting with a letter", "%s has no name", what)
		return false
	case nameRE.MatchString(name):
		return true
	case nameRE.MatchString(strings.ToLower(name)):
		v.add(path, fmt.Sprintf("write %q: sacctmgr lowercases names, so %q would never match what Slurm stores", strings.ToLower(name), name),
			"%s name %q has capitals", what, name)
	default:
		v.add(path, "use lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases names, and other characters break its commands)",
			"%s name %q is not a valid Slurm name", what, name)
	}
	return false
}

// users checks a list of user names: valid, none twice.
func (v *validator) users(path, what string, users []string) {
	seen := map[string]string{}
	for i, u := range users {
		p := fmt.Sprintf("%s[%d]", path, i)
		v.user(p, what, u)
		if first, dup := seen[u]; dup {
			v.add(p, "remove one of them", "%s %q is listed twice (first at %s)", what, u, v.where(first))
		} else {
			seen[u] = p
		}
	}
}

// user checks a user name.
func (v *validator) user(path, what, u string) {
	switch {
	case u == "":
		v.add(path, "give the Unix user name", "%s with no user name", what)
	case nameRE.MatchString(u):
	case nameRE.MatchString(strings.ToLower(u)):
		v.add(path, fmt.Sprintf("write %q: sacctmgr lowercases user names, so %q would never match what Slurm stores", strings.ToLower(u), u),
			"user name %q has capitals", u)
	default:
		v.add(path, "use lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases names, and other characters break its commands)",
			"user name %q is not a valid Slurm user name", u)
	}
}

// count checks a number that must be from 0 to maxCount.
func (v *validator) count(path string, n int, hint string) {
	switch {
	case n < 0:
		v.add(path, hint, "%s %d is negative", strictyaml.KeyName(path), n)
	case n > maxCount:
		v.add(path, fmt.Sprintf("Slurm stores it in 32 bits: at most %d", maxCount), "%s %d is too large", strictyaml.KeyName(path), n)
	}
}

const (
	limitHint    = "give 0 or more; 0, or leaving it out, means no limit"
	sharesHint   = "shares are relative fair-share weights: give 1 or more, or leave it out for 1"
	priorityHint = "give 0 or more; higher runs first"
)

func (v *validator) cluster(p *Policy) {
	c := p.Cluster
	if c.Name == "" {
		v.add("cluster.name", "set cluster.name to the ClusterName of slurm.conf", "cluster has no name")
	} else {
		v.name("cluster.name", "cluster", c.Name)
	}
	seen := map[string]string{}
	for i, t := range c.GPUTypes {
		path := fmt.Sprintf("cluster.gpu_types[%d]", i)
		v.name(path, "GPU type", t)
		if first, dup := seen[t]; dup {
			v.add(path, "remove one of them", "GPU type %q is listed twice (first at %s)", t, v.where(first))
		} else {
			seen[t] = path
		}
	}
	if _, known := v.classIndex[c.DefaultClass]; c.DefaultClass != "" && !known {
		dc := c.DefaultClass
		v.add("cluster.default_class", v.classHint(dc, "define it under classes, or use one of"),
			"default class %q is not defined", dc)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Partitions)) {
		v.partition("cluster.partitions."+name, name, c.Partitions[name])
	}
}

// classHint suggests a class for an unknown name: the closest, or the
// list of all, after prefix.
func (v *validator) classHint(name, prefix string) string {
	key := prefix + "\x00" + name
	if h, done := v.hints[key]; done {
		return h
	}
	var h string
	switch guess := strictyaml.Closest(name, v.classNames); {
	case guess != "":
		h = "did you mean " + guess + "?"
	case len(v.classNames) == 0:
		h = "define the class under classes"
	case len(v.classNames) > 20:
		h = prefix + " " + strings.Join(v.classNames[:20], ", ") + ", …"
	default:
		h = prefix + " " + strings.Join(v.classNames, ", ")
	}
	v.hints[key] = h
	return h
}

func (v *validator) classes(p *Policy) {
	if len(p.Classes) == 0 {
		v.add("classes", "define at least one class (train, batch, interactive, serve): every job runs in one", "no workload classes")
	}
	for i := range p.Classes {
		c := &p.Classes[i]
		path := fmt.Sprintf("classes[%d]", i)
		if v.name(path+".name", "class", c.Name) {
			if first := v.classIndex[c.Name]; first != i {
				v.add(path+".name", "rename or remove one of them", "class %q is defined twice (first at %s)",
					c.Name, v.where(fmt.Sprintf("classes[%d].name", first)))
			}
		}
		_, declared := p.Cluster.Partitions[c.Partition]
		switch {
		case c.Partition == "":
			v.add(path+".partition", "set partition to the Slurm partition its jobs run in", "class %q has no partition", c.Name)
		case !partitionRE.MatchString(c.Partition):
			v.add(path+".partition", "use letters, digits, '_', '-' and '.': the name of one partition of slurm.conf",
				"partition %q is not a valid Slurm partition name", c.Partition)
		case len(p.Cluster.Partitions) > 0 && !declared:
			v.add(path+".partition", fmt.Sprintf("add %s under cluster.partitions with its nodes, or leave cluster.partitions out to keep every partition in slurm.conf", c.Partition),
				"class %q runs in partition %q, which cluster.partitions does not declare", c.Name, c.Partition)
		}
		v.time(path+".default_time", c.DefaultTime, "leave it out for the partition's DefaultTime")
		v.time(path+".max_time", c.MaxTime, "leave it out for the partition's MaxTime")
		if c.DefaultTime > 0 && c.MaxTime > 0 && c.MaxTime < c.DefaultTime {
			v.add(path+".max_time", fmt.Sprintf("raise max_time to at least %s, or lower default_time: jobs that give no time limit would be rejected", c.DefaultTime),
				"max_time %s is shorter than default_time %s", c.MaxTime, c.DefaultTime)
		}
		v.count(path+".priority", c.Priority, priorityHint)
		v.count(path+".switches", c.Switches, "give the most leaf switches a multi-node job may span, or 0 for no rule")
		v.count(path+".max_gpus_per_job", c.MaxGPUsPerJob, limitHint)
		if c.PreemptMode != "" && !slices.Contains(preemptModes, c.PreemptMode) {
			v.add(path+".preempt_mode", "use requeue, cancel or suspend", "preempt_mode %q is not a preempt mode", c.PreemptMode)
		} else if c.PreemptMode == PreemptRequeue && !c.Requeueable() {
			v.add(path+".preempt_mode", "set requeue: true, or use preempt_mode: cancel",
				"preempt_mode requeue, but jobs of class %q are not requeueable", c.Name)
		}
	}
	for i := range p.Classes {
		v.preempt(p, i)
		v.reclaim(fmt.Sprintf("classes[%d].reclaim", i), &p.Classes[i])
		v.recovery(fmt.Sprintf("classes[%d].recovery", i), &p.Classes[i])
	}
}

// time checks a job time limit.
func (v *validator) time(path string, d Duration, hint string) {
	switch {
	case d < 0:
		v.add(path, "give a positive time, or "+hint, "%s %s is negative", strictyaml.KeyName(path), d)
	case d.Std()%time.Minute != 0:
		v.add(path, fmt.Sprintf("Slurm counts time limits in whole minutes: write %s", Duration(time.Duration(d.Minutes())*time.Minute)),
			"%s %s is not a whole number of minutes", strictyaml.KeyName(path), d)
	}
}

// preempt checks the preempt list of class i.
func (v *validator) preempt(p *Policy, i int) {
	c := &p.Classes[i]
	seen := map[string]bool{}
	for j, target := range c.Preempt {
		path := fmt.Sprintf("classes[%d].preempt[%d]", i, j)
		switch {
		case target == c.Name:
			v.add(path, fmt.Sprintf("remove %s from its preempt list", target), "class %q preempts itself", c.Name)
		case seen[target]:
			v.add(path, "remove one of them", "class %q is listed twice in preempt", target)
		default:
			k, known := v.classIndex[target]
			if !known {
				v.add(path, v.classHint(target, "the classes are"), "class %q preempts unknown class %q", c.Name, target)
			} else if k < i && v.preempts[k][c.Name] {
				v.add(path, "keep one direction: each class would cancel the other's jobs",
					"classes %q and %q preempt each other", target, c.Name)
			}
		}
		seen[target] = true
	}
}

// reclaimHints say what to do about the reclaim rule problems that
// reclaimrules finds, by the key they are about.
var reclaimHints = map[string]string{
	"idle.max_util_percent":          "give a percentage from 0 to 100; 5 is typical",
	"idle.max_mem_activity_percent":  "give a percentage from 0 to 100; 5 is typical",
	"idle.window":                    "give at least 1m: a shorter window holds too few samples; 30m to 2h is typical",
	"idle.min_coverage":              "give a fraction above 0 and at most 1, such as 0.8",
	"startup_grace":                  "give a positive time, or leave it out",
	"first_window":                   "make first_window shorter than idle.window, or leave it out",
	"partial_idle":                   "set partial_idle.enabled: true, or remove the other partial_idle keys",
	"partial_idle.min_idle_gpus":     "give 1 or more",
	"partial_idle.min_idle_fraction": "give a fraction from 0 to 1, such as 0.5",
	"partial_idle.action":            "use notify, requeue, requeue-hold or cancel",
	"warn":                           "give a positive time, or leave it out for 15m",
	"signal.name":                    "checkpoint signals are usually USR1 or TERM; a rule that only notifies sends none",
	"signal.wait":                    "give signal.name, or remove signal.wait",
	"action":                         "use notify, requeue, requeue-hold or cancel",
	"max_requeues":                   "remove max_requeues, or make the action requeue or requeue-hold",
}

// reclaim checks a class's reclaim rule with reclaimrules' own validation
// and maps its problems to the policy's paths.
func (v *validator) reclaim(path string, c *Class) {
	r := c.Reclaim
	if r == nil {
		return
	}
	if r.Name != "" {
		v.add(path+".name", ruleForbidden["name"], "name is not allowed in a reclaim rule")
	}
	if !matchEmpty(r.Match) {
		v.add(path+".match", ruleForbidden["match"], "match is not allowed in a reclaim rule")
	}
	rule := *r
	rule.Name, rule.Match = "class", reclaimrules.Match{}
	if reclaimNameRE.MatchString(c.Name) {
		rule.Name = c.Name
	}
	doc := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind, Rules: []reclaimrules.Rule{rule}}
	for _, err := range doc.Validate() {
		var fe *reclaimrules.FieldError
		if !errors.As(err, &fe) {
			v.add(path, "fix the reclaim rule", "reclaim: %v", err)
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(fe.Path, "rules[0]"), ".")
		hint := reclaimHints[rel]
		if hint == "" {
			hint = "see the reclaim rules of etc/strata/policy.yaml"
		}
		v.add(strictyaml.Join(path, rel), hint, "%s: %s", strictyaml.Join("reclaim", rel), fe.Msg)
	}
	requeues := r.Action.Requeues() || r.PartialIdle.Enabled && r.PartialIdle.Action.Requeues()
	if requeues && !c.Requeueable() {
		at := path + ".action"
		if !r.Action.Requeues() {
			at = path + ".partial_idle.action"
		}
		v.add(at, "set requeue: true on the class, or use action: cancel",
			"reclaim requeues, but jobs of class %q are not requeueable", c.Name)
	}
}

var reclaimNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func matchEmpty(m reclaimrules.Match) bool {
	return len(m.Tenants)+len(m.Accounts)+len(m.Users)+len(m.Classes)+len(m.QOS)+len(m.Partitions) == 0
}

// classRefs checks a list of class names: known, none twice, and, when
// allowed is not nil, within it.
func (v *validator) classRefs(path, owner string, list []string, allowed map[string]bool, allowedBy string) {
	seen := map[string]bool{}
	for i, name := range list {
		item := fmt.Sprintf("%s[%d]", path, i)
		_, known := v.classIndex[name]
		switch {
		case seen[name]:
			v.add(item, "remove one of them", "class %q is listed twice", name)
		case !known:
			v.add(item, v.classHint(name, "the classes are"), "%s names unknown class %q", owner, name)
		case allowed != nil && !allowed[name]:
			v.add(item, fmt.Sprintf("add %s to the classes of %s, or remove it here", name, allowedBy),
				"%s uses class %q, which %s does not allow", owner, name, allowedBy)
		}
		seen[name] = true
	}
}

// limits checks one Limits; parent, when not nil, is the tenant's.
func (v *validator) limits(p *Policy, path string, l, parent *Limits, parentName string) {
	v.count(path+".gpus", l.GPUs, limitHint)
	v.count(path+".cpus", l.CPUs, limitHint)
	v.count(path+".memory_gb", l.MemoryGB, limitHint)
	v.count(path+".running_jobs", l.RunningJobs, limitHint)
	v.count(path+".gpus_per_user", l.GPUsPerUser, limitHint)
	v.count(path+".gpu_hours", l.GPUHours, limitHint)
	if l.GPUs > 0 && l.GPUsPerUser > l.GPUs {
		v.add(path+".gpus_per_user", fmt.Sprintf("no user could reach it: lower it to at most %d", l.GPUs),
			"gpus_per_user %d is above gpus %d", l.GPUsPerUser, l.GPUs)
	}
	types := make([]string, 0, len(l.GPUsByType))
	for t := range l.GPUsByType {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		n, tp := l.GPUsByType[t], path+".gpus_by_type."+t
		v.count(tp, n, "give 0 or more; 0 forbids the type")
		switch {
		case !v.gpuTypes[t]:
			hint := "add it to cluster.gpu_types (the gres/gpu:<type> names of AccountingStorageTRES)"
			if len(p.Cluster.GPUTypes) > 0 {
				hint += ", or use one of " + strings.Join(p.Cluster.GPUTypes, ", ")
			}
			v.add(tp, hint, "GPU type %q is not in cluster.gpu_types", t)
		case l.GPUs > 0 && n > l.GPUs:
			v.add(tp, fmt.Sprintf("a type cannot have more than all GPUs: lower it to at most %d, or raise gpus", l.GPUs),
				"gpus_by_type %s %d is above gpus %d", t, n, l.GPUs)
		}
	}
	if parent == nil {
		return
	}
	above := func(key string, n, limit int) {
		if limit > 0 && n > limit {
			v.add(path+"."+key, fmt.Sprintf("lower it to at most %d: Slurm enforces the tenant's limit too, so the project could never use more (project limits may add up to more than the tenant's)", limit),
				"project limit %s %d is above tenant %q's %d", key, n, parentName, limit)
		}
	}
	above("gpus", l.GPUs, parent.GPUs)
	above("cpus", l.CPUs, parent.CPUs)
	above("memory_gb", l.MemoryGB, parent.MemoryGB)
	above("running_jobs", l.RunningJobs, parent.RunningJobs)
	above("gpus_per_user", l.GPUsPerUser, parent.GPUsPerUser)
	above("gpu_hours", l.GPUHours, parent.GPUHours)
	for _, t := range types {
		limit, limited := parent.GPUsByType[t]
		n := l.GPUsByType[t]
		switch {
		case limited && limit == 0 && n > 0:
			v.add(path+".gpus_by_type."+t, fmt.Sprintf("remove it, or allow %s in the tenant's gpus_by_type", t),
				"project limit gpus_by_type %s %d, but tenant %q forbids %s (0)", t, n, parentName, t)
		case limited && n > limit:
			v.add(path+".gpus_by_type."+t, fmt.Sprintf("lower it to at most %d: Slurm enforces the tenant's limit too, so the project could never use more", limit),
				"project limit gpus_by_type %s %d is above tenant %q's %d", t, n, parentName, limit)
		}
	}
}

func (v *validator) tenants(p *Policy) {
	if len(p.Tenants) == 0 {
		v.add("tenants", "define at least one tenant with a project: jobs run in project accounts", "no tenants")
	}
	accounts := map[string]owner{} // Slurm account → who has it
	account := func(path, name, what string) {
		if first, dup := accounts[name]; dup {
			v.add(path, "rename one of them: every tenant and project is a Slurm account, and account names must be unique",
				"Slurm account %q of %s is also the account of %s (at %s)", name, what, first.what, v.where(first.path))
			return
		}
		accounts[name] = owner{path, what}
		if len(name) > MaxAccountLen {
			v.add(path, fmt.Sprintf("shorten the name: Slurm account names are at most %d characters", MaxAccountLen),
				"Slurm account %q is %d characters long", name, len(name))
		}
	}
	tenants := map[string]string{}
	defaults := map[string]string{} // user → path of their default membership
	disks := map[string]owner{}     // quota path → project
	ids := map[int]owner{}          // disk project id → project
	for i := range p.Tenants {
		t := &p.Tenants[i]
		tp := fmt.Sprintf("tenants[%d]", i)
		if v.name(tp+".name", "tenant", t.Name) {
			if first, dup := tenants[t.Name]; dup {
				v.add(tp+".name", "rename or merge them", "tenant %q is defined twice (first at %s)", t.Name, v.where(first))
			} else {
				tenants[t.Name] = tp + ".name"
				account(tp+".name", t.Name, fmt.Sprintf("tenant %q", t.Name))
			}
		}
		v.count(tp+".shares", t.Shares, sharesHint)
		v.count(tp+".priority", t.Priority, priorityHint)
		v.limits(p, tp+".limits", &t.Limits, nil, "")
		v.classRefs(tp+".classes", fmt.Sprintf("tenant %q", t.Name), t.Classes, nil, "")
		v.users(tp+".admins", "tenant admin", t.Admins)
		if s := t.Serving; s != nil {
			v.count(tp+".serving.gpus", s.GPUs, "give 0 or more GPUs for the tenant's model servers")
			v.count(tp+".serving.replicas", s.Replicas, "give 0 or more replicas")
			v.servingTiers(tp+".serving", s)
			switch ns := s.Namespace; {
			case ns != "" && !validNamespace(ns):
				v.add(tp+".serving.namespace", "use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit",
					"namespace %q is not a Kubernetes namespace name", ns)
			case ns == "" && t.Name != "" && !validNamespace(DefaultNamespace(t.Name)):
				v.add(tp+".serving", "set serving.namespace: lowercase letters, digits and '-', at most 63 characters",
					"the default namespace %q is not a Kubernetes namespace name", DefaultNamespace(t.Name))
			}
		}
		var allowed map[string]bool // nil: all
		if len(t.Classes) > 0 {
			allowed = make(map[string]bool, len(t.Classes))
			for _, c := range t.Classes {
				allowed[c] = true
			}
		}
		projects := map[string]string{}
		for j := range t.Projects {
			pr := &t.Projects[j]
			pp := fmt.Sprintf("%s.projects[%d]", tp, j)
			what := fmt.Sprintf("project %q of tenant %q", pr.Name, t.Name)
			if v.name(pp+".name", "project", pr.Name) {
				if first, dup := projects[pr.Name]; dup {
					v.add(pp+".name", "rename or merge them", "project %q of tenant %q is defined twice (first at %s)", pr.Name, t.Name, v.where(first))
				} else {
					projects[pr.Name] = pp + ".name"
					if t.Name != "" {
						account(pp+".name", p.Account(t.Name, pr.Name), what)
					}
				}
			}
			v.count(pp+".shares", pr.Shares, sharesHint)
			v.limits(p, pp+".limits", &pr.Limits, &t.Limits, t.Name)
			v.classRefs(pp+".classes", fmt.Sprintf("project %q", pr.Name), pr.Classes, allowed, fmt.Sprintf("tenant %q", t.Name))
			v.members(pp, pr, what, defaults)
			if d := pr.Disk; d != nil {
				v.disk(pp+".disk", d, what, p.Account(t.Name, pr.Name), disks, ids)
			}
		}
	}
}

// members checks the members of a project.
func (v *validator) members(pp string, pr *Project, what string, defaults map[string]string) {
	// A project may have thousands of members: their paths are made only
	// for a problem, and seen keeps indexes.
	seen := make(map[string]int, len(pr.Members))
	memberPath := func(k int) string { return pp + ".members[" + strconv.Itoa(k) + "]" }
	for k, m := range pr.Members {
		mp := memberPath(k)
		if !nameRE.MatchString(m.User) {
			v.user(mp+".user", "member", m.User)
		}
		if first, dup := seen[m.User]; dup && m.User != "" {
			v.add(mp+".user", "remove one of them: a member has one role in a project", "user %q is a member twice (first at %s)",
				m.User, v.where(memberPath(first)+".user"))
			continue
		}
		seen[m.User] = k
		if m.User == "root" {
			// Refused, not warned: sacctmgr would give root an association
			// under the tenant's account (and, as a default, move root's
			// own jobs into it), so the tenant's limits, shares and GPU
			// budget would govern what the administrator runs, and
			// job_submit.lua would police root's jobs.
			v.add(mp+".user", "remove it: root administers Slurm and needs no project; give the person their own user here, "+
				"or list them under the top-level admins key", "user root cannot be a project member (%s of %s)", orRole(m.Role), what)
		}
		switch {
		case m.Role == RoleClusterAdmin:
			v.add(mp+".role", "list cluster admins under the top-level admins key", "role cluster-admin is not a project role")
		case m.Role != "" && !slices.Contains(roles, m.Role):
			v.add(mp+".role", "use member, viewer or tenant-admin", "role %q is not a role", m.Role)
		case m.Role == RoleViewer && m.Default:
			v.add(mp+".default", "remove default, or make the role member: a viewer gets no Slurm association, so the project cannot be their default account",
				"user %q is a viewer, so %s cannot be their default", m.User, what)
		}
		if m.Default && m.User != "" && m.Role != RoleViewer {
			if first, dup := defaults[m.User]; dup {
				v.add(mp+".default", fmt.Sprintf("keep default: true on one of them (the other is at %s): a Slurm user has one default account", v.where(first)),
					"user %q has a second default project", m.User)
			} else {
				defaults[m.User] = mp + ".default"
			}
		}
	}
}

func orRole(r string) string {
	if r == "" {
		return RoleMember
	}
	return r
}

// disk checks a project's disk quota.
func (v *validator) disk(dp string, d *Disk, what, account string, disks map[string]owner, ids map[int]owner) {
	switch {
	case d.Path == "":
		v.add(dp+".path", "give the absolute path of the project directory", "disk quota with no path")
	case !strings.HasPrefix(d.Path, "/"):
		v.add(dp+".path", "give the absolute path of the project directory", "disk path %q is not absolute", d.Path)
	case !diskPathRE.MatchString(d.Path):
		v.add(dp+".path", "use letters, digits and . _ - + @ / in the path (link the directory from such a path if need be): the quota commands take it unquoted",
			"disk path %q holds a space, quote or other character the quota commands cannot take", d.Path)
	default:
		clean := path.Clean(d.Path)
		if first, dup := disks[clean]; dup {
			v.add(dp+".path", "give each project its own directory: a directory has one project quota",
				"disk path %q is also the quota path of %s (at %s)", d.Path, first.what, v.where(first.path))
		} else {
			disks[clean] = owner{dp + ".path", what}
		}
	}
	if !slices.Contains(filesystems, d.Filesystem) {
		if d.Filesystem == "" {
			v.add(dp+".filesystem", "use xfs or lustre", "disk quota with no filesystem")
		} else {
			v.add(dp+".filesystem", "use xfs or lustre: the file systems with project quotas strata-policy sets",
				"filesystem %q is not supported", d.Filesystem)
		}
	}
	v.count(dp+".soft_gb", d.SoftGB, "give 0 or more GiB; 0 is no soft limit")
	v.count(dp+".hard_gb", d.HardGB, "give the hard limit in GiB")
	v.count(dp+".inodes", d.Inodes, "give 0 or more files; 0 is no limit")
	v.count(dp+".project_id", d.ProjectID, "give a positive id, or leave it out for one derived from the account")
	id, at := d.ProjectID, dp+".project_id"
	if id == 0 {
		id, at = DiskProjectID(account), dp
	}
	if id > 0 && id <= maxCount {
		if first, dup := ids[id]; dup {
			v.add(at, "set project_id on one of them to an id no other project uses: a project id names the quota of one directory tree",
				"disk project id %d of %s is also that of %s (at %s)", id, what, first.what, v.where(first.path))
		} else {
			ids[id] = owner{at, what}
		}
	}
	switch {
	case d.HardGB == 0:
		v.add(dp+".hard_gb", "set hard_gb in GiB; remove disk for no quota", "disk quota with no hard limit")
	case d.HardGB > 0 && d.SoftGB > d.HardGB:
		v.add(dp+".soft_gb", fmt.Sprintf("the soft limit must be at most the hard limit: lower it to %d or less, or raise hard_gb", d.HardGB),
			"soft_gb %d is above hard_gb %d", d.SoftGB, d.HardGB)
	}
}

// partition checks a partition of cluster.partitions.
func (v *validator) partition(path, name string, pt Partition) {
	if !partitionRE.MatchString(name) {
		v.add(path, "use letters, digits, '_', '-' and '.'", "partition %q is not a valid Slurm partition name", name)
	}
	const nodesHint = "give the NodeNames of slurm.conf as a host list without spaces, such as gpu[001-032],gpu040"
	switch {
	case pt.Nodes == "":
		v.add(path+".nodes", nodesHint, "partition %q has no nodes", name)
	case !hostlistRE.MatchString(pt.Nodes) || !balanced(pt.Nodes):
		v.add(path+".nodes", nodesHint, "nodes %q of partition %q is not a Slurm host list", pt.Nodes, name)
	}
	seen := map[string]bool{}
	for _, opt := range strings.Fields(pt.Options) {
		key, val, ok := strings.Cut(opt, "=")
		lower := strings.ToLower(key)
		switch {
		case !ok || key == "" || val == "":
			v.add(path+".options", `write options as on a PartitionName line, Key=Value separated by spaces: "PriorityTier=2 OverSubscribe=NO"`,
				"partition option %q is not Key=Value", opt)
		case derivedOptions[lower] != "":
			v.add(path+".options", derivedOptions[lower], "partition option %s is written by strata-policy", key)
		case !slices.Contains(partitionOptions, lower):
			hint := "see PartitionName in slurm.conf(5): slurmctld and every Slurm command stop at an option they do not know"
			if guess := strictyaml.Closest(key, partitionOptionNames); guess != "" {
				hint = "did you mean " + guess + "?"
			}
			v.add(path+".options", hint, "unknown partition option %s", key)
		case seen[lower]:
			v.add(path+".options", "remove one of them", "partition option %s is given twice", key)
		case strings.ContainsAny(val, "#\"'\\"):
			v.add(path+".options", "write the value without quotes or '#': slurm.conf reads '#' as the start of a comment",
				"partition option %s has a quote or '#' in its value %q", key, val)
		}
		seen[lower] = true
	}
}

// balanced reports whether the brackets of a host list pair up, without
// nesting.
func balanced(hosts string) bool {
	open := false
	for _, r := range hosts {
		switch {
		case r == '[' && !open:
			open = true
		case r == ']' && open:
			open = false
		case r == '[' || r == ']':
			return false
		}
	}
	return !open
}

// partitionUse checks that every partition of cluster.partitions is the
// partition of a class that some project may use: a partition without
// classes would get no AllowQos, and one without projects no
// AllowAccounts, and either would be open to every job.
func (v *validator) partitionUse(p *Policy) {
	if len(p.Cluster.Partitions) == 0 {
		return
	}
	classes := map[string][]string{} // partition → its classes
	for _, c := range p.Classes {
		classes[c.Partition] = append(classes[c.Partition], c.Name)
	}
	used := map[string]bool{} // classes some project may use
	for _, t := range p.Tenants {
		for _, pr := range t.Projects {
			switch {
			case len(pr.Classes) > 0:
				for _, c := range pr.Classes {
					used[c] = true
				}
			case len(t.Classes) > 0:
				for _, c := range t.Classes {
					used[c] = true
				}
			default:
				for _, c := range p.Classes {
					used[c.Name] = true
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Cluster.Partitions)) {
		path := "cluster.partitions." + name
		cs := classes[name]
		if len(cs) == 0 {
			v.add(path, "remove it, or make it the partition of a class: its AllowQos are its classes",
				"partition %q is the partition of no class", name)
			continue
		}
		if !slices.ContainsFunc(cs, func(c string) bool { return used[c] }) {
			v.add(path, "add one of its classes to the classes of a tenant or project, or remove the partition and its classes: its AllowAccounts are the projects that may use its classes",
				"no project may use the classes of partition %q (%s)", name, strings.Join(cs, ", "))
		}
	}
}

// partitionOptions are the keys of a slurm.conf PartitionName line
// (slurm.conf(5), Slurm 24.11 to 26.05; Topology from 25.05), lowercase:
// slurm.conf keys are case-insensitive.
var partitionOptions = func() []string {
	out := make([]string, len(partitionOptionNames))
	for i, k := range partitionOptionNames {
		out[i] = strings.ToLower(k)
	}
	return out
}()

var partitionOptionNames = []string{
	"AllocNodes", "AllowAccounts", "AllowGroups", "AllowQos", "Alternate", "CpuBind", "Default",
	"DefaultTime", "DefCpuPerGPU", "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode", "DenyAccounts",
	"DenyQos", "DisableRootJobs", "ExclusiveTopo", "ExclusiveUser", "GraceTime", "Hidden", "LLN",
	"MaxCPUsPerNode", "MaxCPUsPerSocket", "MaxMemPerCPU", "MaxMemPerNode", "MaxNodes", "MaxTime",
	"MinNodes", "Nodes", "OverSubscribe", "OverTimeLimit", "PartitionName", "PowerDownOnIdle",
	"PreemptMode", "PriorityJobFactor", "PriorityTier", "QOS", "ReqResv", "ResumeTimeout", "RootOnly",
	"SelectTypeParameters", "State", "SuspendTime", "SuspendTimeout", "Topology", "TRESBillingWeights",
}

// derivedOptions are the partition options strata-policy writes itself,
// lowercase, with what to do instead; DenyAccounts and DenyQos are here
// because Slurm ignores them where AllowAccounts and AllowQos are set.
var derivedOptions = map[string]string{
	"partitionname": "the partition's name is its key under cluster.partitions",
	"nodes":         "give the nodes in nodes:",
	"allowaccounts": "remove it: strata-policy allows the projects that may use the partition's classes",
	"allowqos":      "remove it: strata-policy allows the partition's classes",
	"defaulttime":   "set default_time on the partition's classes",
	"maxtime":       "set max_time on the partition's classes",
	"default":       "remove it: the partition of cluster.default_class is the default partition",
	"denyaccounts":  "remove it: Slurm ignores DenyAccounts where AllowAccounts is set; leave the class out of the project's classes instead",
	"denyqos":       "remove it: Slurm ignores DenyQos where AllowQos is set; the partition allows its classes only",
}

// validNamespace reports whether ns is a Kubernetes namespace name (a DNS
// label).
func validNamespace(ns string) bool { return len(ns) <= 63 && namespaceRE.MatchString(ns) }
