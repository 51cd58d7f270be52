package templates

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/duration"
	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// ParamError is a parameter value Render refuses: which parameter, which
// rule, and what to give instead. No byte of the value is quoted in it.
type ParamError struct {
	// Param is the parameter's name.
	Param string
	// Rule is the rule the value breaks: "unknown" (no such parameter),
	// "required", "length", "integer", "min", "max", "enum", "pattern",
	// "path" (not absolute, or with ".."), "root" (not under a root),
	// "symlink" (a link leads outside the roots).
	Rule string
	// Msg says what is wrong and what to give.
	Msg string
}

// Error returns "parameter <name>: <message>".
func (e *ParamError) Error() string { return "parameter " + e.Param + ": " + e.Msg }

// maxValue bounds one value: a parameter is a count, a choice, a name or
// a path, never a document.
const maxValue = 4096

// check checks one value of p. resolve says whether to resolve a path's
// symbolic links on this host (Render does; a file's defaults are checked
// as written). It returns the value the job gets: a path cleaned and
// resolved.
func (p Param) check(v string, resolve func(string) (string, error)) (string, *ParamError) {
	fail := func(rule, format string, args ...any) (string, *ParamError) {
		return "", &ParamError{Param: p.Name, Rule: rule, Msg: fmt.Sprintf(format, args...)}
	}
	if len(v) > maxValue || strings.IndexByte(v, 0) >= 0 {
		return fail("length", "give at most %d bytes, without NUL", maxValue)
	}
	switch p.Type {
	case Integer:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fail("integer", "give a whole number")
		}
		if p.Min != nil && n < *p.Min {
			return fail("min", "give at least %d", *p.Min)
		}
		if p.Max != nil && n > *p.Max {
			return fail("max", "give at most %d", *p.Max)
		}
		return strconv.FormatInt(n, 10), nil
	case Enum:
		if !slices.Contains(p.Values, v) {
			return fail("enum", "choose one of %s", strings.Join(p.Values, ", "))
		}
		return v, nil
	case String:
		re, err := compilePattern(p.Pattern)
		if err != nil || !re.MatchString(v) {
			return fail("pattern", "give a value that matches %s", p.Pattern)
		}
		return v, nil
	case Path:
		return p.checkPath(v, resolve)
	}
	return fail("type", "the parameter has no type")
}

func (p Param) checkPath(v string, resolve func(string) (string, error)) (string, *ParamError) {
	fail := func(rule, format string, args ...any) (string, *ParamError) {
		return "", &ParamError{Param: p.Name, Rule: rule, Msg: fmt.Sprintf(format, args...)}
	}
	roots := strings.Join(p.Roots, ", ")
	if !filepath.IsAbs(v) {
		return fail("path", "give an absolute path under %s", roots)
	}
	for _, part := range strings.Split(v, "/") {
		if part == ".." {
			return fail("path", "give a path without '..', under %s", roots)
		}
	}
	clean := filepath.Clean(v)
	if !under(clean, p.Roots) {
		return fail("root", "give a path under %s", roots)
	}
	if resolve == nil {
		return clean, nil
	}
	real, err := resolve(clean)
	if err != nil {
		return fail("path", "the path cannot be read: give a path under %s", roots)
	}
	realRoots := make([]string, 0, len(p.Roots))
	for _, r := range p.Roots {
		if rr, err := resolve(r); err == nil {
			realRoots = append(realRoots, rr)
		}
	}
	if !under(real, realRoots) {
		return fail("symlink", "the path leads outside %s through a symbolic link: give the real path", roots)
	}
	return real, nil
}

// under says whether path is one of roots or inside one.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// resolvePath resolves every symbolic link of path on this host: of the
// deepest part that exists, with the rest (not made yet, such as an
// output directory) appended.
func resolvePath(path string) (string, error) {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) || p == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// Render renders template name with a user's values into the job to
// submit as user. Every value is checked by its parameter's rule (every
// refused value at once, each a *ParamError, joined); a parameter left
// out gets its default. Values reach the job only as environment
// variables (STRATA_PARAM_<NAME>) and as typed options they set; the
// script is the template's, as written. With a policy ([Set.WithPolicy])
// a job on several nodes gets its class's --switches, and the job is
// checked as job_submit.lua checks it: a refusal is a *jobpolicy.Refusal,
// returned with the job it refuses.
func (s *Set) Render(name string, values map[string]string, user User) (slurmrest.JobSpec, error) {
	t, ok := s.byName[name]
	if !ok {
		return slurmrest.JobSpec{}, fmt.Errorf("template %q: %w", name, ErrUnknownTemplate)
	}
	if user.Name == "" {
		return slurmrest.JobSpec{}, errors.New("render template " + name + ": no user: a job runs as the user it is rendered for")
	}
	var errs []error
	for _, k := range sortedKeys(values) {
		if !slices.ContainsFunc(t.Parameters, func(p Param) bool { return p.Name == k }) {
			errs = append(errs, &ParamError{Param: k, Rule: "unknown", Msg: "template " + t.Name + " has no such parameter"})
		}
	}
	got := make(map[string]string, len(t.Parameters))
	for _, p := range t.Parameters {
		v, given := values[p.Name]
		if !given {
			if p.Default == nil {
				errs = append(errs, &ParamError{Param: p.Name, Rule: "required", Msg: "give a value: the parameter has no default"})
				continue
			}
			v = *p.Default
		}
		v, perr := p.check(v, resolvePath)
		if perr != nil {
			errs = append(errs, perr)
			continue
		}
		got[p.Name] = v
	}
	if len(errs) > 0 {
		return slurmrest.JobSpec{}, errors.Join(errs...)
	}
	spec := t.spec(got, user)
	if t.Image != "" {
		if err := s.containers.containerize(&spec, t.Image, spec.TRESPerNode != ""); err != nil {
			return slurmrest.JobSpec{}, fmt.Errorf("render template %s: %w", t.Name, err)
		}
	}
	if s.policy != nil {
		if c, ok := s.policy.Classes[t.Class]; ok && c.Switches > 0 && spec.Nodes != "1" {
			spec.Switches = c.Switches
		}
		job := jobpolicy.FromSpec(spec)
		if spec.Container == "" {
			job.Image = t.Image // pyxis, Apptainer: out of job_submit.lua's sight
		}
		if r := s.policy.Check(user.Name, job); r != nil {
			return spec, r
		}
	}
	return spec, nil
}

// spec builds the job of checked values.
func (t *Template) spec(values map[string]string, user User) slurmrest.JobSpec {
	o := t.Options
	array := ""
	workdir := user.WorkDir
	for _, p := range t.Parameters {
		if p.Sets == "" {
			continue
		}
		v := values[p.Name]
		n, _ := strconv.Atoi(v) // checked: an integer within its bounds
		switch p.Sets {
		case "nodes":
			o.Nodes = n
		case "gpus_per_node":
			o.GPUsPerNode = n
		case "tasks_per_node":
			o.TasksPerNode = n
		case "cpus_per_task":
			o.CPUsPerTask = n
		case "memory_gb":
			o.Memory = Memory(n) * 1024
		case "time_hours":
			o.Time = duration.Duration(time.Duration(n) * time.Hour)
		case "array_size":
			array = fmt.Sprintf("0-%d", n-1)
		case "workdir":
			workdir = v
		}
	}
	if array == "" {
		array = o.Array
	}
	if array != "" && o.ArrayThrottle > 0 && !strings.Contains(array, "%") {
		array += "%" + strconv.Itoa(o.ArrayThrottle)
	}
	nodes := max(o.Nodes, 1)
	spec := slurmrest.JobSpec{
		Name: t.Name, Script: t.Script, Account: user.Account, Nodes: strconv.Itoa(nodes),
		Comment: "strata:class=" + t.Class + " strata:template=" + t.Name, TasksPerNode: o.TasksPerNode,
		CPUsPerTask: o.CPUsPerTask, MemoryPerNode: int64(o.Memory), TimeLimit: time.Duration(o.Time),
		Array: array, Exclusive: o.Exclusive, WorkDir: workdir,
	}
	if o.GPUsPerNode > 0 {
		if o.GPUType != "" {
			spec.TRESPerNode = fmt.Sprintf("gres/gpu:%s:%d", o.GPUType, o.GPUsPerNode)
		} else {
			spec.TRESPerNode = fmt.Sprintf("gres/gpu:%d", o.GPUsPerNode)
		}
	}
	if o.TaskPerGPU && o.GPUsPerNode > 0 {
		spec.TasksPerNode = o.GPUsPerNode
	}
	env := newEnv(user.Environment)
	for _, k := range sortedKeys(t.Env) {
		env.set(k, t.Env[k])
	}
	env.set("STRATA_TEMPLATE", t.Name)
	if t.Image != "" {
		env.set("STRATA_IMAGE", t.Image)
	}
	if t.Type == TypeSession {
		// STRATA_SESSION_ID and STRATA_SESSION_DIR come from the portal,
		// in user.Environment: the session exists before its job.
		env.set("STRATA_SESSION_SERVER", string(t.Server))
	}
	for _, p := range t.Parameters {
		env.set(p.EnvName(), values[p.Name])
	}
	spec.Environment = env.list()
	return spec
}

// environ is an ordered environment in which a later value of a name
// replaces the earlier.
type environ struct {
	keys []string
	vals map[string]string
}

func newEnv(base []string) *environ {
	e := &environ{vals: map[string]string{}}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		e.set(k, v)
	}
	return e
}

func (e *environ) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *environ) list() []string {
	out := make([]string, len(e.keys))
	for i, k := range e.keys {
		out[i] = k + "=" + e.vals[k]
	}
	return out
}
