package reclaimrules

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Recovery is the retry policy of one set of jobs (strata-policy renders
// one per workload class with a recovery block, named after the class
// and matching it): for each failure class, whether and how a job that
// failed so is retried. A retry is a requeue of the same job (Slurm keeps
// its id and history), its failed nodes excluded when the class says so.
// Cancelled jobs and reclaimd's own requeues are never retried; a class
// left out here gets its default (see [DefaultRetry]).
type Recovery struct {
	// Name identifies the rule in records, like a reclaim rule's.
	Name  string `json:"name" yaml:"name"`
	Match Match  `json:"match" yaml:"match"`
	// MaxRetries caps a job's retries for every failure class together
	// (0: DefaultMaxRetries).
	MaxRetries int `json:"max_retries" yaml:"max_retries"`
	// SameFailureNodes: a job that failed the same way on this many
	// distinct nodes is held and the admins told, whatever its retries
	// left: the fault travels with the job (0: DefaultSameFailureNodes).
	SameFailureNodes int `json:"same_failure_nodes" yaml:"same_failure_nodes"`

	NodeFail  *Retry `json:"node_fail,omitempty" yaml:"node_fail,omitempty"`
	GPUFault  *Retry `json:"gpu_fault,omitempty" yaml:"gpu_fault,omitempty"`
	OOM       *Retry `json:"oom,omitempty" yaml:"oom,omitempty"`
	Timeout   *Retry `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	Preempted *Retry `json:"preempted,omitempty" yaml:"preempted,omitempty"`
	NCCL      *Retry `json:"nccl,omitempty" yaml:"nccl,omitempty"`
	UserError *Retry `json:"user_error,omitempty" yaml:"user_error,omitempty"`
}

// Retry is what a failure class gets.
type Retry struct {
	// Retries is how many times a job that failed so is requeued (nil:
	// the class's default; 0: never).
	Retries *int `json:"retries,omitempty" yaml:"retries,omitempty"`
	// Backoff is the wait before the retry may start (its begin time).
	Backoff Duration `json:"backoff" yaml:"backoff"`
	// ExcludeNode adds the node(s) the failed run ran on (for gpu_fault
	// and node_fail: the node at fault) to the job's ExcNodeList before
	// it runs again (nil: the class's default).
	ExcludeNode *bool `json:"exclude_node,omitempty" yaml:"exclude_node,omitempty"`
	// OnExhausted is what happens when the retries are used up ("": hold
	// when Retries > 0, leave otherwise).
	OnExhausted Exhausted `json:"on_exhausted,omitempty" yaml:"on_exhausted,omitempty"`
	// HoldReason is said in the held job's admin comment and the notice
	// (after "strata: "); only with on_exhausted: hold.
	HoldReason string `json:"hold_reason,omitempty" yaml:"hold_reason,omitempty"`
	// Notify lists who is told of a retry, a hold or a failure left
	// alone: owner, admins (nil: owner).
	Notify []string `json:"notify,omitempty" yaml:"notify,omitempty"`
}

// Exhausted is what happens to a job whose retries are used up.
type Exhausted string

// The values of Retry.OnExhausted.
const (
	ExhaustedHold  Exhausted = "hold"  // requeue it held, with a strata: reason, for a person to release or cancel
	ExhaustedLeave Exhausted = "leave" // leave it failed
)

// Who a notice goes to.
const (
	NotifyOwner  = "owner"
	NotifyAdmins = "admins"
)

// Recovery defaults.
const (
	DefaultMaxRetries       = 3
	DefaultSameFailureNodes = 3
)

// FailureClasses are the failure classes a Recovery names, in document
// order.
var FailureClasses = []string{"node_fail", "gpu_fault", "oom", "timeout", "preempted", "nccl", "user_error"}

// DefaultRetry is what a failure class gets when a Recovery leaves it
// out, field by field: a node or GPU that failed is the cluster's fault
// (retried twice elsewhere); an NCCL error once elsewhere; the job's own
// faults (user_error, oom) and timeouts are not retried, since the same
// job fails the same way; preemption is Slurm's to requeue.
func DefaultRetry(class string) Retry {
	r := func(n int, exclude bool, backoff time.Duration) Retry {
		return Retry{Retries: &n, ExcludeNode: &exclude, Backoff: Duration(backoff)}
	}
	switch class {
	case "node_fail", "gpu_fault":
		return r(2, true, 0)
	case "nccl":
		return r(1, true, time.Minute)
	}
	return r(0, false, 0)
}

// RecoveryFor returns the recovery rule for a job: the first whose Match matches.
func (r Rules) RecoveryFor(j JobInfo) (Recovery, bool) {
	for _, rec := range r.Recovery {
		if rec.Match.Matches(j) {
			return rec.withDefaults(), true
		}
	}
	return Recovery{}, false
}

func (r Recovery) withDefaults() Recovery {
	if r.MaxRetries == 0 {
		r.MaxRetries = DefaultMaxRetries
	}
	if r.SameFailureNodes == 0 {
		r.SameFailureNodes = DefaultSameFailureNodes
	}
	return r
}

// retryField returns the Retry of a failure class as written (nil: left
// out), and false for a name that is not one.
func (r Recovery) retryField(class string) (*Retry, bool) {
	switch class {
	case "node_fail":
		return r.NodeFail, true
	case "gpu_fault":
		return r.GPUFault, true
	case "oom":
		return r.OOM, true
	case "timeout":
		return r.Timeout, true
	case "preempted":
		return r.Preempted, true
	case "nccl":
		return r.NCCL, true
	case "user_error":
		return r.UserError, true
	}
	return nil, false
}

// Retry returns what a failure class gets under r, defaults filled; a
// class that is never retried (cancelled, reclaimed, or unknown) gets
// zero retries.
func (r Recovery) Retry(class string) Retry {
	got, _ := r.retryField(class)
	d := DefaultRetry(class)
	if got == nil {
		got = &Retry{}
	}
	out := *got
	if out.Retries == nil {
		out.Retries = d.Retries
	}
	if out.ExcludeNode == nil {
		out.ExcludeNode = d.ExcludeNode
	}
	if got.Backoff == 0 && got.Retries == nil {
		out.Backoff = d.Backoff
	}
	if out.OnExhausted == "" {
		out.OnExhausted = ExhaustedLeave
		if *out.Retries > 0 {
			out.OnExhausted = ExhaustedHold
		}
	}
	if out.OnExhausted == ExhaustedHold && out.HoldReason == "" {
		out.HoldReason = "held until its owner or an admin releases or cancels it"
	}
	if out.Notify == nil {
		out.Notify = []string{NotifyOwner}
	}
	return out
}

// Tells reports whether who is among the notice's audience.
func (r Retry) Tells(who string) bool { return slices.Contains(r.Notify, who) }

// MaxBackoff is the longest backoff a retry may wait: longer, and the
// job's place in the queue says more than the wait.
const MaxBackoff = 24 * time.Hour

// recovery checks the recovery rules: names, matches, and the
// combinations that cannot work.
func (v *validator) recovery(list []Recovery) {
	names := map[string]int{}
	for i, rec := range list {
		p := fmt.Sprintf("recovery[%d]", i)
		switch {
		case rec.Name == "":
			v.bad(p+".name", "required: the name appears in records and logs")
		case !validName(rec.Name):
			v.bad(p+".name", "%q: use letters, digits, '.', '_' and '-' only", rec.Name)
		}
		if j, dup := names[rec.Name]; dup && rec.Name != "" {
			v.bad(p+".name", "%q is the name of recovery[%d] too: names must be unique", rec.Name, j)
		} else {
			names[rec.Name] = i
		}
		v.names(p+".match.tenants", rec.Match.Tenants)
		v.names(p+".match.accounts", rec.Match.Accounts)
		v.names(p+".match.users", rec.Match.Users)
		v.names(p+".match.classes", rec.Match.Classes)
		v.names(p+".match.qos", rec.Match.QOS)
		v.names(p+".match.partitions", rec.Match.Partitions)
		for j := range i {
			if covers(list[j].Match, rec.Match) {
				v.bad(p, "never applies: every job it matches is matched first by recovery[%d] (%q)", j, list[j].Name)
				break
			}
		}
		v.nonNegative(p+".max_retries", rec.MaxRetries)
		switch n := rec.SameFailureNodes; {
		case n < 0:
			v.nonNegative(p+".same_failure_nodes", n)
		case n == 1:
			v.bad(p+".same_failure_nodes", "1 would hold every job at its first failure: give 2 or more (0 or absent: %d)", DefaultSameFailureNodes)
		}
		maxRetries := rec.MaxRetries
		if maxRetries == 0 {
			maxRetries = DefaultMaxRetries
		}
		for _, class := range FailureClasses {
			r, _ := rec.retryField(class)
			if r != nil {
				v.retry(p+"."+class, class, *r, maxRetries)
			}
		}
	}
}

func (v *validator) retry(p, class string, r Retry, maxRetries int) {
	retries := 0
	if r.Retries != nil {
		retries = *r.Retries
		if retries < 0 {
			v.bad(p+".retries", "%d: must not be negative", retries)
		} else if retries > maxRetries {
			v.bad(p+".retries", "%d is more than max_retries %d: the job would be held first", retries, maxRetries)
		}
	} else if d := DefaultRetry(class); d.Retries != nil {
		retries = *d.Retries
	}
	switch b := r.Backoff.Std(); {
	case b < 0:
		v.bad(p+".backoff", "%s: must not be negative", b)
	case b > MaxBackoff:
		v.bad(p+".backoff", "%s: want at most %s", b, MaxBackoff)
	case b > 0 && retries == 0:
		v.bad(p+".backoff", "set, but %s is never retried: give retries, or remove backoff", class)
	}
	if r.ExcludeNode != nil && *r.ExcludeNode && retries == 0 {
		v.bad(p+".exclude_node", "true, but %s is never retried: give retries, or remove exclude_node", class)
	}
	switch r.OnExhausted {
	case "", ExhaustedLeave:
		held := r.OnExhausted == "" && retries > 0 // the default: hold
		if r.HoldReason != "" && !held {
			v.bad(p+".hold_reason", "set, but the job is not held: set on_exhausted: hold, or remove hold_reason")
		}
	case ExhaustedHold:
		if retries == 0 {
			v.bad(p+".on_exhausted", "hold, but %s is never retried: a job that failed so would be held at once; give retries, or use leave", class)
		}
	default:
		v.bad(p+".on_exhausted", "%q: want %s or %s", r.OnExhausted, ExhaustedHold, ExhaustedLeave)
	}
	if strings.ContainsAny(r.HoldReason, "\n\r") {
		v.bad(p+".hold_reason", "must be one line")
	}
	if len(r.HoldReason) > 200 {
		v.bad(p+".hold_reason", "%d characters: want at most 200 (it goes into the job's admin comment)", len(r.HoldReason))
	}
	seen := map[string]bool{}
	for i, who := range r.Notify {
		switch {
		case who != NotifyOwner && who != NotifyAdmins:
			v.bad(fmt.Sprintf("%s.notify[%d]", p, i), "%q: want %s or %s", who, NotifyOwner, NotifyAdmins)
		case seen[who]:
			v.bad(fmt.Sprintf("%s.notify[%d]", p, i), "%q is listed twice", who)
		}
		seen[who] = true
	}
}
