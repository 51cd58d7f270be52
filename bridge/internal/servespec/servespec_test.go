package servespec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/strictyaml"
)

// TestGoodFiles: every testdata/*.good.yaml parses to the spec written out
// here by hand.
func TestGoodFiles(t *testing.T) {
	want := map[string]Spec{
		"minimal.good.yaml": {Name: "llama-ft", ModelPath: "/shared/projects/llm/checkpoints/final"},
		"vllm-autoscale.good.yaml": {
			APIVersion: "strata/v1", Kind: "ServeSpec",
			Name: "llama-ft-70b", ModelPath: "/shared/projects/llm/checkpoints/llama-ft-70b", Runtime: "vllm",
			GPUs: 2, CPU: "8", Memory: "128Gi",
			// The target was left out: Parse fills in 80.
			Autoscale: &Autoscale{MinReplicas: 1, MaxReplicas: 4, TargetCPUPercent: 80},
			Args:      []string{"--max-model-len=8192", "--served-model-name={{.Name}}"},
			Env:       map[string]string{"VLLM_LOGGING_LEVEL": "INFO", "HF_HUB_OFFLINE": "1"},
		},
		"mig.good.yaml": {
			Name: "embedder-mig", ModelPath: "/shared/tenants/acme/models/embed", Runtime: "vllm",
			Tier: "mig-1g.10gb", GPUs: 1, Replicas: 3,
		},
		"generic-flow.good.yaml": {
			Name: "embedder", ModelPath: "/shared/tenants/bio/models/embed.onnx", Runtime: "generic",
			Image: "registry.example.org/bio/embed-server:2.1", Replicas: 3, CPU: "500m", Memory: "2Gi",
			// 4 is a number in YAML, and a string as an argument.
			Args: []string{"--threads", "4"},
			// The alias *mem is the anchored 2Gi.
			Env: map[string]string{"MODEL_FILE": "{{.ModelPath}}", "CACHE_SIZE": "2Gi"},
		},
	}
	files, err := filepath.Glob("testdata/*.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("%d good files, %d expectations: add the new file's spec to the table", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[filepath.Base(f)]
			if !ok {
				t.Fatal("no expectation")
			}
			if diff := cmp.Diff(&w, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadFiles: every testdata/*.bad.yaml fails with exactly the
// diagnostics its "# want: line:col: message" comments list, in order.
// Each file shows one kind of mistake; together they cover unknown keys
// (with and without a suggestion), wrong types, invalid values, missing
// keys, YAML syntax, a second document, a repeated key, merge keys and an
// empty file.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					want = append(want, f+":"+w)
				}
			}
			if len(want) == 0 {
				t.Fatal(`the file lists no "# want:" diagnostics`)
			}
			spec, err := Parse(f, data)
			if err == nil {
				t.Fatalf("accepted: %+v", spec)
			}
			if spec != nil {
				t.Errorf("a spec came back with the error")
			}
			var ds strictyaml.Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("error %T is not Diagnostics: %v", err, err)
			}
			if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateInCode: a spec built in code (from a job comment) is checked
// like a file, with paths instead of positions.
func TestValidateInCode(t *testing.T) {
	for name, tc := range map[string]struct {
		spec Spec
		want []string
	}{
		"valid": {spec: Spec{Name: "m", ModelPath: "/shared/m"}},
		"name from a comment with capitals": {
			spec: Spec{Name: "MyModel", ModelPath: "/shared/m"},
			want: []string{`name: name "MyModel" is not a DNS-1035 label (hint: ` + nameHint + `)`},
		},
		"no model": {
			spec: Spec{Name: "m"},
			want: []string{"model: no model (hint: add model: the absolute path of the trained model on the shared file system)"},
		},
		"autoscale built in code without cpu": {
			spec: Spec{Name: "m", ModelPath: "/shared/m", Autoscale: &Autoscale{MinReplicas: 1, MaxReplicas: 2}},
			want: []string{"autoscale: autoscale works on CPU utilisation, and the spec gives no cpu " +
				"(hint: add cpu: the CPU request per replica, which the utilisation is a percentage of)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, d := range tc.spec.Validate() {
				got = append(got, d.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for name, tc := range map[string]struct {
		name    string
		wantErr string
	}{
		"plain":                {name: "llama-ft"},
		"52 characters":        {name: strings.Repeat("a", 52)},
		"53 characters":        {name: strings.Repeat("a", 53), wantErr: "53 characters, more than 52"},
		"starts with a digit":  {name: "7b-chat", wantErr: "not a DNS-1035 label"},
		"ends with a dash":     {name: "chat-", wantErr: "not a DNS-1035 label"},
		"dots are not allowed": {name: "llama.ft", wantErr: "not a DNS-1035 label"},
		"empty":                {name: "", wantErr: "no name"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckName(tc.name)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestFromComment(t *testing.T) {
	for name, tc := range map[string]struct {
		comment string
		want    string // "" for no marker
	}{
		"alone":                         {comment: "strata:serve=llama-ft", want: "llama-ft"},
		"after a class, comma":          {comment: "strata:class=train,strata:serve=llama-ft", want: "llama-ft"},
		"comma and space":               {comment: "strata:class=train, strata:serve=llama-ft", want: "llama-ft"},
		"among words":                   {comment: "final run of sweep 3 strata:serve=llama-ft please", want: "llama-ft"},
		"tab separated":                 {comment: "x\tstrata:serve=m1", want: "m1"},
		"the first one wins":            {comment: "strata:serve=a strata:serve=b", want: "a"},
		"an empty value is skipped":     {comment: "strata:serve= strata:serve=b", want: "b"},
		"empty value only":              {comment: "strata:serve=", want: ""},
		"no marker":                     {comment: "strata:class=train", want: ""},
		"no comment":                    {comment: "", want: ""},
		"a prefix of the key":           {comment: "strata:server=x", want: ""},
		"marker inside a word":          {comment: "xstrata:serve=m", want: ""},
		"without value part":            {comment: "strata:serve", want: ""},
		"returned as written":           {comment: "strata:serve=My_Model", want: "My_Model"},
		"semicolons are not separators": {comment: "strata:serve=a;b", want: "a;b"},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := FromComment(tc.comment)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("FromComment(%q) = %q, %v; want %q", tc.comment, got, ok, tc.want)
			}
		})
	}
}

func TestReplicas(t *testing.T) {
	for name, tc := range map[string]struct {
		spec     Spec
		min, max int
	}{
		"left out":  {spec: Spec{}, min: 1, max: 1},
		"fixed":     {spec: Spec{Replicas: 3}, min: 3, max: 3},
		"autoscale": {spec: Spec{Autoscale: &Autoscale{MinReplicas: 2, MaxReplicas: 5}}, min: 2, max: 5},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.spec.MinReplicas(); got != tc.min {
				t.Errorf("MinReplicas = %d, want %d", got, tc.min)
			}
			if got := tc.spec.MaxReplicas(); got != tc.max {
				t.Errorf("MaxReplicas = %d, want %d", got, tc.max)
			}
		})
	}
}

func TestApplyDefaults(t *testing.T) {
	d := Defaults{Runtime: "generic", Replicas: 2, GPUs: 1}
	for name, tc := range map[string]struct {
		spec, want Spec
	}{
		"all left out": {spec: Spec{}, want: Spec{Runtime: "generic", Replicas: 2, GPUs: 1}},
		"all given": {
			spec: Spec{Runtime: "vllm", Replicas: 3, GPUs: 4},
			want: Spec{Runtime: "vllm", Replicas: 3, GPUs: 4},
		},
		"autoscale keeps replicas 0 and gets a target": {
			spec: Spec{Autoscale: &Autoscale{MinReplicas: 1, MaxReplicas: 2}},
			want: Spec{Runtime: "generic", GPUs: 1, Autoscale: &Autoscale{MinReplicas: 1, MaxReplicas: 2, TargetCPUPercent: 80}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.spec.ApplyDefaults(d)
			if diff := cmp.Diff(tc.want, tc.spec); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	v := Vars{ModelPath: "/model", Name: "llama-ft", Version: "job-42", Port: 8000, GPUs: 2}
	for name, tc := range map[string]struct {
		in, want, wantErr string
	}{
		"none":          {in: "--port=8000", want: "--port=8000"},
		"model":         {in: "--model={{.ModelPath}}", want: "--model=/model"},
		"spaces inside": {in: "{{ .Name }}", want: "llama-ft"},
		"several":       {in: "{{.Name}}-{{.Version}}:{{.Port}}/{{.GPUs}}", want: "llama-ft-job-42:8000/2"},
		"unknown":       {in: "--model={{.Model}}", wantErr: "unknown placeholder {{.Model}}"},
		"no dot":        {in: "{{ModelPath}}", wantErr: "unknown placeholder {{ModelPath}}"},
		"template code": {in: `{{if .GPUs}}x{{end}}`, wantErr: "unknown placeholder {{if .GPUs}}"},
		"not closed":    {in: "--model={{.ModelPath", wantErr: "without a closing }}"},
		"lone braces":   {in: "json={}", want: "json={}"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Expand(tc.in, v)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}
