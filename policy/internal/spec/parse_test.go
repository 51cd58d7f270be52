package spec_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func ptr[T any](v T) *T { return &v }

func hours(h float64) spec.Duration { return spec.Duration(time.Duration(h * float64(time.Hour))) }

func ruleDur(d time.Duration) reclaimrules.Duration { return reclaimrules.Duration(d) }

// ignorePositions leaves Positions and File out of comparisons:
// TestPositions and TestParseUnchanged check them.
var ignorePositions = cmpopts.IgnoreFields(spec.Policy{}, "Positions", "File")

// minimal is what minimal.good.yaml parses to, its defaults filled in.
func minimal() *spec.Policy {
	return &spec.Policy{
		APIVersion: "strata/v1",
		Kind:       "Policy",
		Cluster:    spec.Cluster{Name: "gpu", DefaultClass: "batch"},
		Classes:    []spec.Class{{Name: "batch", Partition: "gpu", Requeue: ptr(true), Line: 7}},
		Tenants: []spec.Tenant{{
			Name: "acme", Shares: 1, Classes: []string{"batch"}, Line: 10,
			Projects: []spec.Project{{
				Name: "llm", Shares: 1, Classes: []string{"batch"}, Line: 12,
				Members: []spec.Member{{User: "alice", Role: "member", Default: true, Line: 14}},
			}},
		}},
	}
}

// full is what full.good.yaml parses to.
func full() *spec.Policy {
	big := spec.Limits{
		GPUs: 16, GPUsByType: map[string]int{"h100": 8, "a100": 0}, CPUs: 512, MemoryGB: 4096,
		RunningJobs: 50, GPUsPerUser: 8, GPUHours: 1000,
	}
	classes := []string{"train", "short", "dev"}
	return &spec.Policy{
		APIVersion: "strata/v1",
		Kind:       "Policy",
		Cluster: spec.Cluster{Name: "gpu", GPUTypes: []string{"h100", "a100"}, DefaultClass: "short",
			Partitions: map[string]spec.Partition{
				"gpu":         {Nodes: "gpu[01-16]", Options: "PriorityTier=2 OverSubscribe=NO"},
				"debug":       {Nodes: "gpu17"},
				"interactive": {Nodes: "gpu[18-20],cpu1"},
			}},
		Admins: []string{"root-admin", "hpcadmin"},
		Classes: []spec.Class{{
			Name: "train", Partition: "gpu", DefaultTime: hours(24), MaxTime: hours(168), Priority: 200,
			Preempt: []string{"short"}, PreemptMode: "requeue", Requeue: ptr(true), WholeNodes: true,
			Switches: 2, MaxGPUsPerJob: 128, Line: 11,
			Reclaim: &reclaimrules.Rule{
				Idle:         reclaimrules.IdleDef{MaxUtilPercent: 5, MaxMemActivityPercent: 5, Window: ruleDur(30 * time.Minute), MinCoverage: 0.9},
				StartupGrace: ruleDur(15 * time.Minute),
				FirstWindow:  ruleDur(10 * time.Minute),
				PartialIdle:  reclaimrules.PartialIdle{Enabled: true, MinIdleGPUs: 2, MinIdleFraction: 0.25, Action: reclaimrules.ActionNotify},
				Warn:         ruleDur(10 * time.Minute),
				Signal:       reclaimrules.Signal{Name: "SIGUSR1", Wait: ruleDur(5 * time.Minute), Mode: reclaimrules.SignalSkipUnlessRequested},
				Action:       reclaimrules.ActionRequeueHold,
				MaxRequeues:  1,
			},
		}, {
			Name: "short", Partition: "debug", DefaultTime: hours(0.5), MaxTime: hours(60),
			PreemptMode: "suspend", Requeue: ptr(false), Line: 31,
		}, {
			Name: "dev", Partition: "interactive", DefaultTime: hours(1.5), MaxTime: hours(12),
			Requeue: ptr(false), Line: 37,
		}},
		Tenants: []spec.Tenant{{
			Name: "acme", Description: "Acme Research", Shares: 3, Priority: 5, Limits: big,
			Classes: classes, Admins: []string{"alice"},
			Serving: &spec.Serving{GPUs: 2, Replicas: 3, Namespace: "acme-serving", Isolation: true,
				Tiers: map[string]int{"mig-1g.10gb": 4, "mps": 2}}, Line: 42,
			Projects: []spec.Project{{
				Name: "llm", Description: "Language models", Shares: 2, Limits: big,
				Classes: []string{"train", "short"}, Line: 58,
				Members: []spec.Member{
					{User: "alice", Role: "tenant-admin", Default: true, Line: 64},
					{User: "bob", Role: "member", Default: true, Line: 65},
					{User: "dave", Role: "viewer", Line: 66},
				},
				Disk: &spec.Disk{Path: "/lustre/acme/llm", Filesystem: "lustre", SoftGB: 10, HardGB: 20, Inodes: 1000, ProjectID: 4242},
			}, {
				Name: "empty", Shares: 1, Classes: classes, Members: []spec.Member{}, Line: 68,
			}},
		}, {
			Name: "globex", Shares: 1, Classes: classes, Line: 70,
			Projects: []spec.Project{{
				Name: "rl", Shares: 1, Classes: classes, Line: 72,
				Members: []spec.Member{
					{User: "bob", Role: "member", Line: 74},
					{User: "erin", Role: "member", Default: true, Line: 75},
				},
				// No project_id: ApplyDefaults derives it (TestDiskProjectID).
				Disk: &spec.Disk{Path: "/srv/globex/rl", Filesystem: "xfs", HardGB: 5, ProjectID: spec.DiskProjectID("globex-rl")},
			}},
		}},
	}
}

// fileTests covers every file in testdata (TestFiles fails on a file
// missing here). A .good file parses to want; a .bad file fails with
// exactly wantErrs, in order.
var fileTests = map[string]struct {
	want     func() *spec.Policy
	wantErrs []string
}{
	"minimal.good.yaml": {want: minimal},
	"full.good.yaml":    {want: full},
	"aliases.bad.yaml": {wantErrs: []string{
		`testdata/aliases.bad.yaml:9:5: merge keys (<<) are not supported (hint: write the keys out: strict decoding must see every key where it applies (anchors and aliases of whole values are fine))`,
		`testdata/aliases.bad.yaml:13:24: admins[1]: want a string, got a list (hint: write a single value)`,
	}},
	"anchor.bad.yaml": {wantErrs: []string{
		`testdata/anchor.bad.yaml:10:13: invalid YAML: unknown anchor 'small' referenced (hint: define the anchor with &name before using it as *name)`,
	}},
	"defaults.bad.yaml": {wantErrs: []string{
		`testdata/defaults.bad.yaml:14:49: user "dave" is a viewer, so project "llm" of tenant "acme" cannot be their default (hint: remove default, or make the role member: a viewer gets no Slurm association, so the project cannot be their default account)`,
		`testdata/defaults.bad.yaml:17:34: user "bob" has a second default project (hint: keep default: true on one of them (the other is at 13:34): a Slurm user has one default account)`,
		`testdata/defaults.bad.yaml:22:34: user "bob" has a second default project (hint: keep default: true on one of them (the other is at 13:34): a Slurm user has one default account)`,
	}},
	"disk-ids.bad.yaml": {wantErrs: []string{
		`testdata/disk-ids.bad.yaml:16:82: disk project id 7 of project "vision" of tenant "acme" is also that of project "llm" of tenant "acme" (at 13:79) (hint: set project_id on one of them to an id no other project uses: a project id names the quota of one directory tree)`,
		// Two accounts whose derived ids collide (found by search), and an
		// explicit id equal to a derived one.
		`testdata/disk-ids.bad.yaml:23:15: disk project id 1689756733 of project "p698200" of tenant "acme" is also that of project "p268724" of tenant "acme" (at 20:15) (hint: set project_id on one of them to an id no other project uses: a project id names the quota of one directory tree)`,
		`testdata/disk-ids.bad.yaml:26:86: disk project id 1689756733 of project "derived" of tenant "acme" is also that of project "p268724" of tenant "acme" (at 20:15) (hint: set project_id on one of them to an id no other project uses: a project id names the quota of one directory tree)`,
		`testdata/disk-ids.bad.yaml:29:22: disk path "/srv/acme/my project" holds a space, quote or other character the quota commands cannot take (hint: use letters, digits and . _ - + @ / in the path (link the directory from such a path if need be): the quota commands take it unquoted)`,
		`testdata/disk-ids.bad.yaml:29:91: project_id -3 is negative (hint: give a positive id, or leave it out for one derived from the account)`,
	}},
	"duplicate-key.bad.yaml": {wantErrs: []string{
		`testdata/duplicate-key.bad.yaml:10:5: key priority is given twice (first at 9:5) (hint: remove one of them: YAML would keep only one)`,
		`testdata/duplicate-key.bad.yaml:16:9: key h100 is given twice (first at 15:9) (hint: remove one of them: YAML would keep only one)`,
		`testdata/duplicate-key.bad.yaml:20:1: key kind is given twice (first at 2:1) (hint: remove one of them: YAML would keep only one)`,
	}},
	"duplicates.bad.yaml": {wantErrs: []string{
		`testdata/duplicates.bad.yaml:5:21: GPU type "h100" is listed twice (first at 5:15) (hint: remove one of them)`,
		`testdata/duplicates.bad.yaml:6:16: cluster admin "root" is listed twice (first at 6:10) (hint: remove one of them)`,
		`testdata/duplicates.bad.yaml:10:11: class "batch" is defined twice (first at 8:11) (hint: rename or remove one of them)`,
		`testdata/duplicates.bad.yaml:14:21: tenant admin "alice" is listed twice (first at 14:14) (hint: remove one of them)`,
		`testdata/duplicates.bad.yaml:20:19: user "alice" is a member twice (first at 18:19) (hint: remove one of them: a member has one role in a project)`,
		`testdata/duplicates.bad.yaml:23:15: project "llm" of tenant "acme" is defined twice (first at 16:15) (hint: rename or merge them)`,
		`testdata/duplicates.bad.yaml:27:22: disk path "/srv/acme/llm/" is also the quota path of project "llm" of tenant "acme" (at 22:22) (hint: give each project its own directory: a directory has one project quota)`,
		`testdata/duplicates.bad.yaml:28:11: Slurm account "acme-vision" of tenant "acme-vision" is also the account of project "vision" of tenant "acme" (at 25:15) (hint: rename one of them: every tenant and project is a Slurm account, and account names must be unique)`,
		`testdata/duplicates.bad.yaml:30:11: tenant "acme" is defined twice (first at 13:11) (hint: rename or merge them)`,
	}},
	"empty.bad.yaml": {wantErrs: []string{
		`testdata/empty.bad.yaml:1:1: empty policy file (hint: start with apiVersion: strata/v1 and kind: Policy (see etc/strata/policy.yaml))`,
	}},
	"header.bad.yaml": {wantErrs: []string{
		`testdata/header.bad.yaml:1:13: apiVersion "strata/v2" is not supported (hint: use apiVersion: strata/v1)`,
		`testdata/header.bad.yaml:2:7: kind "ReclaimRules" is not a policy (hint: use kind: Policy (this file is read by strata-policy))`,
	}},
	"limits.bad.yaml": {wantErrs: []string{
		`testdata/limits.bad.yaml:11:13: shares -1 is negative (hint: shares are relative fair-share weights: give 1 or more, or leave it out for 1)`,
		`testdata/limits.bad.yaml:12:15: priority 3000000000 is too large (hint: Slurm stores it in 32 bits: at most 2147483647)`,
		`testdata/limits.bad.yaml:15:28: gpus_by_type h100 40 is above gpus 32 (hint: a type cannot have more than all GPUs: lower it to at most 32, or raise gpus)`,
		`testdata/limits.bad.yaml:15:47: GPU type "v100" is not in cluster.gpu_types (hint: add it to cluster.gpu_types (the gres/gpu:<type> names of AccountingStorageTRES), or use one of h100, a100)`,
		`testdata/limits.bad.yaml:16:13: cpus -8 is negative (hint: give 0 or more; 0, or leaving it out, means no limit)`,
		`testdata/limits.bad.yaml:17:22: gpus_per_user 64 is above gpus 32 (hint: no user could reach it: lower it to at most 32)`,
		`testdata/limits.bad.yaml:21:17: shares -2 is negative (hint: shares are relative fair-share weights: give 1 or more, or leave it out for 1)`,
		`testdata/limits.bad.yaml:23:17: project limit gpus 48 is above tenant "acme"'s 32 (hint: lower it to at most 32: Slurm enforces the tenant's limit too, so the project could never use more (project limits may add up to more than the tenant's))`,
		`testdata/limits.bad.yaml:24:32: project limit gpus_by_type a100 2, but tenant "acme" forbids a100 (0) (hint: remove it, or allow a100 in the tenant's gpus_by_type)`,
		`testdata/limits.bad.yaml:25:22: project limit gpu_hours 2000 is above tenant "acme"'s 1000 (hint: lower it to at most 1000: Slurm enforces the tenant's limit too, so the project could never use more (project limits may add up to more than the tenant's))`,
		`testdata/limits.bad.yaml:26:25: running_jobs -1 is negative (hint: give 0 or more; 0, or leaving it out, means no limit)`,
	}},
	"many-problems.bad.yaml": {wantErrs: []string{
		`testdata/many-problems.bad.yaml:11:15: max_time 12h is shorter than default_time 24h (hint: raise max_time to at least 24h, or lower default_time: jobs that give no time limit would be rejected)`,
		`testdata/many-problems.bad.yaml:15:5: unknown key preemt_mode in a class (hint: did you mean preempt_mode?)`,
		`testdata/many-problems.bad.yaml:18:13: shares: want a whole number, got "many" (hint: write a whole number, such as 8)`,
		`testdata/many-problems.bad.yaml:21:28: GPU type "a100" is not in cluster.gpu_types (hint: add it to cluster.gpu_types (the gres/gpu:<type> names of AccountingStorageTRES), or use one of h100)`,
		`testdata/many-problems.bad.yaml:23:15: project name "LLM" has capitals (hint: write "llm": sacctmgr lowercases names, so "LLM" would never match what Slurm stores)`,
		`testdata/many-problems.bad.yaml:24:24: project limit gpus 32 is above tenant "acme"'s 16 (hint: lower it to at most 16: Slurm enforces the tenant's limit too, so the project could never use more (project limits may add up to more than the tenant's))`,
		`testdata/many-problems.bad.yaml:25:26: project "LLM" names unknown class "serve" (hint: the classes are train, batch)`,
		`testdata/many-problems.bad.yaml:29:19: user "alice" is a member twice (first at 27:19) (hint: remove one of them: a member has one role in a project)`,
		`testdata/many-problems.bad.yaml:32:36: user "alice" has a second default project (hint: keep default: true on one of them (the other is at 28:22): a Slurm user has one default account)`,
		`testdata/many-problems.bad.yaml:33:47: filesystem "nfs" is not supported (hint: use xfs or lustre: the file systems with project quotas strata-policy sets)`,
	}},
	"missing-keys.bad.yaml": {wantErrs: []string{
		`testdata/missing-keys.bad.yaml:1:1: missing key kind in the policy (hint: add kind: Policy)`,
		`testdata/missing-keys.bad.yaml:2:10: missing key name in cluster (hint: add name: the ClusterName of slurm.conf)`,
		`testdata/missing-keys.bad.yaml:4:5: missing key partition in a class (hint: add partition: the Slurm partition the jobs of this class run in)`,
		`testdata/missing-keys.bad.yaml:7:14: missing key replicas in serving (hint: add gpus: and replicas: (0 for none))`,
		`testdata/missing-keys.bad.yaml:9:9: unknown key naem in a project (hint: did you mean name?)`,
		`testdata/missing-keys.bad.yaml:11:13: missing key user in a member (hint: add user: the Unix user name)`,
		`testdata/missing-keys.bad.yaml:12:15: missing key hard_gb in disk (hint: add hard_gb: the hard limit in GiB)`,
	}},
	"names.bad.yaml": {wantErrs: []string{
		`testdata/names.bad.yaml:4:9: cluster name "GPU" has capitals (hint: write "gpu": sacctmgr lowercases names, so "GPU" would never match what Slurm stores)`,
		`testdata/names.bad.yaml:5:15: GPU type name "H100" has capitals (hint: write "h100": sacctmgr lowercases names, so "H100" would never match what Slurm stores)`,
		`testdata/names.bad.yaml:5:21: GPU type name "80gb" is not a valid Slurm name (hint: use lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases names, and other characters break its commands))`,
		`testdata/names.bad.yaml:6:10: user name "root admin" is not a valid Slurm user name (hint: use lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases names, and other characters break its commands))`,
		`testdata/names.bad.yaml:8:11: class name "Train" has capitals (hint: write "train": sacctmgr lowercases names, so "Train" would never match what Slurm stores)`,
		`testdata/names.bad.yaml:9:16: partition "gpu nodes" is not a valid Slurm partition name (hint: use letters, digits, '_', '-' and '.': the name of one partition of slurm.conf)`,
		`testdata/names.bad.yaml:11:11: tenant name "Acme" has capitals (hint: write "acme": sacctmgr lowercases names, so "Acme" would never match what Slurm stores)`,
		`testdata/names.bad.yaml:13:15: project name "my project" is not a valid Slurm name (hint: use lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases names, and other characters break its commands))`,
		`testdata/names.bad.yaml:15:19: user name "Bob" has capitals (hint: write "bob": sacctmgr lowercases user names, so "Bob" would never match what Slurm stores)`,
		`testdata/names.bad.yaml:16:19: user name "bob.smith" is not a valid Slurm user name (hint: use lowercase letters, digits, '_' and '-', starting with a letter (sacctmgr lowercases names, and other characters break its commands))`,
		`testdata/names.bad.yaml:19:15: Slurm account "globex-research-and-development-division-reinforcement-learning-robotics" is 72 characters long (hint: shorten the name: Slurm account names are at most 64 characters)`,
	}},
	"no-tenants.bad.yaml": {wantErrs: []string{
		`testdata/no-tenants.bad.yaml:5:10: no workload classes (hint: define at least one class (train, batch, interactive, serve): every job runs in one)`,
		`testdata/no-tenants.bad.yaml:6:10: no tenants (hint: define at least one tenant with a project: jobs run in project accounts)`,
	}},
	"not-a-mapping.bad.yaml": {wantErrs: []string{
		`testdata/not-a-mapping.bad.yaml:1:1: a policy must be a mapping of keys to values, not a list (hint: start with apiVersion: strata/v1 and kind: Policy (see etc/strata/policy.yaml))`,
	}},
	"partitions.bad.yaml": {wantErrs: []string{
		// The options string is one value: its problems are at its start.
		`testdata/partitions.bad.yaml:8:16: unknown partition option PriortyTier (hint: did you mean PriorityTier?)`,
		`testdata/partitions.bad.yaml:8:16: partition option AllowQos is written by strata-policy (hint: remove it: strata-policy allows the partition's classes)`,
		`testdata/partitions.bad.yaml:8:16: partition option DenyAccounts is written by strata-policy (hint: remove it: Slurm ignores DenyAccounts where AllowAccounts is set; leave the class out of the project's classes instead)`,
		`testdata/partitions.bad.yaml:8:16: partition option hidden is given twice (hint: remove one of them)`,
		`testdata/partitions.bad.yaml:8:16: partition option "Weight" is not Key=Value (hint: write options as on a PartitionName line, Key=Value separated by spaces: "PriorityTier=2 OverSubscribe=NO")`,
		`testdata/partitions.bad.yaml:8:16: partition option State has a quote or '#' in its value "UP#x" (hint: write the value without quotes or '#': slurm.conf reads '#' as the start of a comment)`,
		`testdata/partitions.bad.yaml:10:7: partition "big gpu" is not a valid Slurm partition name (hint: use letters, digits, '_', '-' and '.')`,
		`testdata/partitions.bad.yaml:10:7: partition "big gpu" is the partition of no class (hint: remove it, or make it the partition of a class: its AllowQos are its classes)`,
		`testdata/partitions.bad.yaml:10:14: nodes "gpu[09-12" of partition "big gpu" is not a Slurm host list (hint: give the NodeNames of slurm.conf as a host list without spaces, such as gpu[001-032],gpu040)`,
		// acme allows batch, interactive and serve: idle and dev are no one's.
		`testdata/partitions.bad.yaml:12:7: no project may use the classes of partition "idle" (idle, dev) (hint: add one of its classes to the classes of a tenant or project, or remove the partition and its classes: its AllowAccounts are the projects that may use its classes)`,
		`testdata/partitions.bad.yaml:14:14: nodes "gpu14 gpu15" of partition "serve" is not a Slurm host list (hint: give the NodeNames of slurm.conf as a host list without spaces, such as gpu[001-032],gpu040)`,
		`testdata/partitions.bad.yaml:15:12: partition "spare" is the partition of no class (hint: remove it, or make it the partition of a class: its AllowQos are its classes)`,
		`testdata/partitions.bad.yaml:20:16: class "interactive" runs in partition "interactive", which cluster.partitions does not declare (hint: add interactive under cluster.partitions with its nodes, or leave cluster.partitions out to keep every partition in slurm.conf)`,
	}},
	"preempt.bad.yaml": {wantErrs: []string{
		`testdata/preempt.bad.yaml:8:22: class "train" preempts unknown class "bacth" (hint: did you mean batch?)`,
		`testdata/preempt.bad.yaml:8:29: class "train" preempts itself (hint: remove train from its preempt list)`,
		`testdata/preempt.bad.yaml:11:15: classes "train" and "batch" preempt each other (hint: keep one direction: each class would cancel the other's jobs)`,
		`testdata/preempt.bad.yaml:11:22: class "batch" preempts itself (hint: remove batch from its preempt list)`,
		`testdata/preempt.bad.yaml:11:29: class "train" is listed twice in preempt (hint: remove one of them)`,
		`testdata/preempt.bad.yaml:12:19: preempt_mode "kill" is not a preempt mode (hint: use requeue, cancel or suspend)`,
		`testdata/preempt.bad.yaml:15:19: preempt_mode requeue, but jobs of class "interactive" are not requeueable (hint: set requeue: true, or use preempt_mode: cancel)`,
	}},
	"reclaim.bad.yaml": {wantErrs: []string{
		`testdata/reclaim.bad.yaml:9:32: reclaim.idle.max_util_percent: 120: want a percentage from 0 to 100 (hint: give a percentage from 0 to 100; 5 is typical)`,
		`testdata/reclaim.bad.yaml:9:45: reclaim.idle.window: 30s: want at least 1m0s (0 or absent: 1h0m0s) (hint: give at least 1m: a shorter window holds too few samples; 30m to 2h is typical)`,
		`testdata/reclaim.bad.yaml:9:64: reclaim.idle.min_coverage: 1.5: want a fraction above 0 and at most 1 (0 or absent: 0.8) (hint: give a fraction above 0 and at most 1, such as 0.8)`,
		`testdata/reclaim.bad.yaml:10:21: reclaim.partial_idle: settings given but enabled is false: set enabled: true, or remove them (hint: set partial_idle.enabled: true, or remove the other partial_idle keys)`,
		`testdata/reclaim.bad.yaml:11:15: reclaim.action: "delete": want one of notify, requeue, requeue-hold, cancel (hint: use notify, requeue, requeue-hold or cancel)`,
		`testdata/reclaim.bad.yaml:15:22: reclaim.signal.name: "USR1" is never sent: a signal comes only before requeue, requeue-hold or cancel, and this rule only notifies (hint: checkpoint signals are usually USR1 or TERM; a rule that only notifies sends none)`,
		`testdata/reclaim.bad.yaml:20:22: reclaim.signal.name: "USR3" is not a signal slurmrestd sends: use one of HUP INT QUIT ABRT KILL ALRM TERM USR1 USR2 URG CONT STOP TSTP TTIN TTOU (with or without SIG) (hint: checkpoint signals are usually USR1 or TERM; a rule that only notifies sends none)`,
		`testdata/reclaim.bad.yaml:21:15: reclaim requeues, but jobs of class "interactive" are not requeueable (hint: set requeue: true on the class, or use action: cancel)`,
	}},
	"recovery.bad.yaml": {wantErrs: []string{
		"testdata/recovery.bad.yaml:9:7: name is not allowed in a recovery block (hint: remove name: strata-policy names the recovery rule after its class)",
		"testdata/recovery.bad.yaml:10:27: recovery.same_failure_nodes: 1 would hold every job at its first failure: give 2 or more (0 or absent: 3) (hint: give 2 or more, or leave it out for 3)",
		"testdata/recovery.bad.yaml:11:28: recovery.gpu_fault.retries: 5 is more than max_retries 3: the job would be held first (hint: give 0 to 3 retries, no more than max_retries)",
		`testdata/recovery.bad.yaml:11:45: recovery.gpu_fault.on_exhausted: "drop": want hold or leave (hint: use hold or leave)`,
		"testdata/recovery.bad.yaml:12:29: recovery.user_error.backoff: set, but user_error is never retried: give retries, or remove backoff (hint: give a time such as 1m, or remove backoff)",
		"testdata/recovery.bad.yaml:12:47: recovery.user_error.exclude_node: true, but user_error is never retried: give retries, or remove exclude_node (hint: give retries, or remove exclude_node)",
		"testdata/recovery.bad.yaml:12:67: recovery.user_error.on_exhausted: hold, but user_error is never retried: a job that failed so would be held at once; give retries, or use leave (hint: use hold or leave)",
		"testdata/recovery.bad.yaml:13:60: recovery.nccl.hold_reason: set, but the job is not held: set on_exhausted: hold, or remove hold_reason (hint: set on_exhausted: hold, or remove hold_reason; keep it to one short line)",
		`testdata/recovery.bad.yaml:13:85: recovery.nccl.notify[1]: "everyone": want owner or admins (hint: list owner, admins or both)`,
		"testdata/recovery.bad.yaml:14:7: unknown key segfault in a recovery block (hint: the keys of a recovery block are max_retries, same_failure_nodes, node_fail, gpu_fault, oom, timeout, preempted, nccl, user_error)",
		`testdata/recovery.bad.yaml:18:7: recovery retries node_fail, but jobs of class "interactive" are not requeueable: a retry is a requeue (hint: set requeue: true on the class, or give every failure class retries: 0)`,
	}},
	"roles.bad.yaml": {wantErrs: []string{
		`testdata/roles.bad.yaml:13:19: user root cannot be a project member (cluster-admin of project "llm" of tenant "acme") (hint: remove it: root administers Slurm and needs no project; give the person their own user here, or list them under the top-level admins key)`,
		`testdata/roles.bad.yaml:14:19: role cluster-admin is not a project role (hint: list cluster admins under the top-level admins key)`,
		`testdata/roles.bad.yaml:16:19: role "owner" is not a role (hint: use member, viewer or tenant-admin)`,
		`testdata/roles.bad.yaml:17:19: member with no user name (hint: give the Unix user name)`,
		`testdata/roles.bad.yaml:20:19: user root cannot be a project member (viewer of project "ops" of tenant "acme") (hint: remove it: root administers Slurm and needs no project; give the person their own user here, or list them under the top-level admins key)`,
	}},
	"serving-disk.bad.yaml": {wantErrs: []string{
		`testdata/serving-disk.bad.yaml:10:21: gpus -1 is negative (hint: give 0 or more GPUs for the tenant's model servers)`,
		`testdata/serving-disk.bad.yaml:10:35: replicas -2 is negative (hint: give 0 or more replicas)`,
		`testdata/serving-disk.bad.yaml:10:50: namespace "Acme_NS" is not a Kubernetes namespace name (hint: use lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit)`,
		`testdata/serving-disk.bad.yaml:14:22: disk path "srv/acme/llm" is not absolute (hint: give the absolute path of the project directory)`,
		`testdata/serving-disk.bad.yaml:14:48: filesystem "ext4" is not supported (hint: use xfs or lustre: the file systems with project quotas strata-policy sets)`,
		`testdata/serving-disk.bad.yaml:14:63: soft_gb 600 is above hard_gb 500 (hint: the soft limit must be at most the hard limit: lower it to 500 or less, or raise hard_gb)`,
		`testdata/serving-disk.bad.yaml:14:90: inodes -1 is negative (hint: give 0 or more files; 0 is no limit)`,
		`testdata/serving-disk.bad.yaml:17:69: disk quota with no hard limit (hint: set hard_gb in GiB; remove disk for no quota)`,
		`testdata/serving-disk.bad.yaml:19:14: the default namespace "strata-big_co" is not a Kubernetes namespace name (hint: set serving.namespace: lowercase letters, digits and '-', at most 63 characters)`,
	}},
	"images.good.yaml": {want: func() *spec.Policy {
		p := minimal()
		p.Cluster.OCIBundles = "/var/lib/strata/bundles"
		p.Classes[0].Line = 8
		t := &p.Tenants[0]
		t.Line, t.Projects[0].Line, t.Projects[0].Members[0].Line = 11, 16, 18
		t.Images = spec.Images{"registry.example.com/acme/*", "nvcr.io/nvidia/pytorch:25.04-py3"}
		return p
	}},
	"images.bad.yaml": {wantErrs: []string{
		`testdata/images.bad.yaml:5:16: "srv/bundles/" is not a directory of OCI bundles (hint: write an absolute, clean directory other than /, such as /srv/strata/bundles)`,
		`testdata/images.bad.yaml:13:9: "Registry.example.com/Acme" is not an image or an image prefix (hint: write an image, lower case, such as registry.example.com/acme/train:2.1, or a registry path and /*, such as registry.example.com/acme/*)`,
		`testdata/images.bad.yaml:14:9: image registry.example.com/acme/* is also images[0] (hint: list each image once)`,
		`testdata/images.bad.yaml:15:9: "registry.example.com/../etc/*" is not an image or an image prefix (hint: write an image, lower case, such as registry.example.com/acme/train:2.1, or a registry path and /*, such as registry.example.com/acme/*)`,
		`testdata/images.bad.yaml:16:9: "*" is not an image or an image prefix (hint: write an image, lower case, such as registry.example.com/acme/train:2.1, or a registry path and /*, such as registry.example.com/acme/*)`,
		`testdata/images.bad.yaml:17:9: "nvcr.io/nvidia/pytorch:25.04-py3/*" is not an image or an image prefix (hint: write an image, lower case, such as registry.example.com/acme/train:2.1, or a registry path and /*, such as registry.example.com/acme/*)`,
		`testdata/images.bad.yaml:18:9: "acme/x;reboot" is not an image or an image prefix (hint: write an image, lower case, such as registry.example.com/acme/train:2.1, or a registry path and /*, such as registry.example.com/acme/*)`,
	}},
	"serving-tiers.bad.yaml": {wantErrs: []string{
		`testdata/serving-tiers.bad.yaml:15:18: tier "mig-big" is not a MIG profile such as mig-1g.10gb or mig-3g.40gb (hint: name a MIG profile as NVIDIA's device plugin does, such as mig-1g.10gb, mig-3g.40gb or mig-7g.80gb)`,
		`testdata/serving-tiers.bad.yaml:16:20: tier dedicated is serving.gpus, not one of serving.tiers (hint: give whole GPUs as serving.gpus)`,
		`testdata/serving-tiers.bad.yaml:17:14: mps -1 is negative (hint: give 0 or more; 0, or leaving the tier out, forbids it)`,
		`testdata/serving-tiers.bad.yaml:18:22: tier time-sliced shares GPUs with no isolation, and the tenant asks for isolation (serving.isolation) (hint: remove the time-sliced tier, or give the tenant mig-<profile> or mps tiers, which isolate memory)`,
		`testdata/serving-tiers.bad.yaml:19:17: tier "shared" is not one of dedicated, mig-<profile> (such as mig-1g.10gb or mig-3g.40gb), mps or time-sliced (hint: use dedicated, mig-<profile> (such as mig-1g.10gb or mig-3g.40gb), mps or time-sliced)`,
	}},
	"syntax.bad.yaml": {wantErrs: []string{
		`testdata/syntax.bad.yaml:8:4: invalid YAML: did not find expected '-' indicator (hint: the indentation of this line matches no key or list above it: the keys of one mapping start in the same column, as do the '- ' items of one list)`,
	}},
	"tabs.bad.yaml": {wantErrs: []string{
		`testdata/tabs.bad.yaml:4:1: invalid YAML: found character that cannot start any token (hint: indent with spaces: YAML does not allow tabs)`,
	}},
	"times.bad.yaml": {wantErrs: []string{
		`testdata/times.bad.yaml:9:15: max_time 24h is shorter than default_time 48h (hint: raise max_time to at least 48h, or lower default_time: jobs that give no time limit would be rejected)`,
		`testdata/times.bad.yaml:12:19: default_time -1h is negative (hint: give a positive time, or leave it out for the partition's DefaultTime)`,
		`testdata/times.bad.yaml:13:15: max_time 1m30s is not a whole number of minutes (hint: Slurm counts time limits in whole minutes: write 2m)`,
		`testdata/times.bad.yaml:16:19: default_time: "1-25:00:00" is not a duration (hint: write hours or minutes with a unit ("36h", "90m"), days ("7d"), or Slurm's days-hours:minutes:seconds ("1-00:00:00"))`,
		`testdata/times.bad.yaml:17:15: max_time: "3 days" is not a duration (hint: write hours or minutes with a unit ("36h", "90m"), days ("7d"), or Slurm's days-hours:minutes:seconds ("1-00:00:00"))`,
	}},
	"two-documents.bad.yaml": {wantErrs: []string{
		`testdata/two-documents.bad.yaml:7:1: a second YAML document (hint: a policy file holds one document: remove the '---' and what follows, or merge it into the first)`,
	}},
	"unclosed.bad.yaml": {wantErrs: []string{
		`testdata/unclosed.bad.yaml:5:3: invalid YAML: did not find expected ',' or ']' (hint: close the [list] or {mapping} that starts here, and separate its items with ',')`,
	}},
	"unknown-class.bad.yaml": {wantErrs: []string{
		`testdata/unknown-class.bad.yaml:5:18: default class "default" is not defined (hint: define it under classes, or use one of train, batch, interactive)`,
		`testdata/unknown-class.bad.yaml:15:15: tenant "acme" names unknown class "trian" (hint: did you mean train?)`,
		`testdata/unknown-class.bad.yaml:15:29: class "batch" is listed twice (hint: remove one of them)`,
		`testdata/unknown-class.bad.yaml:18:19: project "llm" uses class "interactive", which tenant "acme" does not allow (hint: add interactive to the classes of tenant "acme", or remove it here)`,
		`testdata/unknown-class.bad.yaml:18:32: project "llm" names unknown class "gpu-long" (hint: the classes are train, batch, interactive)`,
	}},
	"unknown-key.bad.yaml": {wantErrs: []string{
		`testdata/unknown-key.bad.yaml:5:3: unknown key gpu_typs in cluster (hint: did you mean gpu_types?)`,
		`testdata/unknown-key.bad.yaml:9:5: unknown key colour in a class (hint: the keys of a class are name, partition, default_time, max_time, priority, preempt, preempt_mode, requeue, whole_nodes, switches, max_gpus_per_job, reclaim, recovery)`,
		`testdata/unknown-key.bad.yaml:11:7: name is not allowed in a reclaim rule (hint: remove it: strata-policy names the rule after its class)`,
		`testdata/unknown-key.bad.yaml:12:7: match is not allowed in a reclaim rule (hint: remove it: strata-policy matches the rule to the jobs of its class)`,
		`testdata/unknown-key.bad.yaml:13:27: unknown key max_util in idle (hint: the keys of idle are max_util_percent, max_mem_activity_percent, window, min_coverage)`,
		`testdata/unknown-key.bad.yaml:16:5: unknown key shrares in a tenant (hint: did you mean shares?)`,
		`testdata/unknown-key.bad.yaml:18:9: unknown key naem in a project (hint: did you mean name?)`,
		`testdata/unknown-key.bad.yaml:21:13: unknown key Role in a member (hint: did you mean role?)`,
	}},
	"wrong-types.bad.yaml": {wantErrs: []string{
		`testdata/wrong-types.bad.yaml:5:14: gpu_types: want a list, got "h100" (hint: write a list: [h100], or one '- item' line per item)`,
		`testdata/wrong-types.bad.yaml:7:11: name: want a string, got 123 (hint: quote it: "123")`,
		`testdata/wrong-types.bad.yaml:9:15: priority: want a whole number, got "5" (hint: remove the quotes: a number in quotes is a string)`,
		`testdata/wrong-types.bad.yaml:10:14: requeue: want true or false, got "yes" (hint: write true or false: YAML 1.2 reads yes as a string)`,
		`testdata/wrong-types.bad.yaml:11:15: max_time: want a duration, got 30 (hint: add a unit, such as "30m" (Slurm reads a bare number as minutes) or "30s")`,
		`testdata/wrong-types.bad.yaml:12:19: default_time: "soon" is not a duration (hint: write hours or minutes with a unit ("36h", "90m"), days ("7d"), or Slurm's days-hours:minutes:seconds ("1-00:00:00"))`,
		`testdata/wrong-types.bad.yaml:13:18: whole_nodes: want true or false, got 1 (hint: write true or false)`,
		`testdata/wrong-types.bad.yaml:15:32: max_util_percent: want a number, got "5%" (hint: write a number, such as 5 or 0.5)`,
		`testdata/wrong-types.bad.yaml:15:46: window: want a duration, got 30 (hint: add a unit, such as "30m" (Slurm reads a bare number as minutes) or "30s")`,
		`testdata/wrong-types.bad.yaml:16:21: max_requeues: want a whole number, got 1.5 (hint: write a whole number, such as 8)`,
		`testdata/wrong-types.bad.yaml:19:13: shares: want a whole number, got "ten" (hint: write a whole number, such as 8)`,
		`testdata/wrong-types.bad.yaml:20:12: limits has no value (hint: give a value, or remove the key)`,
		`testdata/wrong-types.bad.yaml:21:14: serving: want a mapping, got a list (hint: write key: value lines indented under it)`,
		`testdata/wrong-types.bad.yaml:25:25: gpus_by_type: want a mapping, got a list (hint: write key: value lines indented under it)`,
		`testdata/wrong-types.bad.yaml:26:17: gpus: want a whole number, got 99999999999999999999 (hint: write a whole number, such as 8)`,
		`testdata/wrong-types.bad.yaml:28:11: members: want a list, got a mapping (hint: write a list: [a, b], or one '- item' line per item)`,
	}},
}

func TestFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if _, ok := fileTests[filepath.Base(file)]; !ok {
			t.Errorf("%s has no case in fileTests", file)
		}
	}
	for name, tc := range fileTests {
		t.Run(name, func(t *testing.T) {
			p, err := spec.Load(filepath.Join("testdata", name))
			if tc.wantErrs != nil {
				if p != nil {
					t.Errorf("Load returned a policy with an error")
				}
				var ds spec.Diagnostics
				if !errors.As(err, &ds) {
					t.Fatalf("Load error = %v, want Diagnostics", err)
				}
				var got []string
				if err != nil {
					got = strings.Split(err.Error(), "\n")
				}
				if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
					t.Errorf("diagnostics (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want(), p, ignorePositions); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}

// head is a valid start of a policy, for inline cases.
const head = `apiVersion: strata/v1
kind: Policy
cluster: {name: gpu}
classes: [{name: batch, partition: gpu}]
`

// TestParseInline covers what is easier to read inline than in a file.
// The file name is "p.yaml".
func TestParseInline(t *testing.T) {
	for name, tc := range map[string]struct {
		data     string
		wantErrs []string
	}{
		"null document": {data: "~\n", wantErrs: []string{
			"p.yaml:1:1: empty policy file (hint: start with apiVersion: strata/v1 and kind: Policy (see etc/strata/policy.yaml))",
		}},
		"document marker only": {data: "---\n", wantErrs: []string{
			"p.yaml:1:1: empty policy file (hint: start with apiVersion: strata/v1 and kind: Policy (see etc/strata/policy.yaml))",
		}},
		"scalar document": {data: "policy\n", wantErrs: []string{
			`p.yaml:1:1: a policy must be a mapping of keys to values, not "policy" (hint: start with apiVersion: strata/v1 and kind: Policy (see etc/strata/policy.yaml))`,
		}},
		"syntax error in a second document": {data: head + "tenants: []\n---\na: [\n", wantErrs: []string{
			"p.yaml:7:1: invalid YAML: did not find expected node content (hint: check the indentation (spaces only) and the quoting on this line)",
		}},
		"unterminated quote": {data: head + "tenants:\n  - name: \"acme\n    projects: []\n", wantErrs: []string{
			"p.yaml:6:3: invalid YAML: found unexpected end of stream (hint: a quote or bracket opened here is never closed)",
		}},
		"key indented under a value": {data: head + "tenants: acme\n  projects: []\n", wantErrs: []string{
			"p.yaml:6:3: invalid YAML: mapping values are not allowed in this context (hint: a key is indented under a plain value, or a value holds ': ': check the indentation, or quote the value)",
		}},
		"mapping key": {data: head + "tenants: []\n? [a]\n: b\n", wantErrs: []string{
			"p.yaml:6:3: a key must be a name, not a list (hint: write a plain name before the ':')",
		}},
		"alias of a mapping": {data: head + "x: &t {name: acme, projects: []}\ntenants: [*t]\n", wantErrs: []string{
			"p.yaml:5:1: unknown key x in the policy (hint: the keys of the policy are apiVersion, kind, cluster, classes, tenants, admins, reclaim)",
		}},
		"aliases that expand too far": {data: head + aliasBomb(), wantErrs: []string{
			"p.yaml:5:1: unknown key a in the policy (hint: the keys of the policy are apiVersion, kind, cluster, classes, tenants, admins, reclaim)",
			"p.yaml:6:1: unknown key b in the policy (hint: the keys of the policy are apiVersion, kind, cluster, classes, tenants, admins, reclaim)",
			"p.yaml:7:1: unknown key c in the policy (hint: the keys of the policy are apiVersion, kind, cluster, classes, tenants, admins, reclaim)",
			"p.yaml:8:127: aliases expand to more than 100000 values (hint: write the values out: a policy is not that large)",
		}},
		"too many problems": {data: head + manyTenants(120), wantErrs: tooMany()},
		"custom tag": {data: head + "tenants: [{name: !team acme, projects: []}]\n", wantErrs: []string{
			"p.yaml:5:18: name: want a string, got !team acme (hint: remove the tag !team: a policy uses no YAML tags)",
		}},
		"empty list item": {data: head + "tenants:\n  -\n", wantErrs: []string{
			"p.yaml:6:4: tenants[0] has no value (hint: give the item a value, or remove the empty '-' line)",
		}},
		"windows line ends": {data: strings.ReplaceAll(head+"tenants: [{name: acme, shares: x, projects: []}]\n", "\n", "\r\n"), wantErrs: []string{
			`p.yaml:5:32: shares: want a whole number, got "x" (hint: write a whole number, such as 8)`,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := spec.Parse("p.yaml", []byte(tc.data))
			if p != nil || err == nil {
				t.Fatalf("Parse = %v, %v: want no policy and an error", p, err)
			}
			if diff := cmp.Diff(tc.wantErrs, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

// aliasBomb is a billion laughs: 100 tenants of 100 projects of 10
// members, from three lines.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a: &m {user: alice}\n")
	b.WriteString("b: &p {name: p, members: [" + strings.Repeat("*m, ", 9) + "*m]}\n")
	b.WriteString("c: &t {name: t, projects: [" + strings.Repeat("*p, ", 99) + "*p]}\n")
	b.WriteString("tenants: [" + strings.Repeat("*t, ", 99) + "*t]\n")
	return b.String()
}

// manyTenants writes n tenants with a negative share each.
func manyTenants(n int) string {
	var b strings.Builder
	b.WriteString("tenants:\n")
	for i := range n {
		b.WriteString("  - {name: t" + strconv.Itoa(i) + ", shares: -1, projects: []}\n")
	}
	return b.String()
}

// tooMany is what manyTenants(120) gives: the first 100 problems and a
// count of the rest.
func tooMany() []string {
	var want []string
	for i := range 100 {
		col := 23 + len(strconv.Itoa(i))
		want = append(want, "p.yaml:"+strconv.Itoa(6+i)+":"+strconv.Itoa(col)+
			": shares -1 is negative (hint: shares are relative fair-share weights: give 1 or more, or leave it out for 1)")
	}
	return append(want, "p.yaml:105:25: and 20 more problems (hint: fix these first)")
}

// TestPositions: Parse records where every value is, and Line fields.
func TestPositions(t *testing.T) {
	p, err := spec.Load(filepath.Join("testdata", "full.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]spec.Pos{
		"":                                       {Line: 2, Col: 1},
		"cluster.name":                           {Line: 5, Col: 9},
		"cluster.gpu_types[1]":                   {Line: 6, Col: 21},
		"cluster.partitions.debug.nodes":         {Line: 8, Col: 101},
		"classes[0]":                             {Line: 11, Col: 5},
		"classes[0].reclaim.idle.window":         {Line: 23, Col: 72},
		"tenants[0].limits.gpus_by_type.a100":    {Line: 48, Col: 37},
		"tenants[0].projects[0].limits":          {Line: 61, Col: 17}, // the alias
		"tenants[0].projects[0].limits.gpus":     {Line: 47, Col: 13}, // inside the anchor
		"tenants[0].projects[0].members[1].user": {Line: 65, Col: 20},
		"tenants[1].projects[0].members[1]":      {Line: 75, Col: 13},
		"tenants[1].projects[0].disk.path":       {Line: 76, Col: 22},
		"tenants[1].projects[0].disk.soft_gb":    {Line: 76, Col: 15}, // absent: its mapping
		"tenants[7].name":                        {Line: 42, Col: 3},  // not there: the list
	} {
		if got := p.Positions.At(path); got != want {
			t.Errorf("Positions.At(%q) = %v, want %v", path, got, want)
		}
	}
	if got := spec.Positions(nil).At("cluster"); got != (spec.Pos{}) {
		t.Errorf("nil Positions: At = %v, want the zero Pos", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := spec.Load(filepath.Join(t.TempDir(), "policy.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
	var ds spec.Diagnostics
	if errors.As(err, &ds) {
		t.Errorf("a missing file gave Diagnostics: %v", ds)
	}
}

// TestParseUnchanged: the policy does not share memory with Parse's
// input, which a caller may reuse.
func TestParseUnchanged(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "full.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Parse("full.good.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = ' '
	}
	if diff := cmp.Diff(full(), p, ignorePositions); diff != "" {
		t.Errorf("policy changed with its input (-want +got):\n%s", diff)
	}
	if p.File != "full.good.yaml" {
		t.Errorf("File = %q, want the name Parse was given (sources name it)", p.File)
	}
}

// TestParseAccepts: spellings of minimal.good.yaml that read the same.
func TestParseAccepts(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "minimal.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	for name, in := range map[string]string{
		"byte order mark":   "\ufeff" + base,
		"windows line ends": strings.ReplaceAll(base, "\n", "\r\n"),
		"standard tags":     strings.Replace(base, "name: gpu", "name: !!str gpu", 1),
		"document markers":  "---\n" + base + "...\n",
		"anchor and alias": strings.Replace(strings.Replace(base, "partition: gpu", "partition: &p gpu", 1),
			"name: acme", "name: acme\n    description: *p", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := spec.Parse("p.yaml", []byte(in)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDurationForms: every length of time in a policy, job limits and
// reclaim rules alike, reads the one grammar of internal/duration.
func TestDurationForms(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "minimal.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(string(data), "    partition: gpu\n", "    partition: gpu\n    max_time: 7d\n    default_time: 1-12:00:00\n"+
		"    reclaim: {idle: {window: 1d}, warn: \"30:00\", startup_grace: 1h30m}\n", 1)
	p, err := spec.Parse("p.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Classes[0]
	got := []time.Duration{c.MaxTime.Std(), c.DefaultTime.Std(), c.Reclaim.Idle.Window.Std(), c.Reclaim.Warn.Std(), c.Reclaim.StartupGrace.Std()}
	want := []time.Duration{7 * 24 * time.Hour, 36 * time.Hour, 24 * time.Hour, 30 * time.Minute, 90 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("durations (-want +got):\n%s", diff)
	}
}
