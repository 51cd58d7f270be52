package controller_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// recoveryRules retry NCCL failures once excluding the node, and hold
// when that is used up; the other classes keep their defaults.
const recoveryRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [],
  "recovery": [{"name": "all", "match": {}, "nccl": {"retries": 1, "exclude_node": true, "notify": ["owner", "admins"]}}]}`

const ncclLine = "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600351 milliseconds before timing out."

// newRecoveryBed is a bed whose job 1 (the captured running job) is
// served as ended by edit, its stderr (file job-1.err of the job's user
// beneath the log root) holding stderr.
func newRecoveryBed(t *testing.T, release, stderr string, edit func(job map[string]any)) *bed {
	t.Helper()
	root := t.TempDir()
	path := filepath.Join(root, "job-1.err")
	if err := os.WriteFile(path, []byte(stderr), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBed(t, release, recoveryRules, 100)
	var job map[string]any
	if err := json.Unmarshal(b.job.Response, &job); err != nil {
		t.Fatal(err)
	}
	uid := int(job["jobs"].([]any)[0].(map[string]any)["user_id"].(float64))
	if err := os.Chown(path, uid, uid); err != nil {
		t.Skipf("the stderr file must belong to the job's user %d: %v", uid, err)
	}
	b.recovery = controller.Recovery{LogRoot: root}
	b.ctl = b.newController()
	b.serveJob(func(j map[string]any) {
		j["standard_error"] = "/job-%j.err"
		j["end_time"] = map[string]any{"set": true, "infinite": false, "number": b.start.Add(time.Minute).Unix()}
		edit(j)
	})
	return b
}

// failed makes a job record FAILED with exit code 1, as Slurm shows one.
func failed(j map[string]any) {
	j["job_state"] = []any{"FAILED"}
	j["state_reason"] = "NonZeroExitCode"
	j["exit_code"] = map[string]any{"status": []any{"ERROR"}, "return_code": map[string]any{"set": true, "infinite": false, "number": 1},
		"signal": map[string]any{"id": map[string]any{"set": false, "infinite": false, "number": 0}, "name": ""}}
}

// serveJob serves job 1, changed by edit, to re-reads and in every list.
func (b *bed) serveJob(edit func(job map[string]any)) {
	b.t.Helper()
	b.jobAs(edit)
	list := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(list.Response, &resp); err != nil {
		b.t.Fatal(err)
	}
	for _, j := range resp["jobs"].([]any) {
		if jm := j.(map[string]any); jm["job_id"].(float64) == jobID {
			edit(jm)
		}
	}
	var err error
	if list.Response, err = json.Marshal(resp); err != nil {
		b.t.Fatal(err)
	}
	b.srv.Handle(http.MethodGet, list.Path, slurmresttest.Reply(list))
}

// changes are the requests that change job 1: requeues (REST or
// scontrol) and updates with their bodies.
func (b *bed) changes() []string {
	b.t.Helper()
	var out []string
	for _, r := range b.srv.Requests() {
		switch {
		case r.Method == http.MethodPost && r.Path == b.jobPath():
			var body map[string]any
			_ = json.Unmarshal(r.Body, &body)
			keys := []string{}
			for _, k := range []string{"hold", "excluded_nodes", "admin_comment", "begin_time"} {
				if v, ok := body[k]; ok {
					keys = append(keys, fmt.Sprintf("%s=%v", k, v))
				}
			}
			out = append(out, "update "+strings.Join(keys, " "))
		case r.Path == b.requeuePath():
			out = append(out, "requeue "+r.Query)
		}
	}
	calls, _ := os.ReadFile(b.scontrol)
	for _, c := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		if c != "" {
			out = append(out, "scontrol "+c)
		}
	}
	return out
}

// withRequeue is the changes of a held requeue of job 1 followed by the
// updates: on 24.11 the requeue is scontrol's, listed after the REST
// requests.
func withRequeue(release string, updates ...string) []string {
	if release == "24.11" {
		return append(updates, "scontrol requeuehold 1")
	}
	return append([]string{"requeue Hold=true"}, updates...)
}

func (b *bed) failures() []store.Failure {
	b.t.Helper()
	fs, err := b.st.JobFailures(b.t.Context(), jobID)
	if err != nil {
		b.t.Fatal(err)
	}
	return fs
}

func (b *bed) recoveryNotices() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, n := range b.notices {
		who := "owner"
		if n.Admin {
			who = "admins"
		}
		out = append(out, fmt.Sprintf("%s %s %s", who, n.Action, n.FailureClass))
	}
	return out
}

func TestRecoveryUserErrorNotRetried(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, "Traceback (most recent call last):\nValueError: bad input\n", failed)
			b.mustTick()
			b.mustTick() // classified once
			if got := b.changes(); len(got) != 0 {
				t.Errorf("changes %q, want none: a user error is not retried", got)
			}
			fs := b.failures()
			if len(fs) != 1 || fs[0].Class != "user_error" || fs[0].Action != "leave" {
				t.Fatalf("failures %+v, want one user_error left", fs)
			}
			if diff := cmp.Diff([]string{"owner not-retried user_error"}, b.recoveryNotices()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			b.mu.Lock()
			tail := b.notices[0].StderrTail
			b.mu.Unlock()
			if diff := cmp.Diff([]string{"Traceback (most recent call last):", "ValueError: bad input"}, tail); diff != "" {
				t.Errorf("stderr tail (-want +got):\n%s", diff)
			}
			if n := counter(t, b.metrics.RecoveryFailures.WithLabelValues("research", "user_error")); n != 1 {
				t.Errorf("failures metric %v, want 1", n)
			}
			if n := counter(t, b.metrics.RecoveryRetries.WithLabelValues("user_error", "refused")); n != 1 {
				t.Errorf("retries{refused} %v, want 1", n)
			}
		})
	}
}

func TestRecoveryNCCLRetriedOnceExcludingItsNode(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, "step 100 loss 2.31\n"+ncclLine+"\n", func(j map[string]any) {
				failed(j)
				j["admin_comment"] = "site: keep logs"
			})
			b.mustTick()
			want := withRequeue(release, "update excluded_nodes=[gpu1] admin_comment=site: keep logs | strata: retry 1/1 after nccl on gpu1",
				"update hold=false")
			if diff := cmp.Diff(want, b.changes()); diff != "" {
				t.Errorf("changes (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			if diff := cmp.Diff([]string{"retry:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			fs := b.failures()
			if len(fs) != 1 || fs[0].Class != "nccl" || fs[0].Action != "retry" || fs[0].RecordID == nil {
				t.Fatalf("failures %+v", fs)
			}
			if !strings.Contains(string(fs[0].Evidence), "Watchdog caught collective operation timeout") {
				t.Errorf("evidence %s lacks the log line", fs[0].Evidence)
			}
			if diff := cmp.Diff([]string{"owner retry nccl", "admins retry nccl"}, b.recoveryNotices()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			if n := counter(t, b.metrics.RecoveryRetries.WithLabelValues("nccl", "requeued")); n != 1 {
				t.Errorf("retries{requeued} %v, want 1", n)
			}
			b.mustTick()
			if got := len(b.changes()); got != 3 {
				t.Errorf("%d changes after another cycle, want the 3 of the retry alone", got)
			}

			// The retry runs again on another node: the failure is over.
			b.serveJob(func(j map[string]any) {
				j["job_state"] = []any{"RUNNING"}
				j["start_time"] = map[string]any{"set": true, "infinite": false, "number": b.start.Add(2 * time.Minute).Unix()}
				j["restart_cnt"] = 1
			})
			b.mustTick()
			if fs := b.failures(); fs[0].RunningAgain == nil {
				t.Error("the failure is not marked over when the job runs again")
			}
			var m dto.Metric
			if err := b.metrics.RecoveryTimeToRunning.Write(&m); err != nil || m.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("time to running: %v %v, want one observation", m.GetHistogram(), err)
			}
		})
	}
}

func TestRecoveryExhaustedHeld(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, ncclLine+"\n", failed)
			b.mustTick() // retry 1/1
			// The retry ran (restart 1) and failed the same way on gpu2.
			b.serveJob(func(j map[string]any) {
				failed(j)
				j["standard_error"] = "/job-%j.err"
				j["start_time"] = map[string]any{"set": true, "infinite": false, "number": b.start.Add(2 * time.Minute).Unix()}
				j["end_time"] = map[string]any{"set": true, "infinite": false, "number": b.start.Add(3 * time.Minute).Unix()}
				j["restart_cnt"] = 1
				j["admin_comment"] = "strata: retry 1/1 after nccl on gpu1"
			})
			b.mustTick()
			want := withRequeue(release, "update excluded_nodes=[gpu1] admin_comment=strata: retry 1/1 after nccl on gpu1", "update hold=false")
			want = append(want, "update admin_comment=strata: retries exhausted (1/1 after nccl): held until its owner or an admin releases or cancels it")
			if release == "24.11" {
				want = []string{want[0], want[1], want[3], "scontrol requeuehold 1", "scontrol requeuehold 1"}
			} else {
				want = append(want[:3], "requeue Hold=true", want[3])
			}
			if diff := cmp.Diff(want, b.changes()); diff != "" {
				t.Errorf("changes: a held requeue and its mark, no release (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"retry:done", "retry-hold:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if n := counter(t, b.metrics.RecoveryRetries.WithLabelValues("nccl", "exhausted")); n != 1 {
				t.Errorf("retries{exhausted} %v, want 1", n)
			}
			notices := b.recoveryNotices()
			if len(notices) < 2 || notices[len(notices)-2] != "owner retry-hold nccl" {
				t.Errorf("notices %q, want a hold notice", notices)
			}
		})
	}
}

func TestRecoveryDryRun(t *testing.T) {
	b := newRecoveryBed(t, "26.05", ncclLine+"\n", failed)
	b.rules.DryRun = true
	b.mustTick()
	if got := b.changes(); len(got) != 0 {
		t.Errorf("changes %q in a dry run", got)
	}
	if diff := cmp.Diff([]string{"retry:dry-run"}, b.outcomes(jobID)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if got := b.recoveryNotices(); len(got) != 0 {
		t.Errorf("notices %q in a dry run", got)
	}
}

func TestRecoveryOwnerCancelledNeverRetried(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, ncclLine+"\n", func(j map[string]any) {
				j["job_state"] = []any{"CANCELLED"}
				j["exit_code"] = map[string]any{"status": []any{"SIGNALED"}, "return_code": map[string]any{"set": false, "infinite": false, "number": 0},
					"signal": map[string]any{"id": map[string]any{"set": true, "infinite": false, "number": 15}, "name": "TERM"}}
			})
			b.mustTick()
			if got := b.changes(); len(got) != 0 {
				t.Errorf("changes %q, want none", got)
			}
			if fs := b.failures(); len(fs) != 1 || fs[0].Class != "cancelled" || fs[0].Action != "leave" {
				t.Errorf("failures %+v, want one cancelled, left", fs)
			}
			if got := b.recoveryNotices(); len(got) != 0 {
				t.Errorf("notices %q: an owner who cancelled is not told", got)
			}
		})
	}
}

// A crash between the retry's intent and its requeue: after the restart
// the retry is made once, and the run is not classified again.
func TestRecoveryCrashBeforeRequeueSettledOnce(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, ncclLine+"\n", failed)
			b.crashIntent(0)
			b.restart()
			if err := b.ctl.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := withRequeue(release, "update excluded_nodes=[gpu1] admin_comment=strata: retry 1/1 after nccl on gpu1",
				"update hold=false")
			if diff := cmp.Diff(want, b.changes()); diff != "" {
				t.Errorf("changes (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			if b.pending() != 0 {
				t.Error("the intent is still open")
			}
			b.mustTick()
			if err := b.ctl.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, b.changes()); diff != "" {
				t.Errorf("after a cycle and a second Recover (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"retry:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if fs := b.failures(); len(fs) != 1 || fs[0].RecordID == nil {
				t.Errorf("failures %+v, want the one, naming its record", fs)
			}
		})
	}
}

// A crash after the requeue, before the outcome was recorded: the job is
// found requeued and held; it is marked and released, not requeued again.
func TestRecoveryCrashAfterRequeueSettledOnce(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, ncclLine+"\n", failed)
			b.crashIntent(0)
			b.serveJob(func(j map[string]any) {
				j["job_state"] = []any{"PENDING"}
				j["state_reason"] = "job_requeued_in_held_state"
				j["restart_cnt"] = 1
				j["hold"] = true
			})
			b.restart()
			if err := b.ctl.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := []string{"update hold=true", "update excluded_nodes=[gpu1] admin_comment=strata: retry 1/1 after nccl on gpu1",
				"update hold=false"}
			if diff := cmp.Diff(want, b.changes()); diff != "" {
				t.Errorf("changes (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			if diff := cmp.Diff([]string{"retry:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

// crashIntent leaves the open intent of the NCCL retry of job 1's run, as
// a crash right after it was written does (restarts: the run's count).
func (b *bed) crashIntent(restarts int) {
	b.t.Helper()
	ev := fmt.Sprintf(`{"failure": {"class": "nccl", "evidence": {"state": "FAILED", "exit_code": 1, "nodes": ["gpu1"], "log_line": %q}},
	  "decision": {"action": "retry", "reason": "retry 1/1 after nccl on gpu1", "attempt": 1, "of": 1, "exclude": ["gpu1"], "rule": "all"},
	  "run_start": %q, "restarts": %d, "failed_at": %q}`, ncclLine, b.start.UTC().Format(time.RFC3339), restarts,
		b.start.Add(time.Minute).UTC().Format(time.RFC3339))
	if _, err := b.st.Intent(b.t.Context(), store.Record{JobID: jobID, Tenant: "research", Account: "testbed", User: "alice",
		Kind: controller.KindRetry, Rule: "all", Reason: "retry 1/1 after nccl on gpu1", Evidence: json.RawMessage(ev), DecidedAt: b.clock()}); err != nil {
		b.t.Fatal(err)
	}
}

func TestRecoveryAPI(t *testing.T) {
	b := newRecoveryBed(t, "26.05", ncclLine+"\n", failed)
	b.mustTick()
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Hour)))
	t.Cleanup(srv.Close)
	get := func(path string, want int) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %d %v, want %d", path, resp.StatusCode, out, want)
		}
		return out
	}
	att := get("/v1/jobs/1/attempts", http.StatusOK)
	list := att["attempts"].([]any)
	if len(list) != 1 {
		t.Fatalf("attempts %v", att)
	}
	a := list[0].(map[string]any)
	if a["class"] != "nccl" || a["action"] != "retry" || a["record"].(map[string]any)["outcome"] != "done" {
		t.Errorf("attempt %v", a)
	}
	get("/v1/jobs/2/attempts", http.StatusNotFound)
	get("/v1/jobs/x/attempts", http.StatusBadRequest)
	f := get("/v1/failures?since="+b.start.Add(-time.Hour).UTC().Format(time.RFC3339), http.StatusOK)
	if n := len(f["failures"].([]any)); n != 1 {
		t.Errorf("failures %v", f)
	}
	f = get("/v1/failures?since="+b.clock().Add(time.Hour).UTC().Format(time.RFC3339), http.StatusOK)
	if n := len(f["failures"].([]any)); n != 0 {
		t.Errorf("failures since later: %v", f)
	}
	get("/v1/failures?since=yesterday", http.StatusBadRequest)
}

// A node goes down under a requeueable job: Slurm requeues it itself (the
// record, pending, shows its next start and no nodes); reclaimd, which
// saw the run on gpu1, classes it node_fail, holds it, excludes gpu1 and
// releases it.
func TestRecoveryNodeFailRequeuedBySlurm(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			b := newRecoveryBed(t, release, "", func(map[string]any) {}) // running, as captured
			b.mustTick()                                                 // the run is seen on gpu1
			b.serveJob(func(j map[string]any) {
				j["job_state"] = []any{"PENDING"}
				j["state_reason"] = "BeginTime"
				j["restart_cnt"] = 1
				j["nodes"] = ""
				j["gres_detail"] = []any{}
				j["start_time"] = map[string]any{"set": true, "infinite": false, "number": b.clock().Add(10 * time.Second).Unix()}
			})
			nodes := b.record("nodes")
			var resp map[string]any
			if err := json.Unmarshal(nodes.Response, &resp); err != nil {
				t.Fatal(err)
			}
			for _, n := range resp["nodes"].([]any) {
				if n.(map[string]any)["name"] == jobNode {
					n.(map[string]any)["state"] = []any{"DOWN", "NOT_RESPONDING"}
				}
			}
			nodes.Response, _ = json.Marshal(resp)
			b.srv.Handle(http.MethodGet, nodes.Path, slurmresttest.Reply(nodes))
			b.mustTick()
			want := []string{"update hold=true", "update excluded_nodes=[gpu1] admin_comment=strata: retry 1/2 after node_fail on gpu1",
				"update hold=false"}
			if diff := cmp.Diff(want, b.changes()); diff != "" {
				t.Errorf("changes (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			fs := b.failures()
			if len(fs) != 1 || fs[0].Class != "node_fail" || !fs[0].Start.Equal(b.start.UTC().Truncate(time.Second)) {
				t.Fatalf("failures %+v, want one node_fail of the run seen", fs)
			}
		})
	}
}

// Slurm requeued the job and it runs again before a cycle saw it wait:
// the node_fail is recorded, and nothing is done to the running job.
func TestRecoveryNodeFailRunningAgainUnseen(t *testing.T) {
	b := newRecoveryBed(t, "26.05", "", func(map[string]any) {})
	b.mustTick()
	b.serveJob(func(j map[string]any) {
		j["restart_cnt"] = 1
		j["start_time"] = map[string]any{"set": true, "infinite": false, "number": b.clock().Unix()}
	})
	nodes := b.record("nodes")
	nodes.Response = []byte(strings.Replace(string(nodes.Response), `"MIXED"`, `"DOWN"`, 1))
	b.srv.Handle(http.MethodGet, nodes.Path, slurmresttest.Reply(nodes))
	b.mustTick()
	if got := b.changes(); len(got) != 0 {
		t.Errorf("changes %q to a running job", got)
	}
	fs := b.failures()
	if len(fs) != 1 || fs[0].Class != "node_fail" || fs[0].Action != "leave" || !strings.HasPrefix(fs[0].Reason, "requeued by Slurm after node_fail on gpu1") {
		t.Fatalf("failures %+v", fs)
	}
	if n := counter(t, b.metrics.RecoveryRetries.WithLabelValues("node_fail", "requeued")); n != 1 {
		t.Errorf("retries{requeued} %v, want 1", n)
	}
}
