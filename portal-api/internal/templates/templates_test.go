package templates

import (
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/strictyaml/strictyamltest"
	"github.com/strata-hpc/strata/portal-api/internal/session"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (review the diff)")

// shippedDir holds the templates etc/ ships, as installed in
// /etc/strata/templates.
const shippedDir = "../../../etc/strata/templates"

// TestFiles: each testdata/*.good.yaml parses; each *.bad.yaml fails with
// the diagnostics of its .golden file, all at once, each with its line
// and column (-update rewrites them).
func TestFiles(t *testing.T) {
	strictyamltest.Files(t, "testdata", *update, func(path string) error {
		_, _, err := loadFile(path)
		return err
	})
}

var (
	policyOnce sync.Once
	policyJSON *jobpolicy.Policy
	policyErr  error
)

// examplePolicy renders the shipped example policy (etc/strata/policy.yaml)
// with strata-policy, built from this checkout, and reads the
// jobpolicy.json it writes: the data portal-api checks jobs against.
func examplePolicy(t *testing.T) *jobpolicy.Policy {
	t.Helper()
	policyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-templates-")
		if err != nil {
			policyErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "strata-policy")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/strata-hpc/strata/policy/cmd/strata-policy").CombinedOutput(); err != nil {
			policyErr = errors.New(string(out))
			return
		}
		slurmDir := filepath.Join(dir, "slurm")
		if out, err := exec.Command(bin, "render", "--policy", "../../../etc/strata/policy.yaml", "--output-dir", filepath.Join(dir, "out"),
			"--slurm-dir", slurmDir).CombinedOutput(); err != nil {
			policyErr = errors.New(string(out))
			return
		}
		policyJSON, policyErr = jobpolicy.Load(filepath.Join(slurmDir, "strata", jobpolicy.FileName))
	})
	if policyErr != nil {
		t.Fatalf("render the example policy: %v", policyErr)
	}
	return policyJSON
}

// alice is a member of acme-llm, her default account, in the example
// policy.
var alice = User{Name: "alice", WorkDir: "/shared/projects/acme/llm", Environment: []string{"HOME=/home/alice", "USER=alice"}}

// shippedValues are the values a user gives each shipped template: its
// required parameters, and for some a value other than the default.
var shippedValues = map[string]map[string]string{
	"ddp-train":  {"entrypoint": "/shared/projects/acme/llm/train.py", "config": "/shared/projects/acme/llm/llama-8b.yaml", "nodes": "4"},
	"finetune":   {"model": "/shared/models/llama-3-8b", "dataset": "/shared/projects/acme/llm/sft.jsonl", "gpus": "4"},
	"preprocess": {"input": "/shared/projects/acme/llm/raw", "output": "/shared/projects/acme/llm/shards", "shards": "100"},
	"evaluate":   {"checkpoint": "/shared/projects/acme/llm/ckpt/step-1000", "results": "/shared/projects/acme/llm/eval"},
}

// TestShipped loads the shipped templates and renders each for alice
// against the example policy: every one passes the policy as
// job_submit.lua would check it, and renders to its golden job
// (testdata/render/<name>.json; -update rewrites them).
func TestShipped(t *testing.T) {
	set, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	set = set.WithPolicy(examplePolicy(t))
	var names []string
	for _, tmpl := range set.List() {
		names = append(names, tmpl.Name)
	}
	if diff := cmp.Diff([]string{"ddp-train", "evaluate", "finetune", "jupyterlab", "preprocess", "terminal", "vscode"}, names); diff != "" {
		t.Fatalf("shipped templates (-want +got):\n%s", diff)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			spec, err := set.Render(name, shippedValues[name], alice)
			if err != nil {
				t.Fatalf("the shipped template does not pass the shipped policy: %v", err)
			}
			d := set.Policy().Decide("alice", jobpolicy.FromSpec(spec))
			if !d.Managed || d.Refusal != nil || d.Class != mustGet(t, set, name).Class || d.ClassFrom != "comment" {
				t.Errorf("policy decision %+v: want class %s from the comment, passed", d, mustGet(t, set, name).Class)
			}
			golden(t, filepath.Join("testdata", "render", name+".json"), spec)
		})
	}
}

func mustGet(t *testing.T, s *Set, name string) Template {
	t.Helper()
	tmpl, ok := s.Get(name)
	if !ok {
		t.Fatalf("no template %s", name)
	}
	return tmpl
}

func golden(t *testing.T, path string, spec slurmrest.JobSpec) {
	t.Helper()
	got, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("rendered job differs from %s (-golden +got; -update rewrites it):\n%s", path, diff)
	}
}

// TestShippedOptions: what each shipped template promises of its job.
func TestShippedOptions(t *testing.T) {
	set, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	set = set.WithPolicy(examplePolicy(t))
	render := func(name string) slurmrest.JobSpec {
		spec, err := set.Render(name, shippedValues[name], alice)
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	ddp := render("ddp-train")
	if ddp.Nodes != "4" || !ddp.Exclusive || ddp.Switches != 1 || ddp.TasksPerNode != 8 || ddp.TRESPerNode != "gres/gpu:8" {
		t.Errorf("ddp-train: nodes %s, exclusive %v, switches %d, tasks per node %d, GPUs %s; want 4 whole nodes under 1 switch, one task per GPU of 8",
			ddp.Nodes, ddp.Exclusive, ddp.Switches, ddp.TasksPerNode, ddp.TRESPerNode)
	}
	for _, v := range []string{"MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)", "MASTER_PORT=", "WORLD_SIZE=$SLURM_NTASKS",
		"RANK=$SLURM_PROCID", "LOCAL_RANK=$SLURM_LOCALID", "export MASTER_ADDR MASTER_PORT WORLD_SIZE"} {
		if !strings.Contains(ddp.Script, v) {
			t.Errorf("ddp-train's script does not set the rendezvous: no %q", v)
		}
	}
	if ft := render("finetune"); ft.Nodes != "1" || ft.TRESPerNode != "gres/gpu:4" || ft.Switches != 0 || ft.TimeLimit.Hours() != 4 {
		t.Errorf("finetune: %+v; want one node, the 4 GPUs asked for, no switches, 4 hours", ft)
	}
	if pp := render("preprocess"); pp.Array != "0-99%32" || pp.TRESPerNode != "" || pp.CPUsPerTask != 8 {
		t.Errorf("preprocess: array %q, GPUs %q, CPUs %d; want 100 CPU tasks, 32 at once, 8 CPUs each", pp.Array, pp.TRESPerNode, pp.CPUsPerTask)
	}
	if ev := render("evaluate"); ev.WorkDir != "/shared/projects/acme/llm/eval" || ev.TRESPerNode != "gres/gpu:1" {
		t.Errorf("evaluate: workdir %q, GPUs %q; want the results directory and one GPU", ev.WorkDir, ev.TRESPerNode)
	}
}

// TestValuesOnlyInEnvironment: a value that would run a command if it
// were spliced into the script reaches the job only as its environment
// variable; the script is the template's, byte for byte, and no other
// field of the job holds it.
func TestValuesOnlyInEnvironment(t *testing.T) {
	set, err := Load("testdata/inject")
	if err != nil {
		t.Fatal(err)
	}
	const evil = "$(rm -rf ~); `reboot` ${IFS}'\"\n#SBATCH --uid=0"
	spec, err := set.Render("note", map[string]string{"note": "$(rm -rf ~); "}, alice)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := mustGet(t, set, "note")
	if spec.Script != tmpl.Script {
		t.Errorf("script changed:\n%s", spec.Script)
	}
	var in []string
	for _, kv := range spec.Environment {
		if strings.Contains(kv, "rm -rf") {
			in = append(in, kv)
		}
	}
	if diff := cmp.Diff([]string{"STRATA_PARAM_NOTE=$(rm -rf ~); "}, in); diff != "" {
		t.Errorf("the value is not exactly in its variable (-want +got):\n%s", diff)
	}
	spec.Environment = nil
	b, _ := json.Marshal(spec)
	if strings.Contains(string(b), "rm -rf") {
		t.Errorf("the value is outside the environment: %s", b)
	}
	// A value with a newline is not a string '.*' matches whole.
	if _, err := set.Render("note", map[string]string{"note": evil}, alice); !isParamError(err, "note", "pattern") {
		t.Errorf("a value with a newline: %v, want a pattern error", err)
	}
}

func isParamError(err error, param, rule string) bool {
	var pe *ParamError
	return errors.As(err, &pe) && pe.Param == param && pe.Rule == rule
}

// TestParamErrors: each rule a value can break is a *ParamError naming
// the parameter and the rule, without the value; every bad value of a
// render is reported at once.
func TestParamErrors(t *testing.T) {
	root := t.TempDir()
	projects := filepath.Join(root, "projects")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(projects, "acme"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(projects, "acme", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(projects, "acme"), filepath.Join(projects, "inside")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmpl := strings.ReplaceAll(mustRead(t, "testdata/inject/note.yaml"), "/shared/projects", projects)
	if err := os.WriteFile(filepath.Join(dir, "note.yaml"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		values     map[string]string
		wantParam  string
		wantRule   string
		wantErrors int
	}{
		"unknown":       {map[string]string{"note": "x", "nodes": "2"}, "nodes", "unknown", 1},
		"required":      {map[string]string{}, "note", "required", 1},
		"not a number":  {map[string]string{"note": "x", "n": "two"}, "n", "integer", 1},
		"below min":     {map[string]string{"note": "x", "n": "0"}, "n", "min", 1},
		"above max":     {map[string]string{"note": "x", "n": "5"}, "n", "max", 1},
		"relative":      {map[string]string{"note": "x", "out": "acme"}, "out", "path", 1},
		"dot-dot":       {map[string]string{"note": "x", "out": projects + "/acme/../../outside"}, "out", "path", 1},
		"outside":       {map[string]string{"note": "x", "out": outside}, "out", "root", 1},
		"a prefix only": {map[string]string{"note": "x", "out": projects + "-old"}, "out", "root", 1},
		"symlink out":   {map[string]string{"note": "x", "out": projects + "/acme/escape/x"}, "out", "symlink", 1},
		"NUL":           {map[string]string{"note": "a\x00b"}, "note", "length", 1},
		"all at once":   {map[string]string{"n": "9", "out": "/etc", "what": "x"}, "what", "unknown", 4},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := set.Render("note", tc.values, alice)
			if !isParamError(err, tc.wantParam, tc.wantRule) {
				t.Fatalf("error %v; want parameter %s breaking rule %s", err, tc.wantParam, tc.wantRule)
			}
			if n := len(strings.Split(err.Error(), "\n")); n != tc.wantErrors {
				t.Errorf("%d problems, want %d:\n%v", n, tc.wantErrors, err)
			}
			for _, v := range tc.values {
				if len(v) > 2 && strings.Contains(err.Error(), v) && !strings.HasPrefix(v, projects) {
					t.Errorf("the error quotes the value %q: %v", v, err)
				}
			}
		})
	}
	// A link that stays under the roots is followed, and the job gets the
	// real path.
	spec, err := set.Render("note", map[string]string{"note": "x", "out": projects + "/inside"}, alice)
	if err != nil || spec.WorkDir != filepath.Join(projects, "acme") {
		t.Errorf("a link inside the roots: workdir %q, %v; want %s", spec.WorkDir, err, filepath.Join(projects, "acme"))
	}
	if _, err := set.Render("nope", nil, alice); !errors.Is(err, ErrUnknownTemplate) {
		t.Errorf("an unknown template: %v", err)
	}
	if _, err := set.Render("note", map[string]string{"note": "x"}, User{}); err == nil || !strings.Contains(err.Error(), "no user") {
		t.Errorf("no user: %v", err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefusal: with the policy attached, a job job_submit.lua would refuse
// is refused before submission with the plugin's code, message and line.
func TestRefusal(t *testing.T) {
	set, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	set = set.WithPolicy(examplePolicy(t))
	// carol's only project, acme-vision, may use batch and interactive.
	_, err = set.Render("ddp-train", shippedValues["ddp-train"], User{Name: "carol"})
	var r *jobpolicy.Refusal
	if !errors.As(err, &r) || r.Code != "ESLURM_INVALID_QOS" || r.Line == 0 ||
		!strings.HasPrefix(r.Message, "strata: account acme-vision may not use class train; it may use batch, interactive (policy.yaml:") {
		t.Errorf("carol's ddp-train: %v; want the plugin's refusal with its policy line", err)
	}
	// dave is a viewer of acme-llm.
	_, err = set.Render("finetune", shippedValues["finetune"], User{Name: "dave", Account: "acme-llm"})
	if !errors.As(err, &r) || r.Code != "ESLURM_INVALID_ACCOUNT" || !strings.Contains(r.Message, "a viewer cannot submit jobs") {
		t.Errorf("dave's finetune: %v; want a viewer's refusal", err)
	}
}

// TestLoad: a name two files give is refused at the second; a missing
// directory is fs.ErrNotExist; an empty one is an empty set.
func TestLoad(t *testing.T) {
	_, err := Load("testdata/dup")
	if err == nil || !strings.Contains(err.Error(), "testdata/dup/b.yaml:3:7: template note is also in testdata/dup/a.yaml") {
		t.Errorf("two files of one name: %v", err)
	}
	if _, err := Load("testdata/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
	s, err := Load(t.TempDir())
	if err != nil || len(s.List()) != 0 {
		t.Errorf("an empty directory: %v, %v", s, err)
	}
}

// TestShippedSessions: each session template starts its server with the
// proxy's base path, hands the proxy the secret it will send, and writes
// the connection file whole and for the user only.
func TestShippedSessions(t *testing.T) {
	set, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		server session.Kind
		has    []string
	}{
		"jupyterlab": {session.JupyterLab, []string{`export JUPYTER_TOKEN="$secret"`, `--ServerApp.base_url="$base"`, `--ip="$addr"`, `--port="$port"`}},
		"terminal":   {session.TTYD, []string{`--base-path "${base%/}"`, `--credential "strata:$secret"`, `--interface "$addr"`, "--writable"}},
		"vscode":     {session.CodeServer, []string{`export HASHED_PASSWORD="$secret"`, `--bind-addr "$addr:$port"`, "--auth password"}},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := mustGet(t, set, name)
			if tmpl.Type != TypeSession || tmpl.Server != want.server || tmpl.Class != "interactive" {
				t.Errorf("type %s, server %s, class %s; want a %s session of the interactive class", tmpl.Type, tmpl.Server, tmpl.Class, want.server)
			}
			common := []string{`base="/v1/sessions/$STRATA_SESSION_ID/proxy/"`, "umask 077", `chmod 600 "$tmp"`, `mv -f "$tmp" "$conn"`,
				`conn="$STRATA_SESSION_DIR/` + session.FileName + `"`, `"$STRATA_SESSION_SERVER"`}
			for _, s := range append(common, want.has...) {
				if !strings.Contains(tmpl.Script, s) {
					t.Errorf("the script has no %s", s)
				}
			}
			spec, err := set.Render(name, nil, alice)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(spec.Environment, "STRATA_SESSION_SERVER="+string(want.server)) {
				t.Errorf("environment %v has no STRATA_SESSION_SERVER", spec.Environment)
			}
		})
	}
}

// TestShippedScripts: every shipped script parses (bash -n), and passes
// shellcheck where it is installed, at warning level: its "info" notes
// include SC2016 for the '...' a script hands to srun bash -c on purpose.
func TestShippedScripts(t *testing.T) {
	set, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	shellcheck, _ := exec.LookPath("shellcheck")
	for _, tmpl := range set.List() {
		t.Run(tmpl.Name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "script.sh")
			if err := os.WriteFile(path, []byte(tmpl.Script), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
				t.Errorf("bash -n: %v\n%s", err, out)
			}
			if shellcheck == "" {
				return
			}
			if out, err := exec.Command(shellcheck, "-s", "bash", "-S", "warning", path).CombinedOutput(); err != nil {
				t.Errorf("shellcheck: %v\n%s", err, out)
			}
		})
	}
}
