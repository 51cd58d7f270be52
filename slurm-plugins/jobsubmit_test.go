package slurmplugins

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/luastr"
	"github.com/strata-hpc/strata/internal/luatest"
)

// exampleFile is the shipped example policy; the unit tests run the
// plugin on the data strata-policy renders from it.
const exampleFile = "../etc/strata/policy.yaml"

// Slurm's codes the plugin returns (slurm_errno.h; the harness gives the
// script the same numbers slurmctld does).
const (
	rcOK          = 0
	rcPartition   = 2000
	rcAccount     = 2045
	rcPolicy      = 2050
	rcTimeLimit   = 2051
	rcInvalidQOS  = 2066
	reloadSeconds = 5 // RELOAD_SECONDS of job_submit.lua
)

// step is one step of the harness (testdata/harness.lua): write or remove
// the data file, move the clock, submit a job.
type step struct {
	name    string
	write   string // the data file's new content
	empty   bool   // write the data file empty
	remove  bool   // remove the data file
	advance int    // seconds to move the clock
	job     map[string]any
	// rec makes the step a change (slurm_job_modify): job is the request,
	// rec the job slurmctld holds; modifyUID is who asks (default the
	// job's user).
	rec       map[string]any
	modifyUID *int
}

// result is what the harness prints for a step.
type result struct {
	RC      string
	User    string // what the user is told (stderr of sbatch)
	Changed string // fields the plugin set, "k=v" sorted as FIELDS in the harness
	Logs    string // slurmctld log lines
}

// imagesLine is the first account's images_line in the data file (13e puts
// a bad images list before it), whatever line of the policy it names.
var imagesLine = regexp.MustCompile(`images_line = [0-9]+,`)

func firstImagesLine(data string) string {
	loc := imagesLine.FindStringIndex(data)
	if loc == nil {
		return data
	}
	return data[:loc[0]] + "images = { 1 }, " + data[loc[0]:]
}

func runSteps(t *testing.T, cluster string, steps []step) map[string]result {
	t.Helper()
	lua := luatest.Require(t)
	script, err := os.ReadFile("job_submit.lua")
	if err != nil {
		t.Fatal(err)
	}
	harness, err := os.ReadFile("testdata/harness.lua")
	if err != nil {
		t.Fatal(err)
	}
	out, err := lua.Run(t.Context(), string(harness), map[string][]byte{"job_submit.lua": script, "steps.lua": stepsLua(cluster, steps)})
	if err != nil {
		t.Fatalf("harness: %v\noutput so far:\n%s", err, out)
	}
	res := map[string]result{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		name, r := parseResult(t, line)
		res[name] = r
	}
	if len(res) != len(steps) {
		t.Fatalf("%d results for %d steps (names must be unique):\n%s", len(res), len(steps), out)
	}
	return res
}

// stepsLua is the harness's steps.lua: the cluster's name and the steps.
func stepsLua(cluster string, steps []step) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "return {\n  cluster = %s,\n", luaValue(cluster))
	for _, s := range steps {
		b.WriteString("  " + s.lua() + ",\n")
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// lua writes the step as the harness reads it, a Lua table.
func (s step) lua() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{ name = %s", luaValue(s.name))
	if s.write != "" || s.empty {
		fmt.Fprintf(&b, ", write = %s", luaValue(s.write))
	}
	if s.remove {
		b.WriteString(", remove = true")
	}
	fmt.Fprintf(&b, ", advance = %d", s.advance)
	if s.job != nil {
		b.WriteString(", job = " + luaTable(s.job))
	}
	if s.rec != nil {
		b.WriteString(", rec = " + luaTable(s.rec))
	}
	if s.modifyUID != nil {
		fmt.Fprintf(&b, ", modify_uid = %d", *s.modifyUID)
	}
	b.WriteString(" }")
	return b.String()
}

// parseResult reads one line of the harness: a step's name and result.
func parseResult(t testing.TB, line string) (string, result) {
	t.Helper()
	f := strings.Split(line, "\t")
	if len(f) != 5 {
		t.Fatalf("harness line %q: want 5 fields", line)
	}
	return f[0], result{RC: f[1], User: f[2], Changed: f[3], Logs: f[4]}
}

// luaTable writes fields as a Lua table, keys sorted.
func luaTable(fields map[string]any) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s = %s,", k, luaValue(fields[k]))
	}
	b.WriteString(" }")
	return b.String()
}

// luaValue writes a Go string, int or bool as a Lua literal.
func luaValue(v any) string {
	switch x := v.(type) {
	case string:
		return luastr.Quote(x)
	case bool:
		return fmt.Sprint(x)
	case int:
		return fmt.Sprint(x)
	}
	panic(fmt.Sprintf("luaValue: %T", v))
}

// exampleLine returns the line of the example policy whose text (trimmed)
// is text, the first at or after line from; messages cite these lines.
func exampleLine(t *testing.T, text string, from int) int {
	t.Helper()
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(data), "\n") {
		if i+1 >= from && strings.TrimSpace(l) == text {
			return i + 1
		}
	}
	t.Fatalf("%s has no line %q after line %d", exampleFile, text, from)
	return 0
}

// readExampleData renders the example policy with strata-policy and
// returns its job_submit data (strata/policy.lua).
func readExampleData(t *testing.T) string {
	t.Helper()
	slurmDir := t.TempDir()
	policyCLI(t, "render", "--policy", exampleFile, "--output-dir", t.TempDir(), "--slurm-dir", slurmDir)
	data, err := os.ReadFile(filepath.Join(slurmDir, "strata", "policy.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRules submits jobs against the data of the shipped example policy
// (etc/strata/policy.yaml): what each job gets, or the message it is
// rejected with, follows from the policy lines the comments quote.
func TestRules(t *testing.T) {
	data := readExampleData(t)
	line := func(text string, from ...int) string {
		f := 0
		if len(from) > 0 {
			f = from[0]
		}
		return fmt.Sprintf("(policy.yaml:%d)", exampleLine(t, text, f))
	}
	globex := exampleLine(t, "- name: globex", 0)
	interactiveGPUs := func(n int) string {
		return fmt.Sprintf("strata: class interactive allows at most 2 GPUs per job; this job asks for %d %s", n, line("max_gpus_per_job: 2"))
	}
	type want struct {
		rc      int
		user    string // the message, whole
		changed string
	}
	for name, tc := range map[string]struct {
		job  map[string]any
		want want
	}{
		// Defaults. alice's default account is acme-llm (default: true);
		// the default class is batch: partition gpu, 4h, requeueable.
		"nothing given": {map[string]any{"user_name": "alice"},
			want{rcOK, "", "account=acme-llm partition=gpu qos=batch time_limit=240 requeue=1"}},
		// carol's only project is vision.
		"carol's default account": {map[string]any{"user_name": "carol"},
			want{rcOK, "", "account=acme-vision partition=gpu qos=batch time_limit=240 requeue=1"}},
		// Partition interactive is the interactive class's: 2h, not requeueable.
		"class from the partition": {map[string]any{"user_name": "bob", "account": "acme-vision", "partition": "interactive"},
			want{rcOK, "", "qos=interactive time_limit=120 requeue=0"}},
		"requeue the user asked for": {map[string]any{"user_name": "alice", "partition": "interactive", "requeue": 1},
			want{rcOK, "", "account=acme-llm qos=interactive time_limit=120"}},
		"no-requeue the user asked for": {map[string]any{"user_name": "alice", "requeue": 0},
			want{rcOK, "", "account=acme-llm partition=gpu qos=batch time_limit=240"}},
		"a time limit within max_time": {map[string]any{"user_name": "alice", "time_limit": 600},
			want{rcOK, "", "account=acme-llm partition=gpu qos=batch requeue=1"}},
		"the QOS of the class": {map[string]any{"user_name": "alice", "qos": "batch"},
			want{rcOK, "", "account=acme-llm partition=gpu time_limit=240 requeue=1"}},
		// train: 24h, whole nodes under one switch (switches: 1).
		"train on 2 whole nodes": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 2, "max_nodes": 2, "shared": 0, "tres_per_node": "gres/gpu:h100:8"},
			want{rcOK, "", "account=acme-llm partition=gpu qos=train time_limit=1440 requeue=1 req_switch=1"}},
		"train with its own --switches": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 2, "max_nodes": 2, "shared": 0, "req_switch": 2},
			want{rcOK, "", "account=acme-llm partition=gpu qos=train time_limit=1440 requeue=1"}},
		"train on one node": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "tres_per_job": "gres/gpu:8"},
			want{rcOK, "", "account=acme-llm partition=gpu qos=train time_limit=1440 requeue=1"}},
		"a comment with more than the class": {map[string]any{"user_name": "alice", "comment": "strata:serve=llama strata:class=interactive"},
			want{rcOK, "", "account=acme-llm partition=interactive qos=interactive time_limit=120 requeue=0"}},
		// Accounts the policy does not manage pass untouched.
		"an account outside the policy": {map[string]any{"user_name": "alice", "account": "testbed", "comment": "strata:class=train", "min_nodes": 2, "tres_per_job": "gres/gpu:999"},
			want{rcOK, "", ""}},
		"a user outside the policy": {map[string]any{"user_name": "zed", "default_account": "testbed"},
			want{rcOK, "", ""}},
		// dave is only a viewer: no default account in the policy, and
		// none in Slurm (viewers get no association), so nothing to check.
		"a viewer without an account": {map[string]any{"user_name": "dave"},
			want{rcOK, "", ""}},

		// Rejections.
		"a viewer": {map[string]any{"user_name": "dave", "account": "acme-llm"},
			want{rcAccount, "strata: user dave is not a member of account acme-llm: a viewer cannot submit jobs " + line("- user: dave"), ""}},
		"not a member": {map[string]any{"user_name": "carol", "account": "acme-llm"},
			want{rcAccount, "strata: user carol is not a member of account acme-llm " + line("- name: llm"), ""}},
		// A user outside the policy whose Slurm default account is the policy's.
		"not a member by Slurm's default account": {map[string]any{"user_name": "zed", "default_account": "acme-llm"},
			want{rcAccount, "strata: user zed is not a member of account acme-llm " + line("- name: llm"), ""}},
		"a class the project may not use": {map[string]any{"user_name": "carol", "comment": "strata:class=train"},
			want{rcInvalidQOS, "strata: account acme-vision may not use class train; it may use batch, interactive " + line("classes: [batch, interactive]"), ""}},
		"an unknown class": {map[string]any{"user_name": "alice", "comment": "strata:class=huge"},
			want{rcInvalidQOS, "strata: there is no class huge (--comment=strata:class=huge); the classes are batch, interactive, serve, train " + line("- name: train"), ""}},
		"a QOS that is not the class": {map[string]any{"user_name": "alice", "qos": "train"},
			want{rcInvalidQOS, "strata: the QOS of a job is its class, batch (the default class): leave out --qos=train, or choose the class with --comment=strata:class=<name> " + line("- name: batch"), ""}},
		"a partition that is not the class's": {map[string]any{"user_name": "alice", "comment": "strata:class=interactive", "partition": "gpu"},
			want{rcPartition, "strata: class interactive runs in partition interactive, not gpu: leave out --partition " + line("- name: interactive"), ""}},
		// batch: max_time 2d = 2880 minutes; 3000 minutes is 2-02:00:00.
		"a time limit above max_time": {map[string]any{"user_name": "alice", "time_limit": 3000},
			want{rcTimeLimit, "strata: class batch allows at most 2-00:00:00; this job asks for 2-02:00:00 " + line("max_time: 2d"), ""}},
		// 65534 minutes is Slurm's "not set" of 16-bit fields, not of the time limit.
		"a time limit of 65534 minutes": {map[string]any{"user_name": "alice", "time_limit": 65534},
			want{rcTimeLimit, "strata: class batch allows at most 2-00:00:00; this job asks for 45-12:14:00 " + line("max_time: 2d"), ""}},
		"a time limit of max_time exactly": {map[string]any{"user_name": "alice", "time_limit": 2880},
			want{rcOK, "", "account=acme-llm partition=gpu qos=batch requeue=1"}},
		"an unlimited time limit": {map[string]any{"user_name": "alice", "time_limit": 4294967295},
			want{rcTimeLimit, "strata: class batch allows at most 2-00:00:00; this job asks for UNLIMITED " + line("max_time: 2d"), ""}},
		// acme-llm has 48 GPUs; 7 nodes x 8 is 56 (train allows 256).
		"above the project's GPUs": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 7, "max_nodes": 7, "shared": 0, "tres_per_node": "gres/gpu:8"},
			want{rcPolicy, "strata: account acme-llm may use at most 48 GPUs; this job asks for 56 " + line("gpus: 48"), ""}},
		// globex-rl has no GPU limit of its own: globex's 32 holds.
		"above the tenant's GPUs": {map[string]any{"user_name": "erin", "tres_per_job": "gres/gpu:a100:33"},
			want{rcPolicy, "strata: tenant globex may use at most 32 GPUs; this job asks for 33 " + line("gpus: 32", globex), ""}},
		"a GPU type the tenant may not use": {map[string]any{"user_name": "erin", "tres_per_job": "gres/gpu:h100:1"},
			want{rcPolicy, "strata: tenant globex may not use h100 GPUs " + line("h100: 0"), ""}},
		// acme allows 32 a100s; 5 nodes x 8 a100 is 40 (under llm's 48 GPUs).
		"above the tenant's GPUs of a type": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 5, "max_nodes": 5, "shared": 0, "tres_per_node": "gres/gpu:a100:8"},
			want{rcPolicy, "strata: tenant acme may use at most 32 a100 GPUs; this job asks for 40 " + line("a100: 32"), ""}},
		"train on 2 nodes, not whole": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 2, "max_nodes": 2},
			want{rcPolicy, "strata: class train runs jobs on several nodes on whole nodes only: add --exclusive " + line("whole_nodes: true"), ""}},
		"train on 1 to 4 nodes, not whole": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 1, "max_nodes": 4},
			want{rcPolicy, "strata: class train runs jobs on several nodes on whole nodes only: add --exclusive " + line("whole_nodes: true"), ""}},
		"train with --exclusive=user": {map[string]any{"user_name": "alice", "comment": "strata:class=train", "min_nodes": 2, "max_nodes": 2, "shared": 2},
			want{rcPolicy, "strata: class train runs jobs on several nodes on whole nodes only: add --exclusive " + line("whole_nodes: true"), ""}},

		// Counting GPUs, through interactive's max_gpus_per_job: 2.
		"gpus: --gpus=4": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:4"},
			want{rcPolicy, interactiveGPUs(4), ""}},
		"gpus: per node times nodes": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpu:2", "min_nodes": 3, "max_nodes": 3},
			want{rcPolicy, interactiveGPUs(6), ""}},
		"gpus: the older gres: spelling": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres:gpu:3"},
			want{rcPolicy, interactiveGPUs(3), ""}},
		"gpus: without a prefix": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gpu:5"},
			want{rcPolicy, interactiveGPUs(5), ""}},
		"gpus: typed, beside another GRES": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpu:h100:2,gres/nic:1", "min_nodes": 2},
			want{rcPolicy, interactiveGPUs(4), ""}},
		"gpus: two types": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpu:h100:1,gres/gpu:a100:2"},
			want{rcPolicy, interactiveGPUs(3), ""}},
		"gpus: per socket times sockets and nodes": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_socket": "gres/gpu:1", "sockets_per_node": 2, "min_nodes": 2},
			want{rcPolicy, interactiveGPUs(4), ""}},
		"gpus: per socket, sockets not given": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_socket": "gres/gpu:3"},
			want{rcPolicy, interactiveGPUs(3), ""}},
		"gpus: per task times tasks": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_task": "cpu=2,gres/gpu:h100=1", "num_tasks": 8},
			want{rcPolicy, interactiveGPUs(8), ""}},
		"gpus: per task, tasks per node times nodes": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_task": "gres/gpu=2", "ntasks_per_node": 2, "min_nodes": 2},
			want{rcPolicy, interactiveGPUs(8), ""}},
		// --gpus=3 with --gpus-per-node=2 on 2 nodes is 4 GPUs, not 7.
		"gpus: per job and per node together": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:3", "tres_per_node": "gres/gpu:2", "min_nodes": 2},
			want{rcPolicy, interactiveGPUs(4), ""}},
		"gpus: a count with a suffix": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:1k"},
			want{rcPolicy, interactiveGPUs(1024), ""}},
		"gpus: a MIG type that starts with a digit": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpu:1g.10gb:3"},
			want{rcPolicy, interactiveGPUs(3), ""}},
		"gpus: a type and no count is one": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpu:h100"},
			want{rcOK, "", "account=acme-llm qos=interactive time_limit=120 requeue=0"}},
		"gpus: GPU memory and shards are not GPUs": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpumem:80G,gres/shard:4"},
			want{rcOK, "", "account=acme-llm qos=interactive time_limit=120 requeue=0"}},
		"gpus: a count too large for a number": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:99999999999999999999"},
			want{rcPolicy, "strata: this job asks for more than 2147483647 GPUs (--gpus, --gres or --gpus-per-*: tres_per_job=gres/gpu:99999999999999999999); give the count it needs", ""}},
		"gpus: the largest integer, on two nodes": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_node": "gres/gpu:9223372036854775807", "min_nodes": 2},
			want{rcPolicy, "strata: this job asks for more than 2147483647 GPUs (--gpus, --gres or --gpus-per-*: tres_per_node=gres/gpu:9223372036854775807); give the count it needs", ""}},
		"gpus: a huge typed count with a suffix": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_task": "gres/gpu:h100=8p", "num_tasks": 2},
			want{rcPolicy, "strata: this job asks for more than 2147483647 GPUs (--gpus, --gres or --gpus-per-*: tres_per_task=gres/gpu:h100=8p); give the count it needs", ""}},
		"gpus: the most a job may ask, then a class limit": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:2147483647"},
			want{rcPolicy, interactiveGPUs(2147483647), ""}},
		"gpus: two, the most interactive allows": {map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:2"},
			want{rcOK, "", "account=acme-llm qos=interactive time_limit=120 requeue=0"}},

		// A failure inside the plugin lets the job through.
		"an accessor that fails": {map[string]any{"user_name": "alice", "explode": "comment"},
			want{rcOK, "", ""}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := runSteps(t, "gpu", []step{{name: "job", write: data, job: tc.job}})["job"]
			got := want{user: res.User, changed: res.Changed}
			fmt.Sscan(res.RC, &got.rc)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s\nlog: %s", diff, res.Logs)
			}
			if got.rc != rcOK && !strings.Contains(res.Logs, tc.want.user) {
				t.Errorf("the rejection is not in slurmctld's log: %s", res.Logs)
			}
			if name == "an accessor that fails" && !strings.Contains(res.Logs, "error: strata: job_submit.lua failed, so the job passes unchecked") {
				t.Errorf("the failure is not logged: %s", res.Logs)
			}
		})
	}
}

// TestDataFile follows the data file through its life: missing, written,
// broken in every way the plugin guards against, fixed, removed. Jobs
// pass untouched whenever there is no good data, and each condition is
// logged once; a change is seen within RELOAD_SECONDS.
func TestDataFile(t *testing.T) {
	data := readExampleData(t)
	alice := map[string]any{"user_name": "alice"}
	applied := "account=acme-llm partition=gpu qos=batch time_limit=240 requeue=1"
	steps := []step{
		{name: "01 no file", job: alice},
		{name: "02 no file again", advance: reloadSeconds, job: alice},
		{name: "03 written, not looked at yet", write: data, advance: 1, job: alice},
		{name: "04 seen", advance: reloadSeconds, job: alice},
		{name: "04b unchanged, not parsed again", advance: reloadSeconds, job: alice},
		{name: "05 syntax error", write: "return {", advance: reloadSeconds, job: alice},
		{name: "06 still broken", advance: reloadSeconds, job: alice},
		{name: "07 a loop", write: "while true do end", advance: reloadSeconds, job: alice},
		{name: "08 a newer format", write: strings.Replace(data, "version = 1,", "version = 2,", 1), advance: reloadSeconds, job: alice},
		{name: "09 another cluster", write: strings.Replace(data, `cluster = "gpu",`, `cluster = "other",`, 1), advance: reloadSeconds, job: alice},
		{name: "10 compiled", write: "\x1bLua\x54\x00", advance: reloadSeconds, job: alice},
		{name: "11 wrong layout", write: "return { version = 1 }", advance: reloadSeconds, job: alice},
		{name: "12 reaches for globals", write: `return { version = 1, x = io.open("/etc/passwd") }`, advance: reloadSeconds, job: alice},
		{name: "13 not a table", write: "return 42", advance: reloadSeconds, job: alice},
		{name: "13b empty", empty: true, advance: reloadSeconds, job: alice},
		{name: "13c blank, still empty", write: " \n\t\n", advance: reloadSeconds, job: alice},
		{name: "13d returns nothing", write: "local x = 1", advance: reloadSeconds, job: alice},
		{name: "13e an image not a string", write: firstImagesLine(data), advance: reloadSeconds, job: alice},
		{name: "14 fixed", write: data, advance: reloadSeconds, job: alice},
		{name: "15 removed", remove: true, advance: reloadSeconds, job: alice},
		{name: "16 back", write: data, advance: reloadSeconds, job: alice},
	}
	res := runSteps(t, "gpu", steps)
	for name, want := range map[string]struct {
		changed string
		log     string // "" when the step logs nothing
		told    string // what the submitter is told the data file is ("" when it is good)
	}{
		"01 no file":                      {"", "error: strata: no policy data (", "is missing"},
		"02 no file again":                {"", "", "is missing"},
		"03 written, not looked at yet":   {"", "", "is missing"},
		"04 seen":                         {applied, "info: strata: loaded ", ""},
		"04b unchanged, not parsed again": {applied, "", ""},
		"05 syntax error":                 {"", "error: strata: ", "is broken"},
		"06 still broken":                 {"", "", "is broken"},
		"07 a loop":                       {"", "it runs too long", "is broken"},
		"08 a newer format":               {"", "it has format 2, this job_submit.lua reads format 1", "is broken"},
		"09 another cluster":              {"", "it is the policy of cluster other, and this is gpu", "is broken"},
		"10 compiled":                     {"", "it is a compiled Lua chunk, not text", "is broken"},
		"11 wrong layout":                 {"", "accounts: want a table, got nil", "is broken"},
		"12 reaches for globals":          {"", "io", "is broken"},
		"13 not a table":                  {"", "the file: want a table, got number", "is broken"},
		"13b empty":                       {"", "it is empty (a render that was cut short?)", "is broken"},
		"13c blank, still empty":          {"", "", "is broken"},
		"13d returns nothing":             {"", "the file: want a table, got nil", "is broken"},
		"13e an image not a string":       {"", "accounts.acme-llm.images[1]: want a string, got number", "is broken"},
		"14 fixed":                        {applied, "info: strata: loaded ", ""},
		"15 removed":                      {"", "error: strata: no policy data (", "is missing"},
		"16 back":                         {applied, "info: strata: loaded ", ""},
	} {
		r := res[name]
		told := r.User == "" && want.told == ""
		if want.told != "" {
			const pre = "strata: warning: this job was not checked against the cluster's policy: its data file /"
			told = strings.HasPrefix(r.User, pre) &&
				strings.HasSuffix(r.User, "/strata/policy.lua "+want.told+"; please tell the cluster's admins")
		}
		if r.RC != "0" || r.Changed != want.changed || !told {
			t.Errorf("%s: rc %s, user told %q, changed %q; want 0, that the data file %s, %q", name, r.RC, r.User, r.Changed, want.told, want.changed)
		}
		logged := strings.Count(r.Logs, "strata: ") - strings.Count(r.Logs, "debug: strata: class")
		switch {
		case want.log == "" && logged != 0:
			t.Errorf("%s: logged %q, want nothing (once is enough)", name, r.Logs)
		case want.log != "" && (logged != 1 || !strings.Contains(r.Logs, want.log)):
			t.Errorf("%s: logged %q, want one line with %q", name, r.Logs, want.log)
		}
		if want.told == "is broken" && want.log != "" {
			if !strings.Contains(r.Logs, "is broken, so jobs pass unchecked until it is fixed") {
				t.Errorf("%s: logged %q, want it to say the file is broken", name, r.Logs)
			}
		}
	}
}

// outcome is what a step of the tests below must give: its code and a
// part of what the user is told ("" when told nothing).
type outcome struct {
	rc   int
	user string
}

func checkOutcomes(t *testing.T, res map[string]result, want map[string]outcome) {
	t.Helper()
	for name, w := range want {
		r, ok := res[name]
		if !ok {
			t.Fatalf("no step %q", name)
		}
		var rc int
		fmt.Sscan(r.RC, &rc)
		if rc != w.rc || (w.user == "") != (r.User == "") || !strings.Contains(r.User, w.user) {
			t.Errorf("%s: rc %d, user told %q; want %d and %q\nlog: %s", name, rc, r.User, w.rc, w.user, r.Logs)
		}
		if strings.Contains(r.Logs, "job_submit.lua failed") {
			t.Errorf("%s: the plugin failed: %s", name, r.Logs)
		}
	}
}

// The components of a heterogeneous job come one by one (het_job_offset
// 0, 1, ...): their GPUs are summed against the class, the project or
// tenant, and the GPU type limits; a job that is not heterogeneous, and
// a component that does not follow the last one, start again.
func TestHeterogeneousJobs(t *testing.T) {
	data := readExampleData(t)
	interactive := func(gpus, off int) map[string]any {
		return map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": fmt.Sprintf("gres/gpu:%d", gpus), "het_job_offset": off}
	}
	erin := func(gpus, off int) map[string]any {
		return map[string]any{"user_name": "erin", "tres_per_job": fmt.Sprintf("gres/gpu:a100:%d", gpus), "het_job_offset": off}
	}
	a100 := func(off int) map[string]any {
		return map[string]any{"user_name": "alice", "tres_per_job": "gres/gpu:a100:20", "het_job_offset": off}
	}
	steps := []step{
		{name: "2+2: first", write: data, job: interactive(2, 0)},
		{name: "2+2: second", job: interactive(2, 1)},
		{name: "1+1: first", job: interactive(1, 0)},
		{name: "1+1: second", job: interactive(1, 1)},
		{name: "1+1+1: third", job: interactive(1, 2)},
		{name: "not heterogeneous after one", job: map[string]any{"user_name": "alice", "partition": "interactive", "tres_per_job": "gres/gpu:2"}},
		{name: "a component out of order starts again", job: interactive(2, 3)},
		{name: "tenant: first", job: erin(20, 0)},
		{name: "tenant: second", job: erin(20, 1)},
		{name: "type: first", job: a100(0)},
		{name: "type: second", job: a100(1)},
		{name: "another user's component", job: erin(20, 1)},
	}
	res := runSteps(t, "gpu", steps)
	het := func(total, before int) string {
		return fmt.Sprintf("this heterogeneous job asks for %d (%d in its earlier components, %d in this one)", total, before, total-before)
	}
	checkOutcomes(t, res, map[string]outcome{
		"2+2: first":                            {rcOK, ""},
		"2+2: second":                           {rcPolicy, "strata: class interactive allows at most 2 GPUs per job; " + het(4, 2)},
		"1+1: first":                            {rcOK, ""},
		"1+1: second":                           {rcOK, ""},
		"1+1+1: third":                          {rcPolicy, "strata: class interactive allows at most 2 GPUs per job; " + het(3, 2)},
		"not heterogeneous after one":           {rcOK, ""},
		"a component out of order starts again": {rcOK, ""},
		"tenant: first":                         {rcOK, ""},
		"tenant: second":                        {rcPolicy, "strata: tenant globex may use at most 32 GPUs; " + het(40, 20)},
		"type: first":                           {rcOK, ""},
		"type: second":                          {rcPolicy, "strata: tenant acme may use at most 32 a100 GPUs; " + het(40, 20)},
		"another user's component":              {rcOK, ""},
	})
}

// A change of a job (scontrol update) is checked as the job it would
// leave: each field the change sets, else the job's own. A change of
// nothing the rules read, a change by root, and a job outside the policy
// pass.
func TestModify(t *testing.T) {
	data := readExampleData(t)
	rec := func(fields map[string]any) map[string]any {
		r := map[string]any{"user_name": "alice", "user_id": 26002, "job_id": 77, "name": "test", "account": "acme-llm",
			"partition": "interactive", "qos": "interactive", "time_limit": 60, "tres_per_job": "gres/gpu:1", "min_nodes": 1, "max_nodes": 1}
		for k, v := range fields {
			r[k] = v
		}
		return r
	}
	root := 0
	cases := []struct {
		name string
		s    step
		want outcome
	}{
		{"a time limit within max_time", step{job: map[string]any{"time_limit": 90}, rec: rec(nil)}, outcome{rcOK, ""}},
		{"a time limit above max_time", step{job: map[string]any{"time_limit": 900}, rec: rec(nil)},
			outcome{rcTimeLimit, "strata: class interactive allows at most 12:00:00; this job asks for 15:00:00"}},
		{"more GPUs than the class allows", step{job: map[string]any{"tres_per_job": "gres/gpu:4"}, rec: rec(nil)},
			outcome{rcPolicy, "strata: class interactive allows at most 2 GPUs per job; this job asks for 4"}},
		{"more GPUs per node on more nodes", step{job: map[string]any{"tres_per_node": "gres/gpu:1", "min_nodes": 3, "max_nodes": 3},
			rec: rec(map[string]any{"tres_per_job": nil})}, outcome{rcPolicy, "this job asks for 3"}},
		{"the QOS of another class", step{job: map[string]any{"qos": "train"}, rec: rec(nil)},
			outcome{rcInvalidQOS, "strata: the QOS of a job is its class, interactive"}},
		{"a class by comment, the QOS left as it was", step{job: map[string]any{"comment": "strata:class=train"}, rec: rec(nil)},
			outcome{rcInvalidQOS, "strata: the QOS of a job is its class, train (from --comment)"}},
		{"a class by comment in the wrong partition", step{job: map[string]any{"comment": "strata:class=train", "qos": "train"}, rec: rec(nil)},
			outcome{rcPartition, "strata: class train runs in partition gpu, not interactive"}},
		{"an account the user is no member of", step{job: map[string]any{"account": "acme-llm"},
			rec: rec(map[string]any{"user_name": "carol", "account": "acme-vision"})}, outcome{rcAccount, "strata: user carol is not a member of account acme-llm"}},
		// slurmctld's job record carries the owner's uid, not the name (seen on 24.11 and
		// 26.05): membership is then Slurm's association check, the class rules still hold.
		{"a record without the owner's name: a time limit", step{job: map[string]any{"time_limit": 90},
			rec: rec(map[string]any{"user_name": nil})}, outcome{rcOK, ""}},
		{"a record without the owner's name: the QOS of another class", step{job: map[string]any{"qos": "train"},
			rec: rec(map[string]any{"user_name": nil})}, outcome{rcInvalidQOS, "strata: the QOS of a job is its class, interactive"}},
		{"a change of nothing the rules read", step{job: map[string]any{"nice": 10}, rec: rec(map[string]any{"tres_per_job": "gres/gpu:9"})}, outcome{rcOK, ""}},
		{"a change by root", step{job: map[string]any{"tres_per_job": "gres/gpu:9"}, rec: rec(nil), modifyUID: &root}, outcome{rcOK, ""}},
		{"a job outside the policy", step{job: map[string]any{"tres_per_job": "gres/gpu:99"}, rec: rec(map[string]any{"account": "testbed"})}, outcome{rcOK, ""}},
		{"train on more whole nodes, --exclusive unknown", step{job: map[string]any{"min_nodes": 4, "max_nodes": 4},
			rec: rec(map[string]any{"partition": "gpu", "qos": "train", "comment": "strata:class=train", "tres_per_job": nil})}, outcome{rcOK, ""}},
		{"train on several nodes, not whole", step{job: map[string]any{"min_nodes": 2, "max_nodes": 2, "shared": 1},
			rec: rec(map[string]any{"partition": "gpu", "qos": "train", "comment": "strata:class=train", "tres_per_job": nil})},
			outcome{rcPolicy, "strata: class train runs jobs on several nodes on whole nodes only"}},
	}
	steps := []step{{name: "data", write: data}}
	want := map[string]outcome{}
	for _, c := range cases {
		c.s.name = c.name
		for k, v := range c.s.rec {
			if v == nil {
				delete(c.s.rec, k)
			}
		}
		steps = append(steps, c.s)
		want[c.name] = c.want
	}
	checkOutcomes(t, runSteps(t, "gpu", steps), want)
}
