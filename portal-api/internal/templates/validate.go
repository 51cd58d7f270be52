package templates

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/strictyaml"
	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// Memory is a memory size per node in MiB, written as Slurm's --mem is:
// "64G", "512M", "1T", "2048" (megabytes).
type Memory int64

var memoryRE = regexp.MustCompile(`^([0-9]+)([KMGT]?)$`)

// UnmarshalYAMLScalar reads a size.
func (m *Memory) UnmarshalYAMLScalar(text string) error {
	v := memoryRE.FindStringSubmatch(text)
	if v == nil {
		return &hinted{fmt.Sprintf("%q is not a memory size", text), "write a number and K, M, G or T, such as 64G (a bare number is megabytes)"}
	}
	n, err := strconv.ParseInt(v[1], 10, 64)
	if err != nil || n > 1<<40 {
		return &hinted{fmt.Sprintf("%s is larger than any node", text), "give the memory of one node, such as 512G"}
	}
	switch v[2] {
	case "K":
		n = (n + 1023) / 1024
	case "G":
		n *= 1024
	case "T":
		n *= 1024 * 1024
	}
	*m = Memory(n)
	return nil
}

// hinted is an error with the hint strictyaml shows beside it.
type hinted struct{ msg, hint string }

func (e *hinted) Error() string { return e.msg }
func (e *hinted) Hint() string  { return e.hint }

// YAMLKind names memory sizes in messages.
func (*Memory) YAMLKind() string { return "a memory size" }

// MarshalText writes the size in MiB as Slurm reads it ("65536M").
func (m Memory) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%dM", int64(m))), nil }

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	paramRE    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	envRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	gpuTypeRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	arrayRE    = regexp.MustCompile(`^[0-9]+(-[0-9]+(:[0-9]+)?)?(,[0-9]+(-[0-9]+(:[0-9]+)?)?)*(%[0-9]+)?$`)
	classNameR = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) // what a comment can name (job_submit.lua)
)

// Validate returns every problem of t, each at the path of its key.
func (t *Template) Validate() strictyaml.Diagnostics {
	var ds strictyaml.Diagnostics
	bad := func(path, hint, format string, args ...any) {
		ds = append(ds, strictyaml.Diagnostic{Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	if t.APIVersion != APIVersion {
		bad("apiVersion", "write apiVersion: "+APIVersion, "apiVersion %q is not supported", t.APIVersion)
	}
	if t.Kind != Kind {
		bad("kind", "write kind: "+Kind, "kind %q is not a job template", t.Kind)
	}
	if !nameRE.MatchString(t.Name) {
		bad("name", "use lower-case letters, digits, '-' and '_', at most 63", "%q is not a template name", t.Name)
	}
	switch t.Type {
	case TypeBatch:
		if t.Server != "" {
			bad("server", "remove server: only a session template starts a server", "a batch template has no server")
		}
		if t.IdleLimit != 0 {
			bad("idle_limit", "remove idle_limit: only a session's server is judged idle by the portal", "a batch template has no idle limit")
		}
	case TypeSession:
		if !slices.Contains(session.Kinds, t.Server) {
			bad("server", "write server: jupyterlab, ttyd or code-server", "%q is not a session server", t.Server)
		}
		if t.IdleLimit != 0 && t.IdleLimit.Std() < time.Minute {
			bad("idle_limit", "give at least 1m, such as 2h", "idle limit %s is too short", t.IdleLimit.Std())
		}
	default:
		bad("type", "write type: batch or type: session", "%q is not a template type", t.Type)
	}
	if !classNameR.MatchString(t.Class) {
		bad("class", "name a workload class of the policy", "%q is not a class name", t.Class)
	}
	if t.Image != "" && !ValidImage(t.Image) {
		bad("image", "write an image reference such as registry.example.com/acme/train:2.1 (lower case, a tag or @sha256: digest)", "%q is not an image reference", t.Image)
	}
	if !strings.HasPrefix(t.Script, "#!") {
		bad("script", "start the script with its interpreter, such as #!/bin/bash", "the script has no #! line")
	}
	for _, k := range sortedKeys(t.Env) {
		switch {
		case !envRE.MatchString(k):
			bad("env."+k, "use letters, digits and '_'", "%q is not an environment variable name", k)
		case strings.HasPrefix(k, "STRATA_"), strings.HasPrefix(k, "SLURM_"):
			bad("env."+k, "STRATA_ and SLURM_ variables are the portal's and Slurm's: choose another name", "%s is reserved", k)
		}
	}
	t.validateOptions(bad)
	seen := map[string]int{}
	sets := map[string]int{}
	for i, p := range t.Parameters {
		path := fmt.Sprintf("parameters[%d]", i)
		if j, dup := seen[p.Name]; dup {
			bad(path+".name", "give each parameter its own name", "parameter %s is also parameters[%d]", p.Name, j)
		}
		seen[p.Name] = i
		if !paramRE.MatchString(p.Name) {
			bad(path+".name", "use a lower-case letter, then letters, digits and '_', at most 32", "%q is not a parameter name", p.Name)
		}
		p.validate(path, bad)
		if p.Sets == "" {
			continue
		}
		opt, ok := Settable[p.Sets]
		switch {
		case !ok:
			bad(path+".sets", "a parameter may set "+strings.Join(sortedKeys(Settable), ", "), "%q is not an option a parameter sets", p.Sets)
		case opt.Type != p.Type:
			bad(path+".sets", fmt.Sprintf("make it a parameter of type %s", opt.Type), "%s (%s) is set by a parameter of type %s, not %s", p.Sets, opt.Doc, opt.Type, p.Type)
		case opt.Type == Integer && (p.Min == nil || *p.Min < 1 || p.Max == nil):
			bad(path, "give it min: 1 or more, and a max", "parameter %s sets %s: it needs bounds", p.Name, p.Sets)
		}
		if j, dup := sets[p.Sets]; dup {
			bad(path+".sets", "let one parameter set it", "%s is also set by parameters[%d]", p.Sets, j)
		}
		sets[p.Sets] = i
	}
	if _, ok := sets["array_size"]; ok && t.Options.Array != "" {
		bad("options.array", "leave out options.array: the parameter sets it", "the array is set by a parameter and here")
	}
	if _, ok := sets["tasks_per_node"]; ok && t.Options.TaskPerGPU {
		bad("options.task_per_gpu", "leave out one of them", "tasks per node are set by a parameter and by task_per_gpu")
	}
	return ds
}

func (t *Template) validateOptions(bad func(path, hint, format string, args ...any)) {
	o := t.Options
	for _, n := range []struct {
		key string
		v   int
	}{{"nodes", o.Nodes}, {"gpus_per_node", o.GPUsPerNode}, {"tasks_per_node", o.TasksPerNode}, {"cpus_per_task", o.CPUsPerTask}, {"array_throttle", o.ArrayThrottle}} {
		if n.v < 0 {
			bad("options."+n.key, "give 0 or more", "%s is negative", n.key)
		}
	}
	if o.GPUType != "" && !gpuTypeRE.MatchString(o.GPUType) {
		bad("options.gpu_type", "write the GPU type as gres.conf names it, such as h100", "%q is not a GPU type", o.GPUType)
	}
	if o.TaskPerGPU && o.TasksPerNode > 0 {
		bad("options.task_per_gpu", "leave out one of them", "tasks_per_node and task_per_gpu both set the tasks per node")
	}
	if o.Array != "" && !arrayRE.MatchString(o.Array) {
		bad("options.array", `write indices as sbatch --array takes them: "0-15", "1,3,5", "0-99%8"`, "%q is not an array", o.Array)
	}
	if o.Time < 0 {
		bad("options.time", "give a positive duration", "time is negative")
	}
}

func (p Param) validate(path string, bad func(path, hint, format string, args ...any)) {
	only := func(key string, given bool, typ ParamType) {
		if given && p.Type != typ {
			bad(path+"."+key, fmt.Sprintf("%s is for %s parameters: remove it", key, typ), "%s parameter has no %s", article(string(p.Type)), key)
		}
	}
	only("min", p.Min != nil, Integer)
	only("max", p.Max != nil, Integer)
	only("values", p.Values != nil, Enum)
	only("pattern", p.Pattern != "", String)
	only("roots", p.Roots != nil, Path)
	switch p.Type {
	case Integer:
		if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
			bad(path+".max", "make max at least min", "max %d is below min %d", *p.Max, *p.Min)
		}
	case Enum:
		if len(p.Values) == 0 {
			bad(path+".values", "list the values a user may choose", "an enum needs values")
		}
		vs := map[string]bool{}
		for i, v := range p.Values {
			if vs[v] {
				bad(fmt.Sprintf("%s.values[%d]", path, i), "list each value once", "%q is listed twice", v)
			}
			vs[v] = true
		}
	case String:
		if p.Pattern == "" {
			bad(path, `add a pattern the whole value must match, such as '[A-Za-z0-9_.\-]{1,64}'`, "a string parameter needs a pattern")
		} else if _, err := regexp.Compile(p.Pattern); err != nil {
			bad(path+".pattern", "write an RE2 regular expression", "%v", err)
		} else if err := browserPattern(p.Pattern); err != nil {
			bad(path+".pattern", "write it as Go and a browser's <input pattern> (the v flag) both read it", "%v", err)
		}
	case Path:
		if len(p.Roots) == 0 {
			bad(path+".roots", "list the directories the path must be under, such as /shared/projects", "a path parameter needs roots")
		}
		for i, r := range p.Roots {
			if !filepath.IsAbs(r) || filepath.Clean(r) != r || r == "/" {
				bad(fmt.Sprintf("%s.roots[%d]", path, i), "write an absolute, clean directory other than /", "%q is not a root a path may be under", r)
			}
		}
	default:
		bad(path+".type", "use integer, enum, string or path", "%q is not a parameter type", p.Type)
		return
	}
	if p.Default != nil {
		if _, perr := p.check(*p.Default, nil); perr != nil {
			bad(path+".default", "give a default the parameter accepts", "default %q: %s", *p.Default, perr.Msg)
		}
	}
}

// article puts "a" or "an" before a word.
func article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an " + w
	}
	return "a " + w
}

// compilePattern compiles a string parameter's pattern to match the whole
// value.
func compilePattern(p string) (*regexp.Regexp, error) { return regexp.Compile(`^(?:` + p + `)$`) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
