package jobpolicy_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

func small(t testing.TB) *jobpolicy.Policy {
	t.Helper()
	p, err := jobpolicy.Load("testdata/small.good.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	good, err := os.ReadFile("testdata/small.good.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		in       string
		wantErrs []string
	}{
		"good": {in: string(good)},
		"every problem at once": {
			in: `{"apiVersion": "strata/v2", "kind": "Policy", "source": "", "cluster": "", "default_class": "x", "classes_line": 1,
"classes": {"a": {"partition": "p", "default_time": "4h"}}, "partitions": {"p": "b"},
"accounts": {"t-p": {"tenant": "t", "project": "p", "line": 1, "classes": ["a", "a"], "classes_line": 1, "gpus": {"limit": -1, "owner": "o", "line": 1},
 "gpus_by_type": {}, "members": ["u", "u"], "viewers": {}, "extra": 1}}, "users": {"u": "t-q"}}`,
			wantErrs: []string{
				`2:53: classes.a.default_time: want a whole number, got "4h"`,
				`4:60: accounts.t-p.extra: unknown field; the fields here are tenant, project, line, classes, classes_line, gpus, gpus_by_type, members, viewers, images, images_line`,
			},
		},
		"validation": {
			in: `{"apiVersion": "strata/v2", "kind": "Policy", "source": "", "cluster": "", "default_class": "x", "classes_line": 1,
"classes": {}, "partitions": {"p": "b"},
"accounts": {"t-p": {"tenant": "t", "project": "p", "line": 1, "classes": ["a", "a"], "classes_line": 1, "gpus": {"limit": -1, "owner": "o", "line": 1},
 "gpus_by_type": {}, "members": ["u", "u"], "viewers": {}}}, "users": {"u": "t-q"}}`,
			wantErrs: []string{
				`1:16: apiVersion: "strata/v2" is not supported: use strata/v1`,
				`1:37: kind: "Policy": want JobPolicy`,
				`1:72: cluster: required: the Slurm ClusterName the policy is of`,
				`1:57: source: required: the policy file's name, for messages`,
				`1:93: default_class: "x" is not a class`,
				`2:36: partitions.p: "b" is not a class`,
				`3:81: accounts.t-p.classes[1]: "a" is listed twice`,
				`4:39: accounts.t-p.members[1]: "u" is listed twice`,
				`3:124: accounts.t-p.gpus.limit: -1 is negative`,
				`4:77: users.u: "t-q" is not an account of the policy`,
			},
		},
		"empty": {in: "", wantErrs: []string{`1:1: empty document: want a JSON object with "apiVersion": "strata/v1" and "kind": "JobPolicy"`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := jobpolicy.Parse([]byte(tc.in))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s\ngot:\n%s", diff, strings.Join(got, "\n"))
			}
		})
	}
	if _, err := jobpolicy.Load("testdata/none.json"); err == nil || !strings.Contains(err.Error(), "strata-policy render writes it") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestMarshal: what Marshal writes, Parse reads back to the same policy.
func TestMarshal(t *testing.T) {
	p := small(t)
	out, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := jobpolicy.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff(p, again); diff != "" {
		t.Errorf("(-first +again):\n%s", diff)
	}
}

// TestDecide covers each rule once on the small policy; the cross-test in
// slurm-plugins holds the whole check to job_submit.lua's.
func TestDecide(t *testing.T) {
	p := small(t)
	yes := true
	type want struct {
		code, msg string
		class     string
		applied   string
	}
	for name, tc := range map[string]struct {
		user string
		job  jobpolicy.Job
		want want
	}{
		"defaults": {"alice", jobpolicy.Job{}, want{class: "batch", applied: "account=acme-llm partition=gpu qos=batch time_limit=240 requeue=1"}},
		"train on two whole nodes": {"alice", jobpolicy.Job{Comment: "strata:class=train", MinNodes: 2, MaxNodes: 2, Exclusive: true, TRESPerNode: "gres/gpu:4"},
			want{class: "train", applied: "account=acme-llm partition=gpu qos=train time_limit=1440 requeue=1 switches=1"}},
		"requeue given":      {"alice", jobpolicy.Job{Partition: "interactive", Requeue: &yes}, want{class: "interactive", applied: "account=acme-llm qos=interactive time_limit=120"}},
		"outside the policy": {"zed", jobpolicy.Job{DefaultAccount: "other"}, want{}},
		"viewer": {"dave", jobpolicy.Job{Account: "acme-llm"},
			want{code: "ESLURM_INVALID_ACCOUNT", msg: "strata: user dave is not a member of account acme-llm: a viewer cannot submit jobs (policy.yaml:55)", class: "batch"}},
		"not a member": {"carol", jobpolicy.Job{Account: "acme-llm"},
			want{code: "ESLURM_INVALID_ACCOUNT", msg: "strata: user carol is not a member of account acme-llm (policy.yaml:50)", class: "batch"}},
		"unknown class": {"alice", jobpolicy.Job{Comment: "strata:class=big"},
			want{code: "ESLURM_INVALID_QOS", msg: "strata: there is no class big (--comment=strata:class=big); the classes are batch, interactive, train (policy.yaml:10)", class: "big"}},
		"class not allowed": {"bob", jobpolicy.Job{Comment: "strata:class=train"},
			want{code: "ESLURM_INVALID_QOS", msg: "strata: account acme-cv may not use class train; it may use batch (policy.yaml:61)", class: "train"}},
		"QOS": {"alice", jobpolicy.Job{QOS: "train"},
			want{code: "ESLURM_INVALID_QOS", msg: "strata: the QOS of a job is its class, batch (the default class): leave out --qos=train, or choose the class with --comment=strata:class=<name> (policy.yaml:20)", class: "batch"}},
		"partition": {"alice", jobpolicy.Job{Comment: "strata:class=train", Partition: "interactive"},
			want{code: "ESLURM_INVALID_PARTITION_NAME", msg: "strata: class train runs in partition gpu, not interactive: leave out --partition (policy.yaml:11)", class: "train"}},
		"time": {"alice", jobpolicy.Job{TimeLimit: 3000},
			want{code: "ESLURM_INVALID_TIME_LIMIT", msg: "strata: class batch allows at most 2-00:00:00; this job asks for 2-02:00:00 (policy.yaml:22)", class: "batch"}},
		"class GPUs": {"alice", jobpolicy.Job{Partition: "interactive", TRESPerNode: "gres/gpu:2", MinNodes: 2},
			want{code: "ESLURM_ACCOUNTING_POLICY", msg: "strata: class interactive allows at most 2 GPUs per job; this job asks for 4 (policy.yaml:32)", class: "interactive"}},
		"account GPUs": {"alice", jobpolicy.Job{TRESPerJob: "gres/gpu:13"},
			want{code: "ESLURM_ACCOUNTING_POLICY", msg: "strata: account acme-llm may use at most 12 GPUs; this job asks for 13 (policy.yaml:52)", class: "batch"}},
		"typed GPUs": {"alice", jobpolicy.Job{TRESPerTask: "gres/gpu:a100=1", NumTasks: 9},
			want{code: "ESLURM_ACCOUNTING_POLICY", msg: "strata: tenant acme may use at most 8 a100 GPUs; this job asks for 9 (policy.yaml:41)", class: "batch"}},
		"a forbidden type": {"alice", jobpolicy.Job{TRESPerNode: "gres/gpu:h100:1"},
			want{code: "ESLURM_ACCOUNTING_POLICY", msg: "strata: tenant acme may not use h100 GPUs (policy.yaml:42)", class: "batch"}},
		"too many to count": {"alice", jobpolicy.Job{TRESPerJob: "gres/gpu:4p"},
			want{code: "ESLURM_ACCOUNTING_POLICY", msg: "strata: this job asks for more than 2147483647 GPUs (--gpus, --gres or --gpus-per-*: tres_per_job=gres/gpu:4p); give the count it needs", class: "batch"}},
		"whole nodes": {"alice", jobpolicy.Job{Comment: "strata:class=train", MinNodes: 2},
			want{code: "ESLURM_ACCOUNTING_POLICY", msg: "strata: class train runs jobs on several nodes on whole nodes only: add --exclusive (policy.yaml:14)", class: "train"}},
	} {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(tc.user, tc.job)
			got := want{class: d.Class, applied: strings.Join(d.Applied, " ")}
			if d.Refusal != nil {
				got.code, got.msg = d.Refusal.Code, d.Refusal.Message
				if r := p.Check(tc.user, tc.job); r == nil || *r != *d.Refusal {
					t.Errorf("Check = %v, Decide refuses with %v", r, d.Refusal)
				}
				checkFacts(t, d.Refusal)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// checkFacts: a refusal names its rule, and each fact it gives is said
// in its message, so a page that says the facts in another language says
// what the message says.
func checkFacts(t *testing.T, r *jobpolicy.Refusal) {
	t.Helper()
	f := r.Facts
	if f.Rule == "" {
		t.Errorf("refusal %q names no rule", r.Message)
	}
	if (f.Limit == "") != (f.Asked == "") || (f.Limit == "") != (f.Unit == "") {
		t.Errorf("refusal %q: limit %q, asked %q and unit %q go together", r.Message, f.Limit, f.Asked, f.Unit)
	}
	for name, v := range map[string]string{"owner": f.Owner, "user": f.User, "class": f.Class, "limit": f.Limit, "asked": f.Asked, "item": f.Item, "allowed": f.Allowed} {
		if v != "" && !strings.Contains(r.Message, v) {
			t.Errorf("refusal %q: its %s %q is not in the message", r.Message, name, v)
		}
	}
}

func TestFromSpec(t *testing.T) {
	no := false
	got := jobpolicy.FromSpec(slurmrest.JobSpec{Account: "a", Partition: "p", QOS: "q", Comment: "strata:class=train", TRESPerNode: "gres/gpu:8",
		Nodes: "2-4", Tasks: 16, TasksPerNode: 8, TimeLimit: 90*time.Minute + time.Second, Exclusive: true, Requeue: &no, Switches: 1})
	want := jobpolicy.Job{Account: "a", Partition: "p", QOS: "q", Comment: "strata:class=train", TRESPerNode: "gres/gpu:8",
		MinNodes: 2, MaxNodes: 4, NumTasks: 16, TasksPerNode: 8, TimeLimit: 91, Exclusive: true, Requeue: &no, Switches: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for nodes, want := range map[string][2]int{"": {0, 0}, "3": {3, 3}, "1-2": {1, 2}, "x": {0, 0}, "2-x": {0, 0}} {
		j := jobpolicy.FromSpec(slurmrest.JobSpec{Nodes: nodes})
		if j.MinNodes != want[0] || j.MaxNodes != want[1] {
			t.Errorf("nodes %q: %d-%d, want %v", nodes, j.MinNodes, j.MaxNodes, want)
		}
	}
}

func TestMinutes(t *testing.T) {
	for m, want := range map[int64]string{0: "00:00:00", 59: "00:59:00", 240: "04:00:00", 2880: "2-00:00:00", 3000: "2-02:00:00", jobpolicy.Unlimited: "UNLIMITED"} {
		if got := jobpolicy.Minutes(m); got != want {
			t.Errorf("Minutes(%d) = %q, want %q", m, got, want)
		}
	}
}

// FuzzParse: no input panics, and what Parse accepts, written back by
// Marshal, it accepts again as the same policy.
func FuzzParse(f *testing.F) {
	good, err := os.ReadFile("testdata/small.good.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(good), `{}`, `{"apiVersion": "strata/v1", "kind": "JobPolicy"}`, `{"classes": {"a": {}}}`,
		`{"accounts": {"a": {"gpus": null}}}`, `[`, `{"users": {"u": 1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := jobpolicy.Parse(data)
		if err != nil {
			return
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := jobpolicy.Parse(out)
		if err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		p.Decide("alice", jobpolicy.Job{TRESPerNode: "gres/gpu:2", MinNodes: 2})
		again.Decide("alice", jobpolicy.Job{TRESPerNode: "gres/gpu:2", MinNodes: 2})
	})
}
