// Package templates reads the job templates admins lock down for the
// portal, one YAML file each in /etc/strata/templates/, and renders a
// template with a user's parameter values into the job the portal submits
// through slurmrestd as that user.
//
// A template fixes everything but its typed parameters: the workload
// class, the sbatch options (nodes, GPUs per node, tasks, CPUs, memory,
// time, array, --exclusive) and the script. A parameter is an integer with
// bounds, one of a list of values, a string that matches a pattern, or a
// path under allowed roots. A value reaches the job only as an environment
// variable, STRATA_PARAM_<NAME>, never as text of the script, so no value
// can inject shell; a parameter may also set one option (an integer sets
// --nodes, a path the working directory), typed, never as text. A job on
// several nodes gets --switches from its class's topology rule in the job
// policy (jobpolicy.json), and with a policy attached ([Set.WithPolicy])
// Render checks the job exactly as job_submit.lua will, so a refusal comes
// back before submission with the plugin's message and policy line.
//
// A template may name a container image: the script then runs in it,
// with the site's runtime ([Containers], [Set.WithContainers]): pyxis or
// Apptainer from a batch script that wraps the template's, or Slurm's
// own OCI support (--container) with the script as written. The job
// policy's image allow-list of the tenant must allow the image.
//
// A template of type session also names its server (jupyterlab, ttyd or
// code-server); its script starts that server on the job's node and
// writes the session's connection file (package session) into
// $STRATA_SESSION_DIR, which the portal gives with STRATA_SESSION_ID in
// the user's environment; the job gets STRATA_SESSION_SERVER.
//
//	apiVersion: strata/v1
//	kind: JobTemplate
//	name: finetune
//	description: Fine-tune a model on the GPUs of one node.
//	type: batch
//	class: batch
//	parameters:
//	  - name: model
//	    type: path
//	    roots: [/shared/models]
//	  - name: gpus
//	    type: integer
//	    min: 1
//	    max: 8
//	    default: 8
//	    sets: gpus_per_node
//	options:
//	  time: 8h
//	image: registry.example.com/acme/train:2.1
//	script: |
//	  #!/bin/bash
//	  exec python -m finetune --model "$STRATA_PARAM_MODEL"
package templates

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/duration"
	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/strictyaml"
	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// APIVersion and Kind head every template file.
const (
	APIVersion = "strata/v1"
	Kind       = "JobTemplate"
)

// DefaultDir is where the portal reads templates from.
const DefaultDir = "/etc/strata/templates"

// MaxBytes bounds one template file.
const MaxBytes = 256 << 10

// Type is what a template starts: a batch job; interactive sessions
// (JupyterLab, a terminal) are to come as their own type.
type Type string

// The template types.
const (
	TypeBatch Type = "batch"
	// TypeSession starts a server (its Server kind) that the portal
	// reaches through its session proxy: the script writes the session's
	// connection file (package session) into $STRATA_SESSION_DIR.
	TypeSession Type = "session"
)

// ParamType is the type of a parameter's values.
type ParamType string

// The parameter types.
const (
	// Integer: a whole number, within Min and Max when given.
	Integer ParamType = "integer"
	// Enum: one of Values.
	Enum ParamType = "enum"
	// String: text that matches Pattern, whole.
	String ParamType = "string"
	// Path: an absolute path under one of Roots, after every symbolic
	// link is resolved; ".." is refused.
	Path ParamType = "path"
)

// Template is one template file.
type Template struct {
	APIVersion  string `yaml:"apiVersion" strictyaml:"required" json:"-"`
	Kind        string `yaml:"kind" strictyaml:"required" json:"-"`
	Name        string `yaml:"name" strictyaml:"required" json:"name"`
	Description string `yaml:"description" json:"description"`
	Type        Type   `yaml:"type" json:"type"`
	// Server is the server a session template starts (jupyterlab, ttyd,
	// code-server); a batch template has none.
	Server session.Kind `yaml:"server" json:"server,omitempty"`
	// IdleLimit is how long a session without GPUs may sit idle, by its
	// server's own activity, before the portal ends it (0: the cluster's
	// session_idle_limit). A session with GPUs is judged by reclaimd.
	IdleLimit duration.Duration `yaml:"idle_limit" json:"idle_limit,omitempty"`
	// Class is the workload class of the policy the job runs in.
	Class      string  `yaml:"class" strictyaml:"required" json:"class"`
	Parameters []Param `yaml:"parameters" json:"parameters"`
	Options    Options `yaml:"options" json:"options"`
	// Env are fixed environment variables of the job (NCCL settings, a
	// cache directory), beside the parameters'.
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// Image is the container image the script runs in
	// ("registry.example.com/acme/train:2.1"; "" for none), by the site's
	// container runtime ([Containers]), and only where the job policy
	// allows the tenant the image.
	Image string `yaml:"image" json:"image,omitempty"`
	// Script is the batch script, as written: no value is put into it.
	Script string `yaml:"script" strictyaml:"required" json:"script"`
	// File is the file the template was read from.
	File string `yaml:"-" json:"-"`
}

// Param is a typed parameter a user fills in.
type Param struct {
	Name        string    `yaml:"name" strictyaml:"required" json:"name"`
	Description string    `yaml:"description" json:"description,omitempty"`
	Type        ParamType `yaml:"type" strictyaml:"required" json:"type"`
	// Min and Max bound an integer (nil: no bound).
	Min *int64 `yaml:"min" json:"min,omitempty"`
	Max *int64 `yaml:"max" json:"max,omitempty"`
	// Values are an enum's choices.
	Values []string `yaml:"values" json:"values,omitempty"`
	// Pattern is a string's regular expression (RE2), matched against
	// the whole value.
	Pattern string `yaml:"pattern" json:"pattern,omitempty"`
	// Roots are the directories a path must lie under.
	Roots []string `yaml:"roots" json:"roots,omitempty"`
	// Default is the value when the user gives none; nil makes the
	// parameter required.
	Default *string `yaml:"default" json:"default,omitempty"`
	// Sets names the option the value sets ([Settable]); "" for none:
	// the value is only in the job's environment.
	Sets string `yaml:"sets" json:"sets,omitempty"`
}

// EnvName is the environment variable a parameter's value reaches the
// script in: STRATA_PARAM_ and the name in capitals.
func (p Param) EnvName() string { return "STRATA_PARAM_" + strings.ToUpper(p.Name) }

// Options are the sbatch options of the job. Zero values are left to the
// class and Slurm's defaults.
type Options struct {
	// Nodes is -N; 1 when not given.
	Nodes int `yaml:"nodes" json:"nodes"`
	// GPUsPerNode is --gpus-per-node, of GPUType when given.
	GPUsPerNode int    `yaml:"gpus_per_node" json:"gpus_per_node,omitempty"`
	GPUType     string `yaml:"gpu_type" json:"gpu_type,omitempty"`
	// TasksPerNode is --ntasks-per-node; TaskPerGPU makes it
	// GPUsPerNode (one task per GPU, as torchrun and NCCL want).
	TasksPerNode int  `yaml:"tasks_per_node" json:"tasks_per_node,omitempty"`
	TaskPerGPU   bool `yaml:"task_per_gpu" json:"task_per_gpu,omitempty"`
	// CPUsPerTask is --cpus-per-task.
	CPUsPerTask int `yaml:"cpus_per_task" json:"cpus_per_task,omitempty"`
	// Memory is --mem: per node, in Slurm's units ("64G", "512M"; a bare
	// number is megabytes).
	Memory Memory `yaml:"memory" json:"memory,omitempty"`
	// Time is --time; 0 leaves it to the class's default.
	Time duration.Duration `yaml:"time" json:"time,omitempty"`
	// Array is --array ("0-99", "1,3,5", "0-99%8"); ArraySize, set by a
	// parameter, makes it 0 to the size less one, ArrayThrottle adds
	// "%throttle".
	Array         string `yaml:"array" json:"array,omitempty"`
	ArrayThrottle int    `yaml:"array_throttle" json:"array_throttle,omitempty"`
	// Exclusive is --exclusive: whole nodes, which a whole_nodes class
	// requires of jobs on several nodes.
	Exclusive bool `yaml:"exclusive" json:"exclusive,omitempty"`
}

// Settable are the options a parameter may set, each with the type the
// parameter must have and what its value means.
var Settable = map[string]struct {
	Type ParamType
	Doc  string
}{
	"nodes":          {Integer, "-N, the node count"},
	"gpus_per_node":  {Integer, "--gpus-per-node"},
	"tasks_per_node": {Integer, "--ntasks-per-node"},
	"cpus_per_task":  {Integer, "--cpus-per-task"},
	"memory_gb":      {Integer, "--mem, in gigabytes"},
	"time_hours":     {Integer, "--time, in hours"},
	"array_size":     {Integer, "--array=0-(size-1)"},
	"workdir":        {Path, "--chdir, the job's working directory"},
}

// User is who a job is rendered for.
type User struct {
	// Name is the Slurm user name the job runs as.
	Name string
	// Account is the project account to charge; "" for the user's
	// default in the policy.
	Account string
	// WorkDir is the job's working directory unless a parameter sets
	// it; "" leaves it to Slurm.
	WorkDir string
	// Environment is the base of the job's environment (HOME, USER,
	// LANG: what the portal gives every job), as KEY=VALUE; the
	// template's variables and its parameters' come after it and win.
	Environment []string
}

// Set is the templates of a directory, and the job policy they are
// checked against.
type Set struct {
	byName     map[string]*Template
	names      []string
	policy     *jobpolicy.Policy
	containers Containers
}

// Load reads every *.yaml file of dir as a template. Every problem of
// every file is reported at once, each "file:line:col: message (hint:
// ...)"; a name given by two files is a problem of the second. A missing
// directory is an error that wraps fs.ErrNotExist.
func Load(dir string) (*Set, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	sort.Strings(files)
	s := &Set{byName: map[string]*Template{}}
	var errs []error
	first := map[string]string{}
	for _, f := range files {
		t, pos, err := loadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := first[t.Name]; dup {
			p := pos.At("name")
			errs = append(errs, strictyaml.Diagnostic{File: f, Line: p.Line, Col: p.Col, Path: "name",
				Msg: fmt.Sprintf("template %s is also in %s", t.Name, other), Hint: "give each template its own name"})
			continue
		}
		first[t.Name] = f
		s.byName[t.Name] = t
		s.names = append(s.names, t.Name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Strings(s.names)
	return s, nil
}

var decodeOpts = strictyaml.Options{
	What:         "a job template",
	File:         "template file",
	Example:      "a template starts with apiVersion: strata/v1 and kind: JobTemplate, then gives its name, class and script",
	MaxBytes:     MaxBytes,
	MaxBytesHint: "a template is a script and a few parameters: check that this is the right file",
}

// Parse decodes one template file strictly and validates it; every
// problem at once as [strictyaml.Diagnostics].
func Parse(file string, data []byte) (*Template, error) {
	t, _, err := parse(file, data)
	return t, err
}

func loadFile(path string) (*Template, strictyaml.Positions, error) {
	data, err := strictyaml.ReadLimited(path, MaxBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("read template: %w", err)
	}
	return parse(path, data)
}

func parse(file string, data []byte) (*Template, strictyaml.Positions, error) {
	t := &Template{Type: TypeBatch}
	r := strictyaml.Decode(file, data, t, decodeOpts)
	r.Add(t.Validate())
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	t.File = file
	return t, r.Pos, nil
}

// WithPolicy returns the set checked against p: Render takes --switches
// from p's classes and refuses what job_submit.lua would refuse. The set
// itself is unchanged, so a daemon can swap policies as they are reloaded.
func (s *Set) WithPolicy(p *jobpolicy.Policy) *Set {
	c := *s
	c.policy = p
	return &c
}

// WithContainers returns the set rendering images with c's runtime.
func (s *Set) WithContainers(c Containers) *Set {
	cp := *s
	cp.containers = c
	return &cp
}

// List returns the templates, by name.
func (s *Set) List() []Template {
	out := make([]Template, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, *s.byName[n])
	}
	return out
}

// Get returns the template named name.
func (s *Set) Get(name string) (Template, bool) {
	t, ok := s.byName[name]
	if !ok {
		return Template{}, false
	}
	return *t, true
}

// ErrUnknownTemplate is the error of Render for a name no file gives.
var ErrUnknownTemplate = errors.New("no such template")

// Policy returns the job policy the set is checked against (nil: none).
func (s *Set) Policy() *jobpolicy.Policy { return s.policy }
