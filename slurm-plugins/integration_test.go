//go:build integration

package slurmplugins

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/testbed"
)

// testPolicy is applied to the bed's slurmdbd; %[1]s is the cluster, %[2]s
// the tenant (a name of this run: accounts and QOS are cluster-wide).
// T-int runs in a partition of its own, which the test creates.
const testPolicy = `apiVersion: strata/v1
kind: Policy
cluster:
  name: %[1]s
  gpu_types: [h100]
  default_class: %[2]s-batch
classes:
  - name: %[2]s-train
    partition: gpu
    default_time: 2h
    max_time: 12h
    priority: 30
    requeue: true
    whole_nodes: true
    switches: 1
    max_gpus_per_job: 16
  - name: %[2]s-batch
    partition: gpu
    default_time: 90m
    max_time: 4h
    priority: 20
    requeue: true
    max_gpus_per_job: 8
  - name: %[2]s-int
    partition: %[2]s-int
    default_time: 30m
    max_time: 2h
    priority: 40
    requeue: false
    max_gpus_per_job: 2
tenants:
  - name: %[2]s
    limits:
      gpus: 24
    images: [registry.example.com/acme/*]
    projects:
      - name: llm
        limits:
          gpus: 12
        members:
          - user: alice
            default: true
          - user: bob
            role: viewer
      - name: cv
        classes: [%[2]s-batch, %[2]s-int]
        members:
          - user: bob
`

// plugin drives one bed: tokens of its users and its sbatch and scontrol.
type plugin struct {
	b      *testbed.Bed
	tokens map[string]string
	script string // the job script, inside the root
	jobs   []string
}

func (p *plugin) scontrol(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(p.b.Scontrol, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sbatch submits a held job as user and returns its id, or "" and what
// sbatch said on stderr when the job was refused.
func (p *plugin) sbatch(t *testing.T, user string, args ...string) (id, stderr string) {
	t.Helper()
	tok, ok := p.tokens[user]
	if !ok {
		out := p.scontrol(t, "token", "username="+user, "lifespan=1800")
		tok = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "SLURM_JWT="))
		p.tokens[user] = tok
	}
	full := append([]string{"-H", "--parsable", "-J", "strata-js", "-D", p.b.JobDir}, args...)
	cmd := exec.Command(filepath.Join(p.b.Bin, "sbatch"), append(full, p.script)...)
	cmd.Env = append(os.Environ(), "SLURM_JWT="+tok)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", errb.String()
	}
	id, _, _ = strings.Cut(strings.TrimSpace(out.String()), ";")
	p.jobs = append(p.jobs, id)
	return id, errb.String()
}

// update runs `scontrol update` as user (a change of a job, which the
// plugin checks) and returns what it said and whether it succeeded.
func (p *plugin) update(t *testing.T, user string, args ...string) (string, bool) {
	t.Helper()
	tok, ok := p.tokens[user]
	if !ok {
		out := p.scontrol(t, "token", "username="+user, "lifespan=1800")
		tok = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "SLURM_JWT="))
		p.tokens[user] = tok
	}
	cmd := exec.Command(p.b.Scontrol, append([]string{"update"}, args...)...)
	cmd.Env = append(os.Environ(), "SLURM_JWT="+tok)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// job returns the fields of `scontrol show job -o` that the plugin sets.
func (p *plugin) job(t *testing.T, id string) map[string]string {
	t.Helper()
	fields := map[string]string{}
	for _, kv := range strings.Fields(p.scontrol(t, "show", "job", "-o", id)) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "Account", "Partition", "QOS", "TimeLimit", "Requeue", "Switches":
			fields[k] = v
		}
	}
	if s, ok := fields["Switches"]; ok { // "1@00:05:00": the count, not Slurm's default wait
		fields["Switches"], _, _ = strings.Cut(s, "@")
	}
	return fields
}

// writeFile replaces a file of the bed's root atomically (slurmctld reads
// these files while the test writes them).
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// lineIn is the line of text whose trimmed content is want, the first at
// or after line from.
func lineIn(t *testing.T, text, want string, from int) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if i+1 >= from && strings.TrimSpace(l) == want {
			return i + 1
		}
	}
	t.Fatalf("the test policy has no line %q after %d", want, from)
	return 0
}

// TestJobSubmit runs job_submit.lua in the real slurmctld of each test
// bed: a policy is applied to slurmdbd and its data file installed; held
// jobs submitted with sbatch get the class's partition, QOS, time limit,
// requeue flag, switches and the user's default account, or are refused
// with the rule and the policy line on sbatch's stderr; an account outside
// the policy passes untouched; a broken data file lets jobs through; a
// removed one leaves every job as Slurm has it.
func TestJobSubmit(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		p := &plugin{b: b, tokens: map[string]string{}}
		if cfg := p.scontrol(t, "show", "config"); !strings.Contains(strings.Join(strings.Fields(cfg), " "), "JobSubmitPlugins = lua") {
			t.Skipf("test bed %s runs slurmctld without JobSubmitPlugins=lua (started before test/testbed/slurm/etc/slurm.conf.in had it): "+
				"recreate it with testbed.sh down and up", b.Name)
		}
		// The plugin of this checkout: slurmctld loads it again on the
		// next job, as its mtime changed (what testbed.sh plugins does).
		plug, err := os.ReadFile("job_submit.lua")
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, b.HostPath("/etc/slurm/job_submit.lua"), plug)

		tenant := testbed.Unique("js")
		text := fmt.Sprintf(testPolicy, b.Cluster, tenant)
		dir := t.TempDir()
		file := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c := b.Client(t)
		t.Cleanup(func() { // after the jobs, the data file and the partition are gone (cleanups run last first)
			for _, u := range b.Users {
				_ = c.SetDefaultAccount(ctx, u, b.Account)
			}
			for _, a := range []string{tenant + "-llm", tenant + "-cv", tenant} {
				if err := c.DeleteAccount(ctx, a); err != nil {
					t.Logf("delete account %s: %v", a, err)
				}
			}
			for _, q := range []string{tenant + "-train", tenant + "-batch", tenant + "-int"} {
				if err := c.DeleteQOS(ctx, q); err != nil {
					t.Logf("delete QOS %s: %v", q, err)
				}
			}
		})
		policyCLI(t, "apply", "--apply", "--policy", file, "--url", b.URL, "--user", b.AdminUser, "--token-file", b.TokenFile)
		// apply made T-llm alice's default account in Slurm too; put
		// testbed back, so that T-llm on a job shows the plugin's work.
		if err := c.SetDefaultAccount(ctx, "alice", b.Account); err != nil {
			t.Fatal(err)
		}

		part := tenant + "-int"
		p.scontrol(t, "create", "PartitionName="+part, "Nodes="+strings.Join(b.Nodes, ","), "MaxTime=1-0", "State=UP")
		t.Cleanup(func() { _, _ = exec.Command(b.Scontrol, "delete", "PartitionName="+part).CombinedOutput() })

		p.script = b.JobDir + "/" + tenant + ".sh"
		writeFile(t, b.HostPath(p.script), []byte("#!/bin/sh\ntrue\n"))
		t.Cleanup(func() { os.Remove(b.HostPath(p.script)) })

		data := b.HostPath("/etc/slurm/strata/policy.lua")
		slurmDir := filepath.Join(dir, "slurm")
		policyCLI(t, "render", "--policy", file, "--output-dir", filepath.Join(dir, "strata"), "--slurm-dir", slurmDir)
		rendered, err := os.ReadFile(filepath.Join(slurmDir, "strata", "policy.lua"))
		if err != nil {
			t.Fatal(err)
		}
		forget := func() { // remove the data file and let the plugin see it is gone
			os.Remove(data)
			time.Sleep(reloadSeconds*time.Second + time.Second)
			if id, _ := p.sbatch(t, "alice", "-A", b.Account); id != "" { // a job makes the plugin look
				_, _ = exec.Command(filepath.Join(b.Bin, "scancel"), id).CombinedOutput()
			}
		}
		t.Cleanup(func() {
			if _, err := os.Stat(data); err == nil {
				forget()
			}
			os.Remove(filepath.Dir(data)) // strata/, when nothing else is in it
		})
		t.Cleanup(func() {
			if len(p.jobs) > 0 {
				_, _ = exec.Command(filepath.Join(b.Bin, "scancel"), p.jobs...).CombinedOutput()
			}
		})
		writeFile(t, data, rendered)
		time.Sleep(reloadSeconds*time.Second + time.Second) // the plugin looks at the file at most every 5 s

		line := func(want string, from ...int) string {
			f := 0
			if len(from) > 0 {
				f = from[0]
			}
			return fmt.Sprintf("(policy.yaml:%d)", lineIn(t, text, want, f))
		}
		llm := lineIn(t, text, "- name: llm", 0)
		T := tenant
		for _, tc := range []struct {
			name, user string
			args       []string
			want       map[string]string // the job's fields; nil when refused
			refused    string            // sbatch's stderr holds this
		}{
			// The default class (batch: 90m, requeue) in its partition, and
			// alice's default account of the policy (not Slurm's, testbed).
			{"defaults", "alice", nil,
				map[string]string{"Account": T + "-llm", "Partition": "gpu", "QOS": T + "-batch", "TimeLimit": "01:30:00", "Requeue": "1"}, ""},
			// train: whole nodes, --switches=1, 2h.
			{"train on 2 whole nodes", "alice", []string{"--comment=strata:class=" + T + "-train", "-N", "2", "--exclusive", "--gpus-per-node=4"},
				map[string]string{"Account": T + "-llm", "Partition": "gpu", "QOS": T + "-train", "TimeLimit": "02:00:00", "Requeue": "1", "Switches": "1"}, ""},
			{"train with its own --switches", "alice", []string{"--comment=strata:class=" + T + "-train", "-N", "2", "--exclusive", "--switches=2"},
				map[string]string{"Account": T + "-llm", "Partition": "gpu", "QOS": T + "-train", "TimeLimit": "02:00:00", "Requeue": "1", "Switches": "2"}, ""},
			// The partition picks its class: int, 30m, not requeueable.
			{"class from the partition", "alice", []string{"-p", part},
				map[string]string{"Account": T + "-llm", "Partition": part, "QOS": T + "-int", "TimeLimit": "00:30:00", "Requeue": "0"}, ""},
			{"requeue the user asked for", "alice", []string{"-p", part, "--requeue"},
				map[string]string{"Account": T + "-llm", "Partition": part, "QOS": T + "-int", "TimeLimit": "00:30:00", "Requeue": "1"}, ""},
			{"a time limit of the job's own", "alice", []string{"-t", "2:00:00"},
				map[string]string{"Account": T + "-llm", "Partition": "gpu", "QOS": T + "-batch", "TimeLimit": "02:00:00", "Requeue": "1"}, ""},
			{"bob's default account", "bob", nil,
				map[string]string{"Account": T + "-cv", "Partition": "gpu", "QOS": T + "-batch", "TimeLimit": "01:30:00", "Requeue": "1"}, ""},
			// Not the policy's account: Slurm's defaults (QOS normal, the
			// partition's 1h), and no whole-node rule.
			{"an account outside the policy", "alice", []string{"-A", b.Account, "--comment=strata:class=" + T + "-train", "-N", "2"},
				map[string]string{"Account": b.Account, "Partition": "gpu", "QOS": "normal", "TimeLimit": "01:00:00", "Requeue": "1"}, ""},
			// root is no user of the policy: Slurm's default account for root
			// (root) is looked up, and is not the policy's.
			{"a user outside the policy", "root", nil,
				map[string]string{"Account": "root", "Partition": "gpu", "QOS": "normal", "TimeLimit": "01:00:00"}, ""},

			{"a viewer", "bob", []string{"-A", T + "-llm"}, nil,
				"strata: user bob is not a member of account " + T + "-llm: a viewer cannot submit jobs " + line("- user: bob", llm)},
			{"a class the project may not use", "bob", []string{"--comment=strata:class=" + T + "-train"}, nil,
				"strata: account " + T + "-cv may not use class " + T + "-train; it may use " + T + "-batch, " + T + "-int " + line("classes: ["+T+"-batch, "+T+"-int]")},
			{"above the project's GPUs", "alice", []string{"--comment=strata:class=" + T + "-train", "--gpus=13"}, nil,
				"strata: account " + T + "-llm may use at most 12 GPUs; this job asks for 13 " + line("gpus: 12")},
			// 5 per node on 2 nodes.
			{"above the class's GPUs", "alice", []string{"--gres=gpu:h100:5", "-N", "2"}, nil,
				"strata: class " + T + "-batch allows at most 8 GPUs per job; this job asks for 10 " + line("max_gpus_per_job: 8")},
			{"GPUs per task", "alice", []string{"-p", part, "--gpus-per-task=1", "-n", "3"}, nil,
				"strata: class " + T + "-int allows at most 2 GPUs per job; this job asks for 3 " + line("max_gpus_per_job: 2")},
			{"above max_time", "alice", []string{"-t", "5:00:00"}, nil,
				"strata: class " + T + "-batch allows at most 04:00:00; this job asks for 05:00:00 " + line("max_time: 4h")},
			{"multi-node train without --exclusive", "alice", []string{"--comment=strata:class=" + T + "-train", "-N", "2"}, nil,
				"strata: class " + T + "-train runs jobs on several nodes on whole nodes only: add --exclusive " + line("whole_nodes: true")},
			// --container is in job_desc: the image is its path under
			// /srv/strata/bundles. (The job is held: the bundle need not
			// exist for the check.)
			{"an image the tenant may run", "alice", []string{"--container=/srv/strata/bundles/registry.example.com/acme/train:2.1"},
				map[string]string{"Account": T + "-llm", "QOS": T + "-batch"}, ""},
			{"an image the tenant may not run", "alice", []string{"--container=/srv/strata/bundles/docker.io/library/ubuntu:24.04"}, nil,
				"strata: tenant " + T + " may not run container image docker.io/library/ubuntu:24.04; it may run registry.example.com/acme/* " + line("images: [registry.example.com/acme/*]")},
			{"a QOS that is not the class", "alice", []string{"--qos=" + T + "-train"}, nil,
				"strata: the QOS of a job is its class, " + T + "-batch (the default class): leave out --qos=" + T + "-train"},
		} {
			id, stderr := p.sbatch(t, tc.user, tc.args...)
			switch {
			case tc.want == nil && id != "":
				t.Errorf("%s: job %s accepted, want it refused with %q", tc.name, id, tc.refused)
			case tc.want == nil:
				if !strings.Contains(stderr, tc.refused) {
					t.Errorf("%s: sbatch said\n%s\nwant %q", tc.name, stderr, tc.refused)
				}
			case id == "":
				t.Errorf("%s: refused: %s", tc.name, stderr)
			default:
				got := p.job(t, id)
				for k, v := range tc.want {
					if got[k] != v {
						t.Errorf("%s: job %s has %s=%q, want %q (all: %v)", tc.name, id, k, got[k], v, got)
					}
				}
				if _, ok := tc.want["Switches"]; !ok && got["Switches"] != "" {
					t.Errorf("%s: job %s has Switches=%s, want none", tc.name, id, got["Switches"])
				}
			}
		}

		// A heterogeneous job: its components' GPUs are summed (5 + 5
		// against batch's 8).
		if id, stderr := p.sbatch(t, "alice", "--gpus=5", ":", "--gpus=5"); id != "" {
			t.Errorf("heterogeneous job of 5 + 5 GPUs: job %s accepted, want it refused", id)
		} else if want := "strata: class " + T + "-batch allows at most 8 GPUs per job; this heterogeneous job asks for 10 " +
			"(5 in its earlier components, 5 in this one)"; !strings.Contains(stderr, want) {
			t.Errorf("heterogeneous job of 5 + 5 GPUs: sbatch said\n%s\nwant %q", stderr, want)
		}

		// A change is checked as the job it would leave: the QOS of
		// another class is refused, a change the rules allow passes.
		held, stderr := p.sbatch(t, "alice")
		if held == "" {
			t.Fatalf("a held job for the changes: %s", stderr)
		}
		// scontrol prints the plugin's message where the release passes
		// it on, else the error code's text (invalid QOS).
		if out, ok := p.update(t, "alice", "JobId="+held, "QOS="+T+"-train"); ok ||
			!strings.Contains(out, "strata: the QOS of a job is its class, "+T+"-batch") && !strings.Contains(strings.ToLower(out), "qos") {
			t.Errorf("change of job %s to QOS %s-train: ok=%v %s; want it refused by the plugin", held, T, ok, out)
		}
		if got := p.job(t, held); got["QOS"] != T+"-batch" {
			t.Errorf("job %s after a refused change has QOS %s, want %s-batch", held, got["QOS"], T)
		}
		if out, ok := p.update(t, "alice", "JobId="+held, "TimeLimit=1:00:00"); !ok {
			t.Errorf("change of job %s to a shorter time limit: %s", held, out)
		}

		// A broken data file: the job the policy refuses passes, its
		// submitter is told it was not checked, and slurmctld still
		// answers and says why in its log, at error level.
		writeFile(t, data, []byte("return {\n"))
		time.Sleep(reloadSeconds*time.Second + time.Second)
		id, stderr := p.sbatch(t, "alice", "-A", T+"-llm", "--comment=strata:class="+T+"-train", "-N", "2")
		if id == "" {
			t.Errorf("with a broken data file a job was refused: %s", stderr)
		} else if got := p.job(t, id); got["Account"] != T+"-llm" {
			t.Errorf("with a broken data file job %s has %v", id, got)
		}
		if !strings.Contains(stderr, "strata: warning: this job was not checked against the cluster's policy: "+
			"its data file /etc/slurm/strata/policy.lua is broken") {
			t.Errorf("with a broken data file sbatch said %q; want the warning that the job was not checked", stderr)
		}
		if out := p.scontrol(t, "ping"); !strings.Contains(out, "UP") {
			t.Errorf("slurmctld after a broken data file: %s", out)
		}
		log, _ := os.ReadFile(b.HostPath("/var/log/slurm/slurmctld.log"))
		if !strings.Contains(string(log), "strata: /etc/slurm/strata/policy.lua is broken, so jobs pass unchecked until it is fixed") {
			t.Errorf("slurmctld.log does not say the data file is broken")
		}

		// Removed: alice's job keeps Slurm's default account again.
		forget()
		id, stderr = p.sbatch(t, "alice")
		if id == "" {
			t.Fatalf("without a data file a job was refused: %s", stderr)
		}
		if got := p.job(t, id); got["Account"] != b.Account || got["QOS"] != "normal" || got["TimeLimit"] != "01:00:00" {
			t.Errorf("without a data file job %s has %v, want Slurm's defaults (account %s, QOS normal, 1h)", id, got, b.Account)
		}
		if !strings.Contains(stderr, "its data file /etc/slurm/strata/policy.lua is missing") {
			t.Errorf("without a data file sbatch said %q; want the warning that the job was not checked", stderr)
		}
		if out := p.scontrol(t, "ping"); !strings.Contains(out, "UP") {
			t.Errorf("slurmctld without a data file: %s", out)
		}
		log, _ = os.ReadFile(b.HostPath("/var/log/slurm/slurmctld.log"))
		if !slices.ContainsFunc(strings.Split(string(log), "\n"), func(l string) bool {
			return strings.Contains(l, "error: ") && strings.Contains(l, "strata: no policy data (")
		}) {
			t.Errorf("slurmctld.log does not say, at error level, that the data file is missing")
		}
	})
}
