package failure_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
)

func TestDecide(t *testing.T) {
	gpu := 3
	xid := failure.Result{Class: failure.GPUFault, Evidence: failure.Evidence{State: "FAILED", Nodes: []string{"gpu2", "gpu3"},
		Node: "gpu3", GPU: &gpu, Xid: 79}}
	ncclFail := failure.Result{Class: failure.NCCL, Evidence: failure.Evidence{State: "FAILED", ExitCode: 1, Nodes: []string{"gpu1"}}}
	userErr := failure.Result{Class: failure.UserError, Evidence: failure.Evidence{State: "FAILED", ExitCode: 1, Nodes: []string{"gpu1"}}}
	three := 3
	rule := reclaimrules.Recovery{Name: "train", GPUFault: &reclaimrules.Retry{Retries: &three, Notify: []string{"owner", "admins"}}}
	retryGPU := func(node string) failure.Past {
		return failure.Past{Class: failure.GPUFault, Node: node, Action: failure.Retry}
	}
	tests := map[string]struct {
		res  failure.Result
		job  failure.Job
		want failure.Decision
	}{
		"first gpu fault: retry 1/3 excluding the node": {
			res: xid, job: failure.Job{Rule: rule, HasRule: true, ExcludedNodes: []string{"gpu9"}},
			want: failure.Decision{Action: failure.Retry, Reason: "retry 1/3 after gpu_fault on gpu3 (Xid 79)", Attempt: 1, Of: 3,
				Exclude: []string{"gpu9", "gpu3"}, Owner: true, Admins: true, Rule: "train"},
		},
		"second gpu fault: retry 2/3": {
			res: xid, job: failure.Job{Rule: rule, HasRule: true, Past: []failure.Past{retryGPU("gpu5")}},
			want: failure.Decision{Action: failure.Retry, Reason: "retry 2/3 after gpu_fault on gpu3 (Xid 79)", Attempt: 2, Of: 3,
				Exclude: []string{"gpu3"}, Owner: true, Admins: true, Rule: "train"},
		},
		"the same failure on three distinct nodes: held for an admin": {
			res: xid, job: failure.Job{Rule: rule, HasRule: true, Past: []failure.Past{retryGPU("gpu5"), retryGPU("gpu6")}},
			want: failure.Decision{Action: failure.Hold, Reason: "failed with gpu_fault on 3 distinct nodes (gpu3,gpu5,gpu6): held for an admin",
				Owner: true, Admins: true, Rule: "train"},
		},
		"retries exhausted on the same node: held with the class's reason": {
			res: xid, job: failure.Job{Rule: rule, HasRule: true, Past: []failure.Past{retryGPU("gpu3"), retryGPU("gpu3"), retryGPU("gpu3")}},
			want: failure.Decision{Action: failure.Hold, Reason: "retries exhausted (3/3 after gpu_fault): held until its owner or an admin releases or cancels it",
				Owner: true, Admins: true, Rule: "train"},
		},
		"nccl by default: once, excluding its nodes, after a minute": {
			res: ncclFail, job: failure.Job{Rule: rule, HasRule: true},
			want: failure.Decision{Action: failure.Retry, Reason: "retry 1/1 after nccl on gpu1", Attempt: 1, Of: 1,
				Exclude: []string{"gpu1"}, Backoff: time.Minute, Owner: true, Rule: "train"},
		},
		"nccl a second time: held": {
			res: ncclFail, job: failure.Job{Rule: rule, HasRule: true, Past: []failure.Past{{Class: failure.NCCL, Nodes: []string{"gpu1"}, Action: failure.Retry}}},
			want: failure.Decision{Action: failure.Hold, Reason: "retries exhausted (1/1 after nccl): held until its owner or an admin releases or cancels it", Owner: true, Rule: "train"},
		},
		"user error: never retried by default": {
			res: userErr, job: failure.Job{Rule: rule, HasRule: true},
			want: failure.Decision{Action: failure.Leave, Reason: "user_error is not retried", Owner: true, Rule: "train"},
		},
		"owner cancelled: never retried": {
			res: failure.Result{Class: failure.Cancelled}, job: failure.Job{Rule: rule, HasRule: true},
			want: failure.Decision{Action: failure.Leave, Reason: "cancelled: never retried", Rule: "train"},
		},
		"reclaimed: not a failure": {
			res: failure.Result{Class: failure.Reclaimed}, job: failure.Job{Rule: rule, HasRule: true},
			want: failure.Decision{Action: failure.Leave, Reason: "requeued or cancelled by reclaimd: not a failure", Rule: "train"},
		},
		"account gone": {
			res: xid, job: failure.Job{Rule: rule, HasRule: true, AccountGone: true, Account: "llm"},
			want: failure.Decision{Action: failure.Leave, Reason: "account llm no longer exists: not retried", Owner: true, Admins: true, Rule: "train"},
		},
		"a node the job asks for by name is not excluded": {
			res: ncclFail, job: failure.Job{Rule: rule, HasRule: true, RequiredNodes: []string{"gpu1"}},
			want: failure.Decision{Action: failure.Retry, Reason: "retry 1/1 after nccl on gpu1 (gpu1 not excluded: the job asks for it by name)",
				Attempt: 1, Of: 1, Backoff: time.Minute, Owner: true, Rule: "train"},
		},
		"--no-requeue job that ended": {
			res: xid, job: failure.Job{Rule: rule, HasRule: true, NotRequeueable: true},
			want: failure.Decision{Action: failure.Leave, Reason: "gpu_fault, but the job was submitted with --no-requeue: not retried",
				Owner: true, Admins: true, Rule: "train"},
		},
		"no rule": {
			res: xid, job: failure.Job{},
			want: failure.Decision{Action: failure.Leave, Reason: "no recovery rule matches the job: not retried"},
		},
		"over the job's budget for all classes": {
			res: ncclFail, job: failure.Job{Rule: reclaimrules.Recovery{Name: "train", MaxRetries: 2}, HasRule: true,
				Past: []failure.Past{retryGPU("gpu5"), retryGPU("gpu6")}},
			want: failure.Decision{Action: failure.Hold, Reason: "retries exhausted (2 in all, the most the job's rule allows): held until its owner or an admin releases or cancels it",
				Owner: true, Rule: "train"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := tc.job
			if j.HasRule {
				r, _ := reclaimrules.Rules{Recovery: []reclaimrules.Recovery{j.Rule}}.RecoveryFor(reclaimrules.JobInfo{})
				j.Rule = r
			}
			got := failure.Decide(tc.res, j)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
