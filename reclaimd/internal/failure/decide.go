package failure

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// Action is what a decision does.
type Action string

// The actions.
const (
	Retry Action = "retry" // requeue the job, its failed nodes excluded when the rule says so
	Hold  Action = "hold"  // requeue it held, with a strata: reason, for a person
	Leave Action = "leave" // do nothing to the job
)

// Past is an earlier failure of the same job, as recorded.
type Past struct {
	Class  Class
	Node   string   // the node at fault, if one was
	Nodes  []string // where the run ran
	Action Action
}

// Decision is what happens after a classified failure.
type Decision struct {
	Action Action `json:"action"`
	// Reason says why, in words for the owner and the admin comment.
	Reason string `json:"reason"`
	// Attempt is this retry's number and Of the retries the class allows.
	Attempt int `json:"attempt,omitempty"`
	Of      int `json:"of,omitempty"`
	// Exclude are the nodes added to the job's ExcNodeList.
	Exclude []string `json:"exclude,omitempty"`
	// Backoff is the wait before the retry may start.
	Backoff time.Duration `json:"backoff,omitempty"`
	// Owner and Admins say who is told.
	Owner  bool `json:"notify_owner,omitempty"`
	Admins bool `json:"notify_admins,omitempty"`
	// Rule is the recovery rule that decided ("" when none matched).
	Rule string `json:"rule,omitempty"`
}

// Job is what Decide knows of the job besides its failure.
type Job struct {
	// Rule is the job's recovery rule; ok false when none matches.
	Rule    reclaimrules.Recovery
	HasRule bool
	// AccountGone: the job's account no longer exists in slurmdbd.
	AccountGone bool
	Account     string
	// Past are the job's earlier failures, oldest first.
	Past []Past
	// ExcludedNodes are the nodes already in its ExcNodeList.
	ExcludedNodes []string
	// RequiredNodes are the nodes it asked for by name (--nodelist): one
	// of them excluded, the job could never start again.
	RequiredNodes []string
	// NotRequeueable: the job ended and was submitted with --no-requeue;
	// Slurm requeues a finished job only when it is requeueable, and a
	// finished job can no longer be updated.
	NotRequeueable bool
	// HetComponent: one component of a heterogeneous job, which Slurm
	// requeues only whole.
	HetComponent bool
}

// Decide decides what happens to a job after a failure. It never retries
// what its owner or an admin cancelled, what reclaimd itself requeued, a
// job without a recovery rule, a job whose account is gone, or a job past
// its retries; a job that failed the same way on SameFailureNodes
// distinct nodes is held and the admins told.
func Decide(res Result, j Job) Decision {
	leave := func(why string) Decision { return Decision{Action: Leave, Reason: why, Rule: j.Rule.Name} }
	switch res.Class {
	case Cancelled:
		return leave("cancelled: never retried")
	case Reclaimed:
		return leave("requeued or cancelled by reclaimd: not a failure")
	}
	if !j.HasRule {
		return leave("no recovery rule matches the job: not retried")
	}
	rule := j.Rule.Retry(string(res.Class))
	d := Decision{Rule: j.Rule.Name, Owner: rule.Tells(reclaimrules.NotifyOwner), Admins: rule.Tells(reclaimrules.NotifyAdmins)}
	retries := *rule.Retries
	if j.AccountGone {
		d.Action, d.Reason = Leave, fmt.Sprintf("account %s no longer exists: not retried", j.Account)
		return d
	}
	if retries > 0 && j.NotRequeueable {
		d.Action, d.Reason = Leave, fmt.Sprintf("%s, but the job was submitted with --no-requeue: not retried", res.Class)
		return d
	}
	if retries > 0 && j.HetComponent {
		d.Action, d.Reason = Leave, fmt.Sprintf("%s in a component of a heterogeneous job, which Slurm requeues only whole: not retried", res.Class)
		return d
	}
	// The same failure on SameFailureNodes distinct nodes: the job, not
	// the nodes, is at fault.
	nodes := map[string]bool{}
	for _, n := range failedNodes(res) {
		nodes[n] = true
	}
	for _, p := range j.Past {
		if p.Class != res.Class {
			continue
		}
		for _, n := range pastNodes(p) {
			nodes[n] = true
		}
	}
	if retries > 0 && len(nodes) >= j.Rule.SameFailureNodes && res.Class != Preempted {
		d.Action, d.Admins = Hold, true
		d.Reason = fmt.Sprintf("failed with %s on %d distinct nodes (%s): held for an admin", res.Class, len(nodes), strings.Join(sorted(nodes), ","))
		return d
	}
	used, total := 0, 0
	for _, p := range j.Past {
		if p.Action != Retry {
			continue
		}
		total++
		if p.Class == res.Class {
			used++
		}
	}
	if retries == 0 {
		d.Action, d.Reason = Leave, fmt.Sprintf("%s is not retried", res.Class)
		return d
	}
	if used >= retries || total >= j.Rule.MaxRetries {
		why := fmt.Sprintf("retries exhausted (%d/%d after %s)", used, retries, res.Class)
		if total >= j.Rule.MaxRetries && used < retries {
			why = fmt.Sprintf("retries exhausted (%d in all, the most the job's rule allows)", total)
		}
		if rule.OnExhausted == reclaimrules.ExhaustedHold {
			d.Action, d.Reason = Hold, why+": "+rule.HoldReason
		} else {
			d.Action, d.Reason = Leave, why+": left failed"
		}
		return d
	}
	d.Action, d.Attempt, d.Of, d.Backoff = Retry, used+1, retries, rule.Backoff.Std()
	d.Reason = fmt.Sprintf("retry %d/%d after %s on %s", d.Attempt, d.Of, res.Class, res.Where())
	if *rule.ExcludeNode {
		ex := slices.Clone(j.ExcludedNodes)
		var kept []string
		for _, n := range failedNodes(res) {
			switch {
			case slices.Contains(j.RequiredNodes, n):
				kept = append(kept, n)
			case !slices.Contains(ex, n):
				ex = append(ex, n)
			}
		}
		if len(ex) > len(j.ExcludedNodes) {
			d.Exclude = ex
		}
		if len(kept) > 0 {
			d.Reason += fmt.Sprintf(" (%s not excluded: the job asks for it by name)", strings.Join(kept, ","))
		}
	}
	return d
}

// failedNodes are the nodes a failure is blamed on: the node at fault
// when one is, else every node the run ran on.
func failedNodes(res Result) []string {
	if res.Evidence.Node != "" {
		return []string{res.Evidence.Node}
	}
	if len(res.Evidence.DownNodes) > 0 {
		return res.Evidence.DownNodes
	}
	return res.Evidence.Nodes
}

func pastNodes(p Past) []string {
	if p.Node != "" {
		return []string{p.Node}
	}
	return p.Nodes
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Mark is the text put in the job's admin comment for a decision, after
// Strata's prefix: "strata: retry 2/3 after gpu_fault on gpu3 GPU 1 (Xid 79)".
func (d Decision) Mark() string {
	return "strata: " + d.Reason
}
