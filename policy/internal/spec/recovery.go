package spec

import (
	"errors"
	"reflect"
	"strings"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// A class's recovery block is reclaimrules.Recovery as written in the
// policy: strata-policy fills its name and match (the class), so they
// must be absent, as in a reclaim rule.
var (
	recoveryType = reflect.TypeFor[reclaimrules.Recovery]()
	retryType    = reflect.TypeFor[reclaimrules.Retry]()
)

var recoveryForbidden = map[string]string{
	"name":  "remove name: strata-policy names the recovery rule after its class",
	"match": "remove match: a class's recovery rule applies to the jobs of the class",
}

func init() {
	decodeOptions.Forbidden[recoveryType] = recoveryForbidden
	nouns[recoveryType] = "a recovery block"
	nouns[retryType] = "a failure class's retry"
	defNames[recoveryType] = "Recovery"
	defNames[retryType] = "Retry"
	constraints["Retry.on_exhausted"] = map[string]any{"enum": []string{"hold", "leave"}}
	constraints["Retry.notify"] = map[string]any{"enum": []string{reclaimrules.NotifyOwner, reclaimrules.NotifyAdmins}}
	constraints["Retry.retries"] = map[string]any{"minimum": 0}
	constraints["Recovery.max_retries"] = map[string]any{"minimum": 0}
	constraints["Recovery.same_failure_nodes"] = map[string]any{"minimum": 0}
	for k, v := range recoveryDescriptions {
		descriptions[k] = v
	}
}

var recoveryDescriptions = map[string]string{
	"Class.recovery":              "How reclaimd retries the jobs of this class that fail: for each failure class, retries, backoff, exclude_node, on_exhausted, notify. Cancelled jobs and reclaimd's own requeues are never retried.",
	"Recovery":                    "Retry policy of a class's failed jobs, by failure class; a failure class left out gets its default (node_fail and gpu_fault: 2 retries excluding the node; nccl: 1 after 1m excluding the nodes; oom, timeout, preempted, user_error: none).",
	"Recovery.max_retries":        "Most retries of a job for every failure class together (default 3).",
	"Recovery.same_failure_nodes": "A job that failed the same way on this many distinct nodes is held and the admins told (default 3; at least 2).",
	"Recovery.node_fail":          "A node went down under the job (NODE_FAIL).",
	"Recovery.gpu_fault":          "An Xid or uncorrectable ECC error on one of the job's GPUs during the run.",
	"Recovery.oom":                "The job ran out of memory (OUT_OF_MEMORY); not retried by default.",
	"Recovery.timeout":            "The job reached its time limit; not retried by default.",
	"Recovery.preempted":          "The job was preempted; not retried by default (Slurm requeues under preempt_mode requeue).",
	"Recovery.nccl":               "The job's stderr ends with an NCCL or CUDA communication error (watchdog timeout, NCCL error, unhandled cuda error).",
	"Recovery.user_error":         "The job exited non-zero for none of the reasons above; not retried by default.",
	"Retry":                       "What a failure class gets.",
	"Retry.retries":               "Times a job that failed so is requeued (0: never).",
	"Retry.backoff":               "Wait before the retry may start (at most 1d).",
	"Retry.exclude_node":          "Add the failed node(s) to the job's ExcNodeList before it runs again.",
	"Retry.on_exhausted":          "When the retries are used up: hold (requeue it held with a strata: reason, the default when retries > 0) or leave (leave it failed).",
	"Retry.hold_reason":           "Reason said in the held job's admin comment and the notice (on_exhausted: hold only).",
	"Retry.notify":                "Who is told of a retry, a hold or a failure left alone: owner, admins (default: owner).",
}

// recoveryHints say what to do about the recovery problems reclaimrules
// finds, by the last key of their path.
var recoveryHints = map[string]string{
	"retries":            "give 0 to 3 retries, no more than max_retries",
	"backoff":            "give a time such as 1m, or remove backoff",
	"exclude_node":       "give retries, or remove exclude_node",
	"on_exhausted":       "use hold or leave",
	"hold_reason":        "set on_exhausted: hold, or remove hold_reason; keep it to one short line",
	"notify":             "list owner, admins or both",
	"max_retries":        "give a count, or leave it out for 3",
	"same_failure_nodes": "give 2 or more, or leave it out for 3",
}

// recovery checks a class's recovery block with reclaimrules' own
// validation and maps its problems to the policy's paths; a class whose
// jobs are not requeueable is never retried.
func (v *validator) recovery(path string, c *Class) {
	r := c.Recovery
	if r == nil {
		return
	}
	if r.Name != "" {
		v.add(path+".name", recoveryForbidden["name"], "name is not allowed in a recovery block")
	}
	if !matchEmpty(r.Match) {
		v.add(path+".match", recoveryForbidden["match"], "match is not allowed in a recovery block")
	}
	rec := *r
	rec.Name, rec.Match = "class", reclaimrules.Match{}
	if reclaimNameRE.MatchString(c.Name) {
		rec.Name = c.Name
	}
	doc := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind, Recovery: []reclaimrules.Recovery{rec}}
	for _, err := range doc.Validate() {
		var fe *reclaimrules.FieldError
		if !errors.As(err, &fe) {
			v.add(path, "fix the recovery block", "recovery: %v", err)
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(fe.Path, "recovery[0]"), ".")
		key := rel
		if i := strings.LastIndexByte(key, '.'); i >= 0 {
			key = key[i+1:]
		}
		if i := strings.IndexByte(key, '['); i >= 0 {
			key = key[:i]
		}
		hint := recoveryHints[key]
		if hint == "" {
			hint = "see the recovery blocks of etc/strata/policy.yaml"
		}
		v.add(strictyaml.Join(path, rel), hint, "%s: %s", strictyaml.Join("recovery", rel), fe.Msg)
	}
	if !c.Requeueable() {
		for _, class := range reclaimrules.FailureClasses {
			if rec.Retry(class).Retries != nil && *rec.Retry(class).Retries > 0 {
				v.add(path, "set requeue: true on the class, or give every failure class retries: 0",
					"recovery retries %s, but jobs of class %q are not requeueable: a retry is a requeue", class, c.Name)
				return
			}
		}
	}
}
