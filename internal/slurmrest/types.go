package slurmrest

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Ping is one controller's answer to a ping.
type Ping struct {
	Hostname   string
	Responding bool
	Primary    bool
	Latency    time.Duration
	Status     string // "No error" on v0.0.45; "UP"/"DOWN" on v0.0.42
}

// ServerInfo says what the server is and which parser the client speaks.
type ServerInfo struct {
	Release string // Slurm release, e.g. "26.05.5"
	Cluster string
	Parser  string // data parser in use, e.g. "v0.0.45"
	Offered []string
}

// JobState is Slurm's job state: a base state plus flags, as slurmrestd
// lists them ("PENDING", "COMPLETING", ...). Treat it as a set.
type JobState []string

// Has reports whether s contains state (case-insensitive).
func (s JobState) Has(state string) bool {
	return slices.ContainsFunc(s, func(x string) bool { return strings.EqualFold(x, state) })
}

// Base returns the first (base) state, or "" when unknown.
func (s JobState) Base() string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func (s JobState) String() string { return strings.Join(s, ",") }

// GPU is one allocated GPU: the node and Slurm's GPU index on that node,
// which is the position of the device in the node's gres.conf File list (and
// what CUDA_VISIBLE_DEVICES carries inside the job).
type GPU struct {
	Node  string
	Index int
	Type  string // "h100", or "" for an untyped GRES
}

func (g GPU) String() string { return fmt.Sprintf("%s:%d", g.Node, g.Index) }

// Job is a Slurm job as Strata sees it.
type Job struct {
	ID           int64
	Name         string
	User         string
	UserID       int64
	Account      string
	Partition    string
	QOS          string
	State        JobState
	StateReason  string // "" when Slurm says None
	Nodes        []string
	NodeList     string // compressed, as Slurm prints it
	GPUs         []GPU
	TRESAlloc    TRESList
	TRESPerNode  string
	Comment      string
	AdminComment string
	Requeue      bool // the job may be requeued
	RestartCount int
	Held         bool
	TimeLimit    time.Duration // 0 when unlimited or unset
	SubmitTime   time.Time
	EligibleTime time.Time
	StartTime    time.Time
	EndTime      time.Time
	ExitCode     int
	// ExitSignal is the signal that ended the batch script (0: none).
	ExitSignal int
	WorkDir    string
	StdOut     string
	// StdErr is the path of the batch script's standard error as given
	// at submission ("" when it goes to StdOut), with Slurm's %j-style
	// patterns unexpanded.
	StdErr string
	// ExcludedNodes is the job's ExcNodeList, comma-separated as
	// slurmrestd shows it ("" when none).
	ExcludedNodes string
	// RequiredNodes is the job's ReqNodeList (sbatch --nodelist), as
	// slurmrestd shows it ("" when none).
	RequiredNodes string
	BatchHost     string
	// TRESReq is all the job asks for (tres_req_str): for a pending job,
	// what Slurm checks against its limits.
	TRESReq TRESList
	// StateDesc details StateReason ("ReqNodeNotAvail, UnavailableNodes:gpu3").
	StateDesc  string
	Dependency string // as Slurm shows it, "afterok:12(unfulfilled)"; "" when none
	// ArrayJobID and ArrayTaskID place a task of a job array (0 and -1
	// for a job that is not one). Each task has its own ID, except that
	// the array's own record (ID == ArrayJobID) also runs a task.
	ArrayJobID  int64
	ArrayTaskID int64
	// HetJobID and HetJobOffset place a component of a heterogeneous job
	// (HetJobID 0 for a job that is not one); the leader is offset 0, and
	// its ID is the HetJobID.
	HetJobID     int64
	HetJobOffset int64
	// Priority is the job's priority as slurmctld last computed it (0:
	// held; -1: not given).
	Priority int64
	// Nice is the job's nice value, which Slurm subtracts from its priority.
	Nice int64
	// AccrueTime is when the job began to accrue age priority.
	AccrueTime time.Time
	// CPUs and NodeCount are the job's CPUs and nodes (what it asks for
	// while it pends).
	CPUs, NodeCount int
}

// Running reports whether the job is running.
func (j Job) Running() bool { return j.State.Has("RUNNING") }

// JobRef names what a signal, requeue or cancel reaches, as slurmctld
// reads it: "4242" (a job), "4242_7" (task 7 of array 4242 alone), "4300+1"
// (component 1 of heterogeneous job 4300 alone).
type JobRef string

// RefOf is the JobRef of a whole job by its ID. For the record of a job
// array (ID == its array's ID) that is the whole array, and for a
// heterogeneous job's leader the whole heterogeneous job: to act on one
// task or component, use [Job.Ref].
func RefOf(id int64) JobRef { return JobRef(strconv.FormatInt(id, 10)) }

// Ref names this record alone: its array task, or its heterogeneous
// component, or else its ID.
func (j Job) Ref() JobRef {
	switch {
	case j.HetJobID > 0:
		return JobRef(strconv.FormatInt(j.HetJobID, 10) + "+" + strconv.FormatInt(j.HetJobOffset, 10))
	case j.ArrayJobID > 0 && j.ArrayTaskID >= 0:
		return JobRef(strconv.FormatInt(j.ArrayJobID, 10) + "_" + strconv.FormatInt(j.ArrayTaskID, 10))
	}
	return RefOf(j.ID)
}

// HetComponent reports whether the job is one component of a
// heterogeneous job. Slurm requeues only whole heterogeneous jobs.
func (j Job) HetComponent() bool { return j.HetJobID > 0 }

// JobList is the answer to a conditional jobs listing.
type JobList struct {
	Jobs []Job
	// Unchanged is true when nothing changed since the time asked for; Jobs
	// is then empty and the caller keeps what it has.
	Unchanged bool
	// Updated is the server's last update time, to pass as since next time.
	Updated time.Time
	// Unreadable are the jobs of the answer whose record could not be
	// read (a gres_detail that does not pair with the node list, a TRES
	// string that does not parse); they are left out of Jobs, so that one
	// odd record does not cost the caller the whole list.
	Unreadable []UnreadableJob
}

// UnreadableJob is a job of a listing whose record could not be read.
type UnreadableJob struct {
	ID  int64
	Err error
}

// JobSpec is what Submit sends. Zero fields are left to Slurm's defaults.
type JobSpec struct {
	Name        string
	Script      string
	Account     string
	Partition   string
	QOS         string
	TRESPerNode string // "gres/gpu:2", "gres/gpu:h100:4"
	Nodes       string // node count or range, e.g. "2" or "1-2"
	// NodeList asks for these nodes (sbatch --nodelist), as a host list.
	NodeList string
	Tasks    int
	// TasksPerNode is --ntasks-per-node.
	TasksPerNode int
	CPUsPerTask  int
	// MemoryPerNode is --mem, in MiB.
	MemoryPerNode int64
	// Array is --array: "0-15", "1,3,5", "0-99%8".
	Array string
	// Switches is --switches: the most leaf switches the job's nodes
	// may span.
	Switches    int
	TimeLimit   time.Duration // rounded up to whole minutes
	WorkDir     string
	StdOut      string
	StdErr      string
	Comment     string
	Environment []string // KEY=VALUE; PATH is added when missing
	Requeue     *bool
	Hold        bool
	Exclusive   bool
	// Container is sbatch --container: the path of an OCI bundle on the
	// nodes, which slurmstepd runs the job in through oci.conf's runtime
	// (crun, runc); "" for none.
	Container string
}

// SubmitResult is slurmrestd's answer to a submission.
type SubmitResult struct {
	JobID       int64
	StepID      string
	UserMessage string // job_submit plugin message
	Warnings    []string
}

// JobUpdate changes a job; nil fields are left alone.
type JobUpdate struct {
	Comment      *string
	AdminComment *string
	Requeue      *bool
	Hold         *bool
	TimeLimit    *time.Duration
	BeginTime    *time.Time
	// ExcludedNodes replaces the job's ExcNodeList (node names); only a
	// pending or requeued job's takes effect.
	ExcludedNodes *[]string
}

// Node is a Slurm node.
type Node struct {
	Name       string
	State      []string
	Reason     string
	Partitions []string
	CPUs       int
	AllocCPUs  int
	Sockets    int    // per node (all boards)
	Cores      int    // per socket
	Threads    int    // per core
	RealMemory int64  // MiB
	GPUs       int    // configured GPUs
	GPUsUsed   int    // allocated GPUs
	GPUType    string // first GPU type in the node's GRES, if any
	GRES       string
	GRESUsed   string
	Address    string
	Port       int
}

// Partition is a Slurm partition.
type Partition struct {
	Name       string
	Nodes      string
	TotalNodes int
	TotalCPUs  int
	State      []string
	MaxTime    time.Duration // 0 when unlimited
	QOS        string
	Accounts   string // AllowAccounts; "" for all
	// PriorityJobFactor and PriorityTier are slurm.conf's; the partition
	// factor of a job's priority is its PriorityJobFactor over the largest.
	PriorityJobFactor, PriorityTier int64
	// TRES are the partition's TRES in all (its nodes'): what a job's
	// TRES priority factors are fractions of.
	TRES TRESList
}

// Share is one row of the fair-share tree (sshare).
type Share struct {
	Account         string
	User            string // "" for an account row
	Parent          string
	Shares          int64
	SharesNorm      float64
	RawUsage        int64
	EffectiveUsage  float64
	FairShareFactor float64
	LevelFS         float64 // +Inf for an association that has used nothing
	// TRESUsage is the decayed usage by TRES key ("gres/gpu") in
	// TRES-seconds: what GrpTRESMins budgets are checked against (sshare
	// shows it as GrpTRESRaw, in minutes).
	TRESUsage map[string]float64
	// TRESRunSecs is what running jobs will still use by TRES key, in
	// TRES-seconds, if they run to their time limit (sshare's TRESRunMins).
	TRESRunSecs map[string]int64
}

// Account is a slurmdbd account.
type Account struct {
	Name         string
	Description  string
	Organization string
	// Coordinators are the users made coordinators of this account itself.
	// A coordinator of a parent account coordinates its children too, but
	// is listed only under the parent.
	Coordinators []string
}

// Association is a slurmdbd association: an account row (User == "") or a
// user's row under an account.
type Association struct {
	Cluster    string
	Account    string
	User       string
	Partition  string
	Parent     string // parent account of an account row
	Fairshare  int64
	QOS        []string
	DefaultQOS string
	GrpTRES    TRESList
	GrpTRESMin TRESList
	MaxTRESJob TRESList
	// MaxJobs is the association's GrpJobs (slurmrestd's max.jobs.per.count):
	// jobs of the association and those below it that may run at once. nil
	// reads as no limit; on a write nil leaves the limit alone and -1 clears it.
	MaxJobs *int64
	// Priority is the association's priority factor (weighted by
	// PriorityWeightAssoc). On a write -1 clears it.
	Priority *int64
	// IsDefault marks a user's default association; on a write, it makes
	// the association the user's default.
	IsDefault bool
}

// AccountSpec creates an account together with its association.
type AccountSpec struct {
	Name         string
	Parent       string // "" means root
	Description  string
	Organization string
	Fairshare    int64
	QOS          []string
	DefaultQOS   string
	GrpTRES      TRESList
}

// User is a slurmdbd user.
type User struct {
	Name           string
	DefaultAccount string
	AdminLevel     string
	Accounts       []string
}

// UserSpec adds a user with associations under one or more accounts.
type UserSpec struct {
	Name           string
	Accounts       []string
	DefaultAccount string
	Fairshare      int64
}

// QOS is a slurmdbd quality of service.
type QOS struct {
	Name           string
	Description    string
	Priority       *int64
	GrpTRES        TRESList
	MaxTRESPerUser TRESList
	MaxTRESPerJob  TRESList
	MaxWall        time.Duration // 0 when unlimited
	Preempt        []string
	// PreemptMode is Slurm's list: "REQUEUE", "CANCEL", "SUSPEND", "GANG";
	// ["DISABLED"] means the cluster's PreemptMode. slurmdbd resets the mode
	// to DISABLED on every write of the QOS that leaves it nil.
	PreemptMode []string
	Flags       []string
}

// TRES is one trackable resource with a count, e.g. gres/gpu=8.
type TRES struct {
	Type  string // "cpu", "mem", "gres", "node", "billing"
	Name  string // "gpu", "gpu:h100" for gres; "" otherwise
	Count int64
}

// Key is the TRES as Slurm names it: "cpu", "gres/gpu", "gres/gpu:h100".
func (t TRES) Key() string {
	if t.Name == "" {
		return t.Type
	}
	return t.Type + "/" + t.Name
}

// TRESList is a list of TRES, printed the way sacctmgr prints it.
type TRESList []TRES

func (l TRESList) String() string {
	parts := make([]string, 0, len(l))
	for _, t := range l {
		parts = append(parts, t.Key()+"="+strconv.FormatInt(t.Count, 10))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Get returns the count of key ("gres/gpu") and whether it is present.
func (l TRESList) Get(key string) (int64, bool) {
	for _, t := range l {
		if t.Key() == key {
			return t.Count, true
		}
	}
	return 0, false
}

// ParseTRES parses "cpu=2,mem=2000M,node=1,gres/gpu=8,gres/gpu:h100=8".
// Memory with a unit suffix (K, M, G, T) is converted to MiB, as Slurm
// counts it.
func ParseTRES(s string) (TRESList, error) {
	if isUnset(s) {
		return nil, nil
	}
	var out TRESList
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("TRES %q: item %q is not key=count", s, item)
		}
		n, err := parseTRESCount(v)
		if err != nil {
			return nil, fmt.Errorf("TRES %q: item %q: %w", s, item, err)
		}
		typ, name, _ := strings.Cut(k, "/")
		out = append(out, TRES{Type: typ, Name: name, Count: n})
	}
	return out, nil
}

func parseTRESCount(v string) (int64, error) {
	mult := int64(1)
	if v != "" {
		switch v[len(v)-1] {
		case 'K', 'k':
			mult, v = -1024, v[:len(v)-1] // KiB to MiB: divide
		case 'M', 'm':
			v = v[:len(v)-1]
		case 'G', 'g':
			mult, v = 1024, v[:len(v)-1]
		case 'T', 't':
			mult, v = 1024*1024, v[:len(v)-1]
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e18 {
		return 0, fmt.Errorf("count %q is not a TRES count", v)
	}
	if mult < 0 {
		return int64(f / 1024), nil
	}
	// The bound holds after the unit too: converting a float beyond int64
	// gives -9223372036854775808 on amd64, which then printed as a count.
	if r := f * float64(mult); math.Abs(r) <= 1e18 {
		return int64(r), nil
	}
	return 0, fmt.Errorf("count %q is too large to be a TRES count", v)
}
