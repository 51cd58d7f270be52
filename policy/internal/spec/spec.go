// Package spec is the policy file of strata-policy: the Go types of
// /etc/strata/policy.yaml, its strict decoding, its validation and the
// JSON Schema that editors check it with.
//
// The file declares the cluster, its workload classes (train, batch,
// interactive, serve and site-defined ones) and its tenants, each with
// projects, members, shares, limits, budgets and quotas. strata-policy
// compiles it into Slurm accounts, associations and QOS, and renders the
// data files the other parts read (reclaim rules, serving quotas, tenant
// map). This package only reads and checks the file: it has no Slurm, no
// clock and no I/O other than [Load]'s one read.
//
// [Parse] is the mtail model of a compiler front end: every problem of a
// file, whether YAML syntax, an unknown or repeated key, a value of the
// wrong type or a semantic mistake, is one [Diagnostic]
// "file:line:col: message (hint: what to do)", all of them at once, sorted
// by position; a file with any problem yields no policy at all, so a caller
// can never apply half of it.
//
// Conventions a policy author relies on, documented here once:
//   - A limit of 0 (or absent) is no limit, except in gpus_by_type, where
//     an entry of 0 forbids that GPU type (Slurm GrpTRES=gres/gpu:<type>=0).
//   - Project limits may add up to more than their tenant's (the tenant is
//     oversubscribed on purpose: Slurm enforces both levels, so the tenant
//     limit still holds); a single project limit above its tenant's is an
//     error, because the project could never reach it.
//   - A user who is a member of several projects has one default account:
//     the project marked default: true, or, when none is marked, the first
//     project of the file in which the user is not a viewer.
//   - Names of the cluster, classes, tenants, projects, users and GPU types
//     match ^[a-z][a-z0-9_-]*$: sacctmgr lowercases names, so a name with
//     capitals would never match what Slurm stores.
//   - A disk quota without project_id gets [DiskProjectID] of its project's
//     account, which depends on that name alone.
//   - cluster.partitions is all or nothing: when given, it declares the
//     partition of every class, and strata-policy writes those partitions
//     whole.
package spec

import (
	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// APIVersion and Kind head every policy file.
const (
	APIVersion = "strata/v1"
	Kind       = "Policy"
)

// Policy is one policy file.
type Policy struct {
	APIVersion string  `yaml:"apiVersion" strictyaml:"required" json:"apiVersion"`
	Kind       string  `yaml:"kind" strictyaml:"required" json:"kind"`
	Cluster    Cluster `yaml:"cluster" strictyaml:"required" json:"cluster"`
	// Classes are the workload classes; each becomes a Slurm QOS.
	Classes []Class  `yaml:"classes" strictyaml:"required" json:"classes"`
	Tenants []Tenant `yaml:"tenants" strictyaml:"required" json:"tenants"`
	// Admins are the cluster-admin users (Slurm administrators).
	Admins []string `yaml:"admins,omitempty" json:"admins,omitempty"`
	// Reclaim holds what applies to all the classes' reclaim rules.
	Reclaim *Reclaim `yaml:"reclaim,omitempty" json:"reclaim,omitempty"`

	// Positions locates every value [Parse] read, by path
	// ("tenants[1].projects[0].members[2].user"), so that the compiler can
	// report its own problems at the line and column of the value that
	// caused them. Nil for a policy built in code.
	Positions Positions `yaml:"-" json:"-"`
	// File names the file [Parse] read, as Positions' lines refer to it
	// ("" for a policy built in code).
	File string `yaml:"-" json:"-"`
}

// Reclaim holds the settings of reclaimd's rules as a whole.
type Reclaim struct {
	// DryRun makes reclaimd decide and record every action without
	// taking it (nil: true, so that new rules are watched before they
	// act; set false to turn reclaim on).
	DryRun *bool `yaml:"dry_run,omitempty" json:"dry_run,omitempty"`
}

// ReclaimDryRun reports whether the rendered reclaim rules are a dry run:
// unless the policy says dry_run: false, they are.
func (p *Policy) ReclaimDryRun() bool {
	return p.Reclaim == nil || p.Reclaim.DryRun == nil || *p.Reclaim.DryRun
}

// Cluster names the Slurm cluster the policy applies to.
type Cluster struct {
	// Name is the Slurm ClusterName (slurm.conf).
	Name string `yaml:"name" strictyaml:"required" json:"name"`
	// GPUTypes are the GPU types (gres/gpu:<type>) that limits may name,
	// such as h100 and a100; they must be in AccountingStorageTRES.
	GPUTypes []string `yaml:"gpu_types,omitempty" json:"gpu_types,omitempty"`
	// DefaultClass is the class of jobs that name none ("": batch when
	// that class is defined, else jobs must name a class).
	DefaultClass string `yaml:"default_class,omitempty" json:"default_class,omitempty"`
	// Partitions are the Slurm partitions strata-policy writes, by name
	// (empty: it writes none, and slurm.conf defines them). When given,
	// every class's partition must be one of them: render writes each
	// whole PartitionName line (partitions.conf), because slurmctld stops
	// at a partition defined twice.
	Partitions map[string]Partition `yaml:"partitions,omitempty" json:"partitions,omitempty"`
	// OCIBundles is the directory of the OCI bundles on the nodes, one
	// per image at <oci_bundles>/<image>, which jobs name with
	// --container ("": /srv/strata/bundles).
	OCIBundles string `yaml:"oci_bundles,omitempty" json:"oci_bundles,omitempty"`
}

// Partition is what a partitions.conf line needs that the classes and
// tenants do not say: its nodes, and any other slurm.conf options.
// AllowAccounts, AllowQos, DefaultTime, MaxTime and Default come from
// the classes.
type Partition struct {
	// Nodes is the partition's Nodes= value: NodeNames of slurm.conf,
	// such as gpu[001-032].
	Nodes string `yaml:"nodes" strictyaml:"required" json:"nodes"`
	// Options are other slurm.conf partition options, written as on a
	// PartitionName line: "PriorityTier=2 OverSubscribe=NO".
	Options string `yaml:"options,omitempty" json:"options,omitempty"`
}

// Class is a workload class: the Slurm QOS and partition jobs of the kind
// run under, with their time limits, gang and topology rules, preemption
// and reclaim rule.
type Class struct {
	// Name is train, batch, interactive, serve, or a site-defined class.
	Name      string `yaml:"name" strictyaml:"required" json:"name"`
	Partition string `yaml:"partition" strictyaml:"required" json:"partition"`
	// DefaultTime is the time limit of jobs that give none (0: the
	// partition's DefaultTime).
	DefaultTime Duration `yaml:"default_time,omitempty" json:"default_time,omitempty"`
	// MaxTime is the longest time limit a job may ask for (0: the
	// partition's MaxTime).
	MaxTime Duration `yaml:"max_time,omitempty" json:"max_time,omitempty"`
	// Priority is the priority of the class QOS.
	Priority int `yaml:"priority,omitempty" json:"priority,omitempty"`
	// Preempt lists the classes whose jobs this class may preempt.
	Preempt []string `yaml:"preempt,omitempty" json:"preempt,omitempty"`
	// PreemptMode is what happens to jobs of this class when they are
	// preempted: requeue, cancel or suspend ("": the cluster's
	// PreemptMode).
	PreemptMode string `yaml:"preempt_mode,omitempty" json:"preempt_mode,omitempty"`
	// Requeue says whether jobs are requeueable (nil: true for train and
	// batch, false for the others; [Policy.ApplyDefaults] fills it).
	Requeue *bool `yaml:"requeue,omitempty" json:"requeue,omitempty"`
	// WholeNodes makes multi-node jobs take whole nodes (--exclusive).
	WholeNodes bool `yaml:"whole_nodes,omitempty" json:"whole_nodes,omitempty"`
	// Switches makes multi-node jobs ask for --switches=N: their nodes
	// under at most N leaf switches (0: no rule).
	Switches int `yaml:"switches,omitempty" json:"switches,omitempty"`
	// MaxGPUsPerJob caps one job's GPUs (0: no cap).
	MaxGPUsPerJob int `yaml:"max_gpus_per_job,omitempty" json:"max_gpus_per_job,omitempty"`
	// Reclaim is the idle rule reclaimd enforces for jobs of this class
	// (nil: none). Its Name and Match are filled by the compiler, so they
	// must be absent here.
	Reclaim *reclaimrules.Rule `yaml:"reclaim,omitempty" json:"reclaim,omitempty"`
	// Recovery is how reclaimd retries the failed jobs of this class
	// (nil: never); its Name and Match are filled by the compiler.
	Recovery *reclaimrules.Recovery `yaml:"recovery,omitempty" json:"recovery,omitempty"`
	// Line is the source line of the class, for messages (0: unknown).
	Line int `yaml:"-" json:"-" strictyaml:"line"`
}

// Tenant is an organisation: a Slurm account (the parent of its projects'
// accounts) whose association carries the tenant's limits and priority,
// and a Kubernetes namespace for serving. It has no QOS of its own.
type Tenant struct {
	Name        string `yaml:"name" strictyaml:"required" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Shares is the Fairshare of the tenant account (0: 1).
	Shares int `yaml:"shares,omitempty" json:"shares,omitempty"`
	// Priority is the Priority of the tenant account's association (0:
	// none), which its projects and users inherit; Slurm weighs it by
	// PriorityWeightAssoc. There is no tenant QOS: a job has one QOS, its
	// class's.
	Priority int    `yaml:"priority,omitempty" json:"priority,omitempty"`
	Limits   Limits `yaml:"limits,omitempty" json:"limits,omitempty"`
	// Classes are the classes its projects may use (empty: all;
	// [Policy.ApplyDefaults] fills them in).
	Classes []string `yaml:"classes,omitempty" json:"classes,omitempty"`
	// Admins are the tenant-admin users (Slurm coordinators of the tenant
	// account).
	Admins  []string `yaml:"admins,omitempty" json:"admins,omitempty"`
	Serving *Serving `yaml:"serving,omitempty" json:"serving,omitempty"`
	// Images are the container images its jobs may run ([Images]).
	Images   Images    `yaml:"images,omitempty" json:"images,omitempty"`
	Projects []Project `yaml:"projects" strictyaml:"required" json:"projects"`
	// Line is the source line of the tenant, for messages (0: unknown).
	Line int `yaml:"-" json:"-" strictyaml:"line"`
}

// Project is a Slurm account under its tenant's, named
// "<tenant>-<project>" (see [Policy.Account]).
type Project struct {
	Name        string `yaml:"name" strictyaml:"required" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Shares is the Fairshare of the project account within its tenant
	// (0: 1).
	Shares int    `yaml:"shares,omitempty" json:"shares,omitempty"`
	Limits Limits `yaml:"limits,omitempty" json:"limits,omitempty"`
	// Classes are the classes the project may use, a subset of its
	// tenant's (empty: the tenant's; [Policy.ApplyDefaults] fills them).
	Classes []string `yaml:"classes,omitempty" json:"classes,omitempty"`
	Members []Member `yaml:"members" strictyaml:"required" json:"members"`
	Disk    *Disk    `yaml:"disk,omitempty" json:"disk,omitempty"`
	// Line is the source line of the project, for messages (0: unknown).
	Line int `yaml:"-" json:"-" strictyaml:"line"`
}

// The roles of a project member. RoleClusterAdmin is not a member role:
// cluster admins are listed in [Policy.Admins].
const (
	RoleClusterAdmin = "cluster-admin"
	RoleTenantAdmin  = "tenant-admin"
	RoleMember       = "member"
	RoleViewer       = "viewer"
)

// Member is a user of a project.
type Member struct {
	User string `yaml:"user" strictyaml:"required" json:"user"`
	// Role is member (""), viewer (sees the project in the portal, gets
	// no Slurm association) or tenant-admin (a member who is also a
	// coordinator of the tenant account).
	Role string `yaml:"role,omitempty" json:"role,omitempty"`
	// Default makes this project the user's default account.
	Default bool `yaml:"default,omitempty" json:"default,omitempty"`
	// Line is the source line of the member, for messages (0: unknown).
	Line int `yaml:"-" json:"-" strictyaml:"line"`
}

// Limits cap what a tenant or project may use at once, and its GPU-hour
// budget. Zero is no limit (see the package documentation for
// gpus_by_type).
type Limits struct {
	// GPUs is GrpTRES gres/gpu.
	GPUs int `yaml:"gpus,omitempty" json:"gpus,omitempty"`
	// GPUsByType is GrpTRES gres/gpu:<type>; an entry of 0 forbids the
	// type.
	GPUsByType map[string]int `yaml:"gpus_by_type,omitempty" json:"gpus_by_type,omitempty"`
	// CPUs is GrpTRES cpu.
	CPUs int `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	// MemoryGB is GrpTRES mem, in GiB.
	MemoryGB int `yaml:"memory_gb,omitempty" json:"memory_gb,omitempty"`
	// RunningJobs is GrpJobs: jobs running at once.
	RunningJobs int `yaml:"running_jobs,omitempty" json:"running_jobs,omitempty"`
	// GPUsPerUser is the GPUs one user may use at once in a project:
	// GrpTRES gres/gpu on each of the user's associations under it.
	GPUsPerUser int `yaml:"gpus_per_user,omitempty" json:"gpus_per_user,omitempty"`
	// GPUHours is the GPU-hour budget: GrpTRESMins gres/gpu = GPUHours*60.
	GPUHours int `yaml:"gpu_hours,omitempty" json:"gpu_hours,omitempty"`
}

// Serving is a tenant's quota for model serving on Kubernetes, which
// strata-bridge checks before it deploys and the apiserver enforces
// through the rendered ResourceQuota.
type Serving struct {
	// GPUs is the quota of the dedicated tier: whole GPUs
	// (nvidia.com/gpu); 0 forbids the tier.
	GPUs     int `yaml:"gpus" strictyaml:"required" json:"gpus"`
	Replicas int `yaml:"replicas" strictyaml:"required" json:"replicas"`
	// Namespace is the tenant's Kubernetes namespace ("":
	// "strata-<tenant>").
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// Isolation says the tenant's replicas must never share a GPU
	// without isolation: the time-sliced tier is refused.
	Isolation bool `yaml:"isolation,omitempty" json:"isolation,omitempty"`
	// Tiers are the GPU sharing tiers the tenant may use besides whole
	// GPUs, each with its quota (see servingquota): mig-<profile> (MIG
	// slices of that profile), mps (MPS shares), time-sliced (time
	// slices). A tier left out, or 0, is forbidden.
	Tiers map[string]int `yaml:"tiers,omitempty" json:"tiers,omitempty"`
}

// The file systems a disk quota can be set on.
const (
	FilesystemXFS    = "xfs"
	FilesystemLustre = "lustre"
)

// Disk is a project's disk quota: an XFS project quota or a Lustre
// project quota on the project's directory.
type Disk struct {
	Path       string `yaml:"path" strictyaml:"required" json:"path"`
	Filesystem string `yaml:"filesystem" strictyaml:"required" json:"filesystem"`
	// SoftGB is the soft limit in GiB (0: none).
	SoftGB int `yaml:"soft_gb,omitempty" json:"soft_gb,omitempty"`
	// HardGB is the hard limit in GiB.
	HardGB int `yaml:"hard_gb" strictyaml:"required" json:"hard_gb"`
	// Inodes is the hard limit on files (0: none).
	Inodes int `yaml:"inodes,omitempty" json:"inodes,omitempty"`
	// ProjectID is the XFS or Lustre project id of the directory (0:
	// [DiskProjectID] of the project's account; [Policy.ApplyDefaults]
	// fills it).
	ProjectID int `yaml:"project_id,omitempty" json:"project_id,omitempty"`
}

// The preempt modes of a class.
const (
	PreemptRequeue = "requeue"
	PreemptCancel  = "cancel"
	PreemptSuspend = "suspend"
)

// Account returns the Slurm account of a project: "<tenant>-<project>".
// A tenant's own account is its name.
func (p *Policy) Account(tenant, project string) string { return tenant + "-" + project }

// Class returns the class named name.
func (p *Policy) Class(name string) (*Class, bool) {
	for i := range p.Classes {
		if p.Classes[i].Name == name {
			return &p.Classes[i], true
		}
	}
	return nil, false
}

// Requeueable reports whether jobs of the class are requeueable: Requeue
// when set, else true for train and batch.
func (c *Class) Requeueable() bool {
	if c.Requeue != nil {
		return *c.Requeue
	}
	return c.Name == "train" || c.Name == "batch"
}
