package render

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// RuntimeKind heads every runtime template.
const RuntimeKind = "ServingRuntime"

// Runtime is a runtime template: how to run one kind of model server
// (etc/strata/bridge/runtimes/<name>.yaml). Command, ModelArg, Args and
// Env values may hold the placeholders of servespec.Vars.
type Runtime struct {
	// Name is the template's file name without .yaml.
	Name       string `yaml:"-"`
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Image of the server; "" makes every serve spec give its own.
	Image string `yaml:"image"`
	// Command replaces the image's entrypoint; empty keeps it.
	Command []string `yaml:"command"`
	// ModelArg points the server at the model, e.g.
	// "--model-repository={{.ModelPath}}"; it comes first of the args.
	ModelArg string            `yaml:"model_arg"`
	Args     []string          `yaml:"args"`
	Env      map[string]string `yaml:"env"`
	// Port the server listens on (HTTP), and the paths of its probes.
	Port          int    `yaml:"port"`
	ReadinessPath string `yaml:"readiness_path"`
	LivenessPath  string `yaml:"liveness_path"`
	// StartupTimeout is how long the server may take to load before the
	// liveness probe counts (a startup probe); 0: no startup probe.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// GPUs per replica when the serve spec gives none.
	GPUs int `yaml:"gpus"`
	// Tier is the GPU sharing tier of a serve spec that names none
	// ("": dedicated, whole GPUs).
	Tier string `yaml:"tier"`
	// ShmSize is the size of a memory-backed /dev/shm; "" keeps the
	// container runtime's small default.
	ShmSize string `yaml:"shm_size"`
}

var runtimeNouns = map[reflect.Type]string{reflect.TypeFor[Runtime](): "a runtime template"}

// LoadRuntime reads the runtime template name from dir (<dir>/<name>.yaml).
// An unknown name is an error that lists the templates dir has.
func LoadRuntime(dir, name string) (Runtime, error) {
	if err := servespec.CheckRuntimeName(name); err != nil {
		return Runtime{}, err
	}
	path := filepath.Join(dir, name+".yaml")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		known := Runtimes(dir)
		return Runtime{}, fmt.Errorf("unknown runtime %q: no %s (hint: the runtimes are %s)", name, path,
			strings.Join(known, ", "))
	}
	if err != nil {
		return Runtime{}, fmt.Errorf("read runtime %s: %w", name, err)
	}
	return ParseRuntime(path, name, data)
}

// Runtimes lists the names of the templates in dir, sorted; "(none)" when
// there are none.
func Runtimes(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	slices.Sort(names)
	if len(names) == 0 {
		return []string{"(none)"}
	}
	return names
}

// ParseRuntime decodes a runtime template strictly and validates it; file
// names it in diagnostics ("file:line:col: message (hint: ...)").
func ParseRuntime(file, name string, data []byte) (Runtime, error) {
	rt := Runtime{Name: name}
	if err := strictyaml.Parse(file, data, &rt, strictyaml.Options{What: "a runtime template", Nouns: runtimeNouns,
		Example: "start with apiVersion: strata/v1 and kind: " + RuntimeKind + " (see /etc/strata/bridge/runtimes/vllm.yaml)"}); err != nil {
		return Runtime{}, err
	}
	return rt, nil
}

// Validate returns every problem of rt, with paths.
func (rt *Runtime) Validate() strictyaml.Diagnostics {
	var ds strictyaml.Diagnostics
	bad := func(path, hint, format string, args ...any) {
		ds = append(ds, strictyaml.Diagnostic{Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	if rt.APIVersion != servespec.APIVersion {
		bad("apiVersion", "write apiVersion: "+servespec.APIVersion, "apiVersion %q is not supported", rt.APIVersion)
	}
	if rt.Kind != RuntimeKind {
		bad("kind", "write kind: "+RuntimeKind, "kind %q: want %s", rt.Kind, RuntimeKind)
	}
	if strings.ContainsFunc(rt.Image, func(r rune) bool { return r <= ' ' }) {
		bad("image", "write an image reference such as vllm/vllm-openai:v0.11.0", "image %q holds spaces", rt.Image)
	}
	placeholders := func(path, s string) {
		if err := servespec.CheckPlaceholders(s); err != nil {
			bad(path, "write {{ only as a placeholder", "%v", err)
		}
	}
	for i, c := range rt.Command {
		placeholders(fmt.Sprintf("command[%d]", i), c)
	}
	placeholders("model_arg", rt.ModelArg)
	for i, a := range rt.Args {
		placeholders(fmt.Sprintf("args[%d]", i), a)
	}
	for _, k := range slices.Sorted(maps.Keys(rt.Env)) {
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			bad(strictyaml.Join("env", k), "use letters, digits, '_', '-' and '.', not starting with a digit",
				"env %q is not a valid variable name", k)
		}
		placeholders(strictyaml.Join("env", k), rt.Env[k])
	}
	if rt.Port < 1 || rt.Port > 65535 {
		bad("port", "give the port the server listens on, such as 8000", "port %d is not from 1 to 65535", rt.Port)
	}
	for _, probe := range [][2]string{{"readiness_path", rt.ReadinessPath}, {"liveness_path", rt.LivenessPath}} {
		path, p := probe[0], probe[1]
		if !strings.HasPrefix(p, "/") || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' }) {
			bad(path, "give the HTTP path the server answers 200 on, such as /health", "%s %q is not an HTTP path", path, p)
		}
	}
	if rt.GPUs < 0 {
		bad("gpus", "give 0 or more", "gpus %d is negative", rt.GPUs)
	}
	if rt.Tier != "" {
		if err := servingquota.CheckTier(rt.Tier); err != nil {
			bad("tier", "use "+servingquota.TierExamples+", or leave it out for dedicated", "%v", err)
		}
	}
	if rt.ShmSize != "" {
		if q, err := resource.ParseQuantity(rt.ShmSize); err != nil || q.Sign() <= 0 {
			bad("shm_size", "write bytes with a binary unit, such as 8Gi, or leave it out", "shm_size %q is not a positive quantity", rt.ShmSize)
		}
	}
	return ds
}
