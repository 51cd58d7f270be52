package slurmplugins

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/jobpolicy"
)

// rendered renders the example policy with strata-policy and returns the
// two files it writes from one value: policy.lua for this plugin and
// jobpolicy.json for its Go twin.
func rendered(t *testing.T) (string, *jobpolicy.Policy) {
	t.Helper()
	return renderedFrom(t, exampleFile)
}

// renderedFrom is rendered of another policy file.
func renderedFrom(t *testing.T, policy string) (string, *jobpolicy.Policy) {
	t.Helper()
	slurmDir := t.TempDir()
	policyCLI(t, "render", "--policy", policy, "--output-dir", t.TempDir(), "--slurm-dir", slurmDir)
	lua, err := os.ReadFile(filepath.Join(slurmDir, "strata", "policy.lua"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := jobpolicy.Load(filepath.Join(slurmDir, "strata", jobpolicy.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(lua), p
}

// codes are the numbers the harness gives Slurm's error names.
var codes = map[string]int{
	"ESLURM_INVALID_PARTITION_NAME": rcPartition, "ESLURM_INVALID_ACCOUNT": rcAccount,
	"ESLURM_ACCOUNTING_POLICY": rcPolicy, "ESLURM_INVALID_TIME_LIMIT": rcTimeLimit, "ESLURM_INVALID_QOS": rcInvalidQOS,
}

// crossJob is a job of the cross-test: who submits it and what it asks.
type crossJob struct {
	user string
	job  jobpolicy.Job
}

// desc writes a job as the job_desc slurmctld gives the plugin: only
// what the job sets (the harness fills in Slurm's "not set").
func (c crossJob) desc() map[string]any {
	j := c.job
	d := map[string]any{"user_name": c.user}
	for k, v := range map[string]string{"account": j.Account, "default_account": j.DefaultAccount, "partition": j.Partition,
		"qos": j.QOS, "comment": j.Comment, "tres_per_job": j.TRESPerJob, "tres_per_node": j.TRESPerNode,
		"tres_per_socket": j.TRESPerSocket, "tres_per_task": j.TRESPerTask, "container": j.Container} {
		if v != "" {
			d[k] = v
		}
	}
	for k, v := range map[string]int{"min_nodes": j.MinNodes, "max_nodes": j.MaxNodes, "num_tasks": j.NumTasks,
		"ntasks_per_node": j.TasksPerNode, "sockets_per_node": j.SocketsPerNode, "req_switch": j.Switches, "time_limit": int(j.TimeLimit)} {
		if v != 0 {
			d[k] = v
		}
	}
	if j.Exclusive {
		d["shared"] = 0
	}
	if j.Requeue != nil {
		d["requeue"] = map[bool]int{true: 1, false: 0}[*j.Requeue]
	}
	return d
}

// goResult is what jobpolicy decides, written as the harness prints the
// plugin's result: the code, what the user is told, the fields changed.
func goResult(p *jobpolicy.Policy, c crossJob) (rc int, user, changed string) {
	d := p.Decide(c.user, c.job)
	if d.Refusal != nil {
		return codes[d.Refusal.Code], d.Refusal.Message, ""
	}
	in, out := c.job, d.Job
	var ch []string
	if out.Account != in.Account {
		ch = append(ch, "account="+out.Account)
	}
	if out.Partition != in.Partition {
		ch = append(ch, "partition="+out.Partition)
	}
	if out.QOS != in.QOS {
		ch = append(ch, "qos="+out.QOS)
	}
	if out.TimeLimit != in.TimeLimit {
		ch = append(ch, fmt.Sprintf("time_limit=%d", out.TimeLimit))
	}
	if (out.Requeue == nil) != (in.Requeue == nil) {
		ch = append(ch, "requeue="+map[bool]string{true: "1", false: "0"}[*out.Requeue])
	}
	if out.Switches != in.Switches {
		ch = append(ch, fmt.Sprintf("req_switch=%d", out.Switches))
	}
	return 0, "", strings.Join(ch, " ")
}

// crossJobs are the jobs of the cross-test: the cases of TestRules that
// a single job can ask for, and every combination of users, classes,
// partitions, QOS, GPU requests, node counts, --exclusive and time limits
// that the example policy gives different answers for.
func crossJobs() map[string]crossJob {
	jobs := map[string]crossJob{}
	add := func(name, user string, j jobpolicy.Job) { jobs[name] = crossJob{user, j} }
	yes, no := true, false
	add("nothing given", "alice", jobpolicy.Job{})
	add("carol's default", "carol", jobpolicy.Job{})
	add("requeue asked", "alice", jobpolicy.Job{Partition: "interactive", Requeue: &yes})
	add("no-requeue asked", "alice", jobpolicy.Job{Requeue: &no})
	add("own switches", "alice", jobpolicy.Job{Comment: "strata:class=train", MinNodes: 2, MaxNodes: 2, Exclusive: true, Switches: 2})
	add("a comment with more than the class", "alice", jobpolicy.Job{Comment: "strata:serve=llama strata:class=interactive"})
	add("outside the policy", "alice", jobpolicy.Job{Account: "testbed", Comment: "strata:class=train", MinNodes: 2, TRESPerJob: "gres/gpu:999"})
	add("a user outside the policy", "zed", jobpolicy.Job{DefaultAccount: "testbed"})
	add("not a member by Slurm's default", "zed", jobpolicy.Job{DefaultAccount: "acme-llm"})
	add("a viewer without an account", "dave", jobpolicy.Job{})
	add("unlimited time", "alice", jobpolicy.Job{TimeLimit: jobpolicy.Unlimited})
	add("65534 minutes", "alice", jobpolicy.Job{TimeLimit: 65534})
	add("range of nodes", "alice", jobpolicy.Job{Comment: "strata:class=train", MinNodes: 1, MaxNodes: 4})
	for i, tres := range []string{"gres:gpu:3", "gpu:5", "gres/gpu:h100:2,gres/nic:1", "gres/gpu:h100:1,gres/gpu:a100:2",
		"gres/gpu:1k", "gres/gpu:1g.10gb:3", "gres/gpu:h100", "gres/gpumem:80G,gres/shard:4", "gres/gpu:99999999999999999999",
		"gres/gpu:9223372036854775807", "gres/gpu:2147483647", "gres/gpu:2", "gres/gpu:2(S:0-1)", " gres/gpu:1 ", "gres/gpu:x",
		"gres/gpu=2", "gres/gpu:h100=8p", "cpu=2,gres/gpu:h100=1", "gres/gpus:2", "gres/gpu::2", "gres/gpu:a100:0"} {
		for _, field := range []string{"job", "node", "socket", "task"} {
			j := jobpolicy.Job{Partition: "interactive", MinNodes: 2, SocketsPerNode: 2, TasksPerNode: 3}
			switch field {
			case "job":
				j.TRESPerJob = tres
			case "node":
				j.TRESPerNode = tres
			case "socket":
				j.TRESPerSocket = tres
			case "task":
				j.TRESPerTask, j.NumTasks = tres, 4
			}
			add(fmt.Sprintf("gpus %d %s per %s", i, tres, field), "alice", j)
		}
	}
	add("gpus per job and per node", "alice", jobpolicy.Job{Partition: "interactive", TRESPerJob: "gres/gpu:3", TRESPerNode: "gres/gpu:2", MinNodes: 2})
	users := []string{"alice", "bob", "carol", "dave", "erin", "zed"}
	comments := []string{"", "strata:class=train", "strata:class=interactive", "strata:class=huge"}
	partitions := []string{"", "gpu", "interactive"}
	qoses := []string{"", "train"}
	gpus := []string{"", "gres/gpu:8", "gres/gpu:a100:8", "gres/gpu:h100:1", "gres/gpu:a100:3"}
	nodes := []int{0, 2, 7}
	times := []int64{0, 600, 3000}
	for _, u := range users {
		for _, c := range comments {
			for _, p := range partitions {
				for _, q := range qoses {
					for _, g := range gpus {
						for _, n := range nodes {
							for _, ex := range []bool{false, true} {
								for _, tl := range times {
									acct := ""
									if u == "bob" && n == 7 {
										acct = "acme-vision"
									}
									add(fmt.Sprintf("%s %q %s %s %s %dn %v %dm", u, c, p, q, g, n, ex, tl), u, jobpolicy.Job{
										Account: acct, Comment: c, Partition: p, QOS: q, TRESPerNode: g, MinNodes: n, MaxNodes: n,
										Exclusive: ex, TimeLimit: tl})
								}
							}
						}
					}
				}
			}
		}
	}
	return jobs
}

// TestCrossCheck runs every job of crossJobs through the real plugin and
// through jobpolicy.Policy.Decide, on the data strata-policy renders from
// the shipped example policy: the same code, the same message (with the
// same policy line), the same fields filled in, for every job.
func TestCrossCheck(t *testing.T) {
	lua, p := rendered(t)
	crossCheck(t, lua, p, crossJobs())
}

// crossCheck runs jobs through the plugin with the data lua and through
// jobpolicy with p, and fails on any difference.
func crossCheck(t *testing.T, lua string, p *jobpolicy.Policy, jobs map[string]crossJob) {
	t.Helper()
	steps := []step{{name: "data", write: lua}}
	for name, j := range jobs {
		steps = append(steps, step{name: name, job: j.desc()})
	}
	res := runSteps(t, "gpu", steps)
	refused := 0
	for name, j := range jobs {
		r := res[name]
		rc, user, changed := goResult(p, j)
		if fmt.Sprint(rc) != r.RC || user != r.User || changed != r.Changed {
			t.Errorf("%s: job_submit.lua: rc %s, told %q, changed %q; jobpolicy: rc %d, told %q, changed %q",
				name, r.RC, r.User, r.Changed, rc, user, changed)
		}
		if strings.Contains(r.Logs, "job_submit.lua failed") {
			t.Errorf("%s: the plugin failed: %s", name, r.Logs)
		}
		if rc != 0 {
			refused++
		}
	}
	// The table must exercise both sides of the rules.
	if refused == 0 || refused == len(jobs) {
		t.Errorf("%d of %d jobs refused: the table tests nothing", refused, len(jobs))
	}
	t.Logf("%d jobs, %d refused, the same verdicts from both", len(jobs), refused)
}

// withImages writes the example policy with an image allow-list for
// tenant acme (globex has none) and, when bundles is not "", the bundle
// directory, and returns the file: the example itself shows the keys only
// in a comment, so that its lines stay where other messages cite them.
func withImages(t *testing.T, bundles string) string {
	t.Helper()
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "\n  - name: acme\n", "\n  - name: acme\n    images:\n"+
		"      - registry.example.com/acme/*\n      - nvcr.io/nvidia/pytorch:25.04-py3\n", 1)
	if bundles != "" {
		s = strings.Replace(s, "\ncluster:\n", "\ncluster:\n  oci_bundles: "+bundles+"\n", 1)
	}
	if s == string(data) {
		t.Fatal("the example has no tenant acme to give images")
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCrossCheckImages: the image allow-list, on the --container of each
// job (an OCI bundle <oci_bundles>/<image>), gives the same verdicts,
// messages and policy lines from job_submit.lua and jobpolicy, with the
// default bundle directory and another.
func TestCrossCheckImages(t *testing.T) {
	for _, bundles := range []string{"", "/var/lib/bundles"} {
		t.Run("bundles="+bundles, func(t *testing.T) {
			lua, p := renderedFrom(t, withImages(t, bundles))
			root := p.Bundles()
			if root != map[bool]string{true: jobpolicy.DefaultOCIBundles, false: bundles}[bundles == ""] {
				t.Fatalf("bundles %s", root)
			}
			jobs := map[string]crossJob{}
			for name, c := range map[string]string{
				"under the prefix":         root + "/registry.example.com/acme/train:2.1",
				"deep under the prefix":    root + "/registry.example.com/acme/vision/detect:1",
				"the exact image":          root + "/nvcr.io/nvidia/pytorch:25.04-py3",
				"another tag":              root + "/nvcr.io/nvidia/pytorch:24.01-py3",
				"a prefix only in name":    root + "/registry.example.com/acme-evil/x:1",
				"the prefix itself":        root + "/registry.example.com/acme",
				"another registry":         root + "/docker.io/library/ubuntu:24.04",
				"outside the bundles":      "/home/alice/bundle",
				"a sibling of the bundles": root + "-old/registry.example.com/acme/train:2.1",
				"dot-dot":                  root + "/registry.example.com/acme/../../etc",
				"a dot":                    root + "/./registry.example.com/acme/train:2.1",
				"double slash":             root + "/registry.example.com//acme/train:2.1",
				"trailing slash":           root + "/registry.example.com/acme/train:2.1/",
				"the bundle directory":     root + "/",
				"no container":             "",
			} {
				jobs["alice "+name] = crossJob{"alice", jobpolicy.Job{Container: c}}
				jobs["erin "+name] = crossJob{"erin", jobpolicy.Job{Container: c}}
				jobs["outside the policy "+name] = crossJob{"alice", jobpolicy.Job{Account: "testbed", Container: c}}
				jobs["refused before the image "+name] = crossJob{"carol", jobpolicy.Job{Comment: "strata:class=train", Container: c}}
			}
			crossCheck(t, lua, p, jobs)
			// What the allow-list says, in the words both give.
			for name, want := range map[string]string{
				"alice under the prefix": "",
				"alice another tag": "strata: tenant acme may not run container image nvcr.io/nvidia/pytorch:24.01-py3; it may run " +
					"registry.example.com/acme/*, nvcr.io/nvidia/pytorch:25.04-py3 (policy.yaml:",
				"erin under the prefix": "strata: tenant globex may run no container images (registry.example.com/acme/train:2.1): " +
					"add the image to the tenant's images (policy.yaml:",
				"alice dot-dot": "strata: --container=" + root + "/registry.example.com/acme/../../etc is not the bundle of an image: " +
					"run an image tenant acme may run, from its bundle " + root + "/<image> (policy.yaml:",
			} {
				r := p.Check(jobs[name].user, jobs[name].job)
				if (want == "") != (r == nil) || (r != nil && !strings.HasPrefix(r.Message, want)) {
					t.Errorf("%s: %v; want %q", name, r, want)
				}
			}
		})
	}
}
