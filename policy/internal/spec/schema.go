package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/strata-hpc/strata/internal/duration"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// SchemaID is the $id of the policy's JSON Schema.
const SchemaID = "https://github.com/strata-hpc/strata/policy/internal/spec/policy.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of the policy file,
// generated from the Go types: their YAML keys, which keys are required
// (those tagged strictyaml:"required"), no other keys (additionalProperties: false),
// and the enums, patterns and descriptions of the tables below. Editors
// with a YAML language server check the file with it, from a modeline:
//
//	# yaml-language-server: $schema=<path or URL of policy.schema.json>
//
// The schema checks the shape of the file; [Parse] checks everything else
// (references between names, limits against each other).
func Schema() ([]byte, error) {
	g := &schemaGen{defs: map[string]any{}}
	root := g.object(reflect.TypeFor[Policy]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "Strata policy"
	root["$defs"] = g.defs
	if g.err != nil {
		return nil, g.err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // "gres/gpu:<type>" reads better than \u003c
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("marshal policy schema: %w", err)
	}
	return out.Bytes(), nil
}

// schemaGen builds the schema of one type after another, collecting named
// struct types in defs.
type schemaGen struct {
	defs map[string]any
	err  error
}

const namePattern = `^[a-z][a-z0-9_-]*$`

var durationType = reflect.TypeFor[Duration]()

// defNames name the $defs of struct types.
var defNames = map[reflect.Type]string{
	ruleType:     "ReclaimRule",
	durationType: "Duration",
}

// constraints add to the schema of a key ("Type.key"); for a list, they
// apply to its items.
var constraints = map[string]map[string]any{
	"Policy.apiVersion":                {"const": APIVersion},
	"Policy.kind":                      {"const": Kind},
	"Policy.admins":                    {"pattern": namePattern},
	"Cluster.name":                     {"pattern": namePattern},
	"Cluster.gpu_types":                {"pattern": namePattern},
	"Cluster.default_class":            {"pattern": namePattern},
	"Class.name":                       {"pattern": namePattern},
	"Class.partition":                  {"pattern": partitionRE.String()},
	"Partition.nodes":                  {"pattern": hostlistRE.String()},
	"Class.preempt":                    {"pattern": namePattern},
	"Class.preempt_mode":               {"enum": preemptModes},
	"Tenant.name":                      {"pattern": namePattern},
	"Tenant.classes":                   {"pattern": namePattern},
	"Tenant.admins":                    {"pattern": namePattern},
	"Project.name":                     {"pattern": namePattern},
	"Project.classes":                  {"pattern": namePattern},
	"Member.user":                      {"pattern": namePattern},
	"Member.role":                      {"enum": roles},
	"Serving.namespace":                {"pattern": namespaceRE.String(), "maxLength": 63},
	"Disk.path":                        {"pattern": diskPathRE.String()},
	"Disk.filesystem":                  {"enum": filesystems},
	"Disk.hard_gb":                     {"minimum": 1},
	"ReclaimRule.action":               {"enum": []string{"notify", "requeue", "requeue-hold", "cancel"}},
	"PartialIdle.action":               {"enum": []string{"notify", "requeue", "requeue-hold", "cancel"}},
	"IdleDef.max_util_percent":         {"minimum": 0, "maximum": 100},
	"IdleDef.max_mem_activity_percent": {"minimum": 0, "maximum": 100},
	"IdleDef.min_coverage":             {"minimum": 0, "maximum": 1},
	"PartialIdle.min_idle_fraction":    {"minimum": 0, "maximum": 1},
}

// mapKeys are the patterns of the keys of maps whose keys are not names.
var mapKeys = map[string]string{
	"Cluster.partitions": partitionRE.String(),
	"Serving.tiers":      servingTierKeyRE,
}

// descriptions document every key in the schema, for editors' hovers
// (TestSchemaDescriptions fails on a key without one).
var descriptions = map[string]string{
	"Policy":            "A Strata policy: the cluster, its workload classes, and its tenants with their projects, members, limits and quotas. strata-policy compiles it into Slurm.",
	"Policy.apiVersion": "Version of the policy format: strata/v1.",
	"Policy.kind":       "Always Policy.",
	"Policy.cluster":    "The Slurm cluster the policy applies to.",
	"Policy.classes":    "Workload classes: each becomes a Slurm QOS with its partition, time limits, preemption and reclaim rule.",
	"Policy.tenants":    "Tenants: Slurm accounts with their projects' accounts under them.",
	"Policy.admins":     "Cluster-admin users (Slurm administrators).",
	"Policy.reclaim":    "Settings of the reclaim rules as a whole.",
	"Reclaim":           "Settings of reclaimd's rules as a whole.",
	"Reclaim.dry_run":   "reclaimd decides and records every action without taking it (default true: watch the rules before they act; false turns reclaim on).",

	"Cluster":               "The Slurm cluster.",
	"Cluster.name":          "The Slurm ClusterName (slurm.conf).",
	"Cluster.gpu_types":     "GPU types (gres/gpu:<type>) that limits may name; they must be in AccountingStorageTRES.",
	"Cluster.default_class": "Class of jobs that name none (default: batch, when defined).",
	"Cluster.partitions":    "Slurm partitions strata-policy writes whole into partitions.conf, by name (default: none, slurm.conf defines them); every class's partition must be one of them.",

	"Partition":         "A partition of partitions.conf: its nodes and other options; AllowAccounts, AllowQos, DefaultTime, MaxTime and Default come from its classes.",
	"Partition.nodes":   "NodeNames of slurm.conf in the partition, as a host list: gpu[001-032].",
	"Partition.options": "Other slurm.conf partition options, as on a PartitionName line: PriorityTier=2 OverSubscribe=NO.",

	"Class":                  "A workload class: a Slurm QOS and partition with time limits, gang and topology rules, preemption and an idle reclaim rule.",
	"Class.name":             "train, batch, interactive, serve, or a site-defined class.",
	"Class.partition":        "Slurm partition the jobs of the class run in.",
	"Class.default_time":     "Time limit of jobs that give none (default: the partition's DefaultTime).",
	"Class.max_time":         "Longest time limit a job may ask for (default: the partition's MaxTime).",
	"Class.priority":         "Priority of the class QOS.",
	"Class.preempt":          "Classes whose jobs this class may preempt.",
	"Class.preempt_mode":     "What happens to jobs of this class when preempted (default: the cluster's PreemptMode).",
	"Class.requeue":          "Whether jobs are requeueable (default: true for train and batch, false for the others).",
	"Class.whole_nodes":      "Multi-node jobs take whole nodes (--exclusive).",
	"Class.switches":         "Multi-node jobs ask for --switches=N: their nodes under at most N leaf switches (0: no rule).",
	"Class.max_gpus_per_job": "Most GPUs one job may use (0: no cap).",
	"Class.reclaim":          "Idle-GPU rule reclaimd enforces for jobs of this class; its name and match are filled by strata-policy.",

	"Tenant":              "A tenant: a Slurm account (parent of its projects' accounts) whose association carries its limits and priority, and a Kubernetes namespace for serving.",
	"Tenant.name":         "Tenant name, also its Slurm account.",
	"Tenant.description":  "Free text (sacctmgr stores it lowercased).",
	"Tenant.shares":       "Fair-share weight of the tenant account (default 1).",
	"Tenant.priority":     "Priority of the tenant account's association, inherited by its projects (there is no tenant QOS).",
	"Tenant.limits":       "Limits of the whole tenant.",
	"Tenant.classes":      "Classes its projects may use (default: all).",
	"Tenant.admins":       "Tenant-admin users (Slurm coordinators of the tenant account).",
	"Tenant.serving":      "Serving quota on Kubernetes, enforced by strata-bridge.",
	"Tenant.projects":     "Projects: Slurm accounts <tenant>-<project>.",
	"Tenant.images":       "Container images its jobs may run: an image (registry.example.com/acme/train:2.1) or a prefix (registry.example.com/acme/*); none listed, none may run.",
	"Cluster.oci_bundles": "Directory of the OCI bundles on the nodes, <oci_bundles>/<image>, that jobs name with --container (default: /srv/strata/bundles).",

	"Project":             "A project: the Slurm account <tenant>-<project>.",
	"Project.name":        "Project name; its Slurm account is <tenant>-<project>.",
	"Project.description": "Free text (sacctmgr stores it lowercased).",
	"Project.shares":      "Fair-share weight of the project within its tenant (default 1).",
	"Project.limits":      "Limits of the project; each at most the tenant's (their sum may be more).",
	"Project.classes":     "Classes the project may use, within its tenant's (default: the tenant's).",
	"Project.members":     "Users of the project.",
	"Project.disk":        "Project quota on the project directory.",

	"Member":         "A user of a project.",
	"Member.user":    "Unix user name.",
	"Member.role":    "member (default), viewer (portal only, no Slurm association) or tenant-admin (also a coordinator of the tenant account).",
	"Member.default": "This project is the user's default account (default: the user's first project).",

	"Limits":               "Limits; 0 or absent is no limit.",
	"Limits.gpus":          "GPUs in use at once (GrpTRES gres/gpu).",
	"Limits.gpus_by_type":  "GPUs of each type in use at once (GrpTRES gres/gpu:<type>); 0 forbids the type.",
	"Limits.cpus":          "CPUs in use at once (GrpTRES cpu).",
	"Limits.memory_gb":     "Memory in use at once, GiB (GrpTRES mem).",
	"Limits.running_jobs":  "Jobs running at once (GrpJobs).",
	"Limits.gpus_per_user": "GPUs one user may use at once (GrpTRES gres/gpu on each of the user's associations).",
	"Limits.gpu_hours":     "GPU-hour budget (GrpTRESMins gres/gpu = gpu_hours*60).",

	"Serving":           "Serving quota on Kubernetes.",
	"Serving.gpus":      "Whole GPUs (nvidia.com/gpu, the dedicated tier) the tenant's model servers may use; 0 forbids the tier.",
	"Serving.replicas":  "Replicas the tenant's model servers may run.",
	"Serving.namespace": "Kubernetes namespace (default: strata-<tenant>).",
	"Serving.isolation": "The tenant's replicas never share a GPU without isolation: the time-sliced tier is refused.",
	"Serving.tiers":     "GPU sharing tiers the tenant may use besides whole GPUs, with the quota of each: mig-<profile> (MIG slices, nvidia.com/mig-<profile>), mps (MPS shares, nvidia.com/gpu.mps), time-sliced (time slices, nvidia.com/gpu.shared); left out or 0: forbidden.",

	"Disk":            "A project quota (XFS or Lustre) on the project directory.",
	"Disk.path":       "Absolute path of the project directory.",
	"Disk.filesystem": "File system of the directory: xfs or lustre.",
	"Disk.soft_gb":    "Soft limit, GiB (0: none).",
	"Disk.hard_gb":    "Hard limit, GiB.",
	"Disk.inodes":     "Limit on files (0: none).",
	"Disk.project_id": "XFS or Lustre project id of the directory (default: derived from the account, from 2^30 to 2^31-1).",

	"Duration": `Length of time: "36h", "90m", "7d", "1d12h", or Slurm's "1-00:00:00" (days-hours:minutes:seconds), "12:00:00", "30:00". A bare number is refused: write "30m" for what Slurm reads as 30.`,

	"ReclaimRule":               "When the GPUs of a job of this class count as idle, and what reclaimd does then: warn, wait warn, signal, wait signal.wait, then act.",
	"ReclaimRule.idle":          "Idle definition of one GPU.",
	"ReclaimRule.startup_grace": "No judgement before the job has run this long.",
	"ReclaimRule.first_window":  "Judge a job idle for its whole first first_window at that age; shorter than idle.window.",
	"ReclaimRule.partial_idle":  "Judging multi-GPU jobs of which only some GPUs are idle.",
	"ReclaimRule.warn":          "Wait after the warning before the ladder goes on (default 15m).",
	"ReclaimRule.signal":        "Checkpoint signal sent before a requeue or cancel.",
	"ReclaimRule.action":        "What ends the ladder for a wholly idle job (default notify).",
	"ReclaimRule.max_requeues":  "Most requeues of a job by this rule; at the limit it is only notified.",
	"ReclaimRule.no_requeue":    "What a requeue does to a job submitted with --no-requeue: skip (default: notify its owner only) or requeue (make it requeueable; the notice says so).",

	"IdleDef":                          "A GPU is idle when, in every sample of the window, utilisation and memory activity are at or under the thresholds.",
	"IdleDef.max_util_percent":         "Highest GPU utilisation, percent, that counts as idle.",
	"IdleDef.max_mem_activity_percent": "Highest memory activity, percent, that counts as idle.",
	"IdleDef.window":                   "Sliding window the GPU must be idle for (default 1h, at least 1m).",
	"IdleDef.min_coverage":             "Fraction of the window that samples must cover (default 0.8).",

	"PartialIdle":                   "A job is partly idle when at least min_idle_gpus and min_idle_fraction of its GPUs are idle.",
	"PartialIdle.enabled":           "Judge partly idle jobs.",
	"PartialIdle.min_idle_gpus":     "Fewest idle GPUs (default 1).",
	"PartialIdle.min_idle_fraction": "Fewest idle GPUs as a fraction of the job's.",
	"PartialIdle.action":            "What ends the ladder for a partly idle job (default notify).",

	"Signal":      "Checkpoint signal.",
	"Signal.name": "Signal name, with or without SIG (USR1, TERM, ...); empty sends none.",
	"Signal.wait": "Time the job has to checkpoint (default 5m).",
	"Signal.mode": "Which jobs get the signal, and where: skip-unless-requested (the default: only jobs whose comment has strata:signal, the others are requeued without it), batch (every job's batch shell; a script that does not trap it dies), all-steps (every process of every job).",
}

// defName is the $defs name of a named type.
func defName(t reflect.Type) string {
	if n, ok := defNames[t]; ok {
		return n
	}
	return t.Name()
}

// object returns the schema of struct type t.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	name := defName(t)
	props := map[string]any{}
	required := []string{}
	for _, k := range strictyaml.Keys(t, decodeOptions) {
		s := g.schema(k.Type, name+"."+k.Name)
		if d := descriptions[name+"."+k.Name]; d != "" {
			s["description"] = d
		}
		props[k.Name] = s
		if k.Required {
			required = append(required, k.Name)
		}
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if d := descriptions[name]; d != "" {
		s["description"] = d
	}
	return s
}

// ref returns a $ref to the definition of named type t, defining it first.
func (g *schemaGen) ref(t reflect.Type, def func() map[string]any) map[string]any {
	name := defName(t)
	if _, done := g.defs[name]; !done {
		g.defs[name] = nil // against recursion
		s := def()
		if d := descriptions[name]; d != "" {
			s["description"] = d
		}
		g.defs[name] = s
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

// schema returns the schema of a value of type t at key ("Type.key").
func (g *schemaGen) schema(t reflect.Type, key string) map[string]any {
	var s map[string]any
	switch {
	case t == durationType:
		return g.ref(t, func() map[string]any { return map[string]any{"type": "string", "pattern": duration.Pattern} })
	case t.Kind() == reflect.Pointer:
		return g.schema(t.Elem(), key)
	case t.Kind() == reflect.Struct:
		return g.ref(t, func() map[string]any { return g.object(t) })
	case t.Kind() == reflect.String:
		s = map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		s = map[string]any{"type": "boolean"}
	case t.Kind() == reflect.Int:
		s = map[string]any{"type": "integer", "minimum": 0}
		if isSpecKey(key) {
			s["maximum"] = maxCount
		}
	case t.Kind() == reflect.Float64:
		s = map[string]any{"type": "number"}
	case t.Kind() == reflect.Slice:
		items := g.schema(t.Elem(), key)
		return map[string]any{"type": "array", "items": items}
	case t.Kind() == reflect.Map:
		keys := namePattern
		if p, ok := mapKeys[key]; ok {
			keys = p
		}
		return map[string]any{
			"type":                 "object",
			"propertyNames":        map[string]any{"pattern": keys},
			"additionalProperties": g.schema(t.Elem(), key),
		}
	default:
		g.err = fmt.Errorf("policy schema: no rule for %s", t)
		return map[string]any{}
	}
	for k, v := range constraints[key] {
		s[k] = v
	}
	return s
}

// isSpecKey reports whether key ("Type.key") is a key of this package's
// types, whose counts Slurm keeps in 32 bits.
func isSpecKey(key string) bool {
	typ, _, _ := strings.Cut(key, ".")
	switch typ {
	case "Policy", "Cluster", "Partition", "Class", "Tenant", "Project", "Member", "Limits", "Serving", "Disk":
		return true
	}
	return false
}
