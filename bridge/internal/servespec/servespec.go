// Package servespec is strata-serve.yaml: what a Slurm job asks the
// bridge to serve (the model path, the runtime, resources, scaling). A job
// writes the file in its working directory, or asks with
// --comment=strata:serve=<name>, and the bridge fills the rest from its
// defaults. Parse is strict (an unknown key, a value of the wrong type or
// an invalid value is a "file:line:col: message (hint: ...)" diagnostic,
// all of them at once) and touches no file system: whether the model
// exists is the deploy checks' business.
package servespec

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"unicode"

	"github.com/strata-hpc/strata/internal/strictyaml"
)

// FileName is the name of the file a job writes in its working directory.
const FileName = "strata-serve.yaml"

// APIVersion and Kind may head a spec; both are optional, and checked when
// given.
const (
	APIVersion = "strata/v1"
	Kind       = "ServeSpec"
)

// MaxNameLen is the longest name: KServe names the predictor's Service
// "<name>-predictor", which must stay a 63-character DNS label.
const MaxNameLen = 52

// DefaultTargetCPUPercent is the autoscaling target when a spec gives none.
const DefaultTargetCPUPercent = 80

// Spec is what a job asks to serve: written by the job as strata-serve.yaml
// in its working directory, or built from --comment=strata:serve=<name>
// with the bridge's defaults. Zero values mean "the default": GPUs 0 is the
// runtime's GPUs, Replicas 0 is one replica, Runtime "" is the bridge's
// default runtime (see ApplyDefaults).
type Spec struct {
	APIVersion string `yaml:"apiVersion,omitempty" json:"apiVersion,omitempty"`
	Kind       string `yaml:"kind,omitempty" json:"kind,omitempty"`
	// Name is a DNS-1035 label of at most MaxNameLen characters: the
	// Deployment, Service and model name, stable across versions.
	Name string `yaml:"name" json:"name"`
	// ModelPath is the absolute path of the model (a directory or a file)
	// on the shared file system, as the job saw it.
	ModelPath string `yaml:"model" json:"model"`
	// Runtime names a runtime template ("vllm", "triton", "generic").
	Runtime string `yaml:"runtime" json:"runtime,omitempty"`
	// Image overrides the runtime's image.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Args are appended to the runtime's args; they may hold placeholders
	// (see Vars).
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`
	// GPUs is the GPUs of Tier per replica (0: the runtime's default):
	// whole GPUs, MIG slices, MPS shares or time slices.
	GPUs int `yaml:"gpus,omitempty" json:"gpus,omitempty"`
	// Tier is the GPU sharing tier of the GPUs ("": the runtime's, else
	// dedicated): dedicated, mig-<profile>, mps or time-sliced (see
	// servingquota); the tenant must be allowed it.
	Tier string `yaml:"tier,omitempty" json:"tier,omitempty"`
	// CPU and Memory are resource quantities per replica ("8", "500m",
	// "64Gi"); requests and limits are both set to them.
	CPU    string `yaml:"cpu,omitempty" json:"cpu,omitempty"`
	Memory string `yaml:"memory,omitempty" json:"memory,omitempty"`
	// Replicas is the fixed number of replicas (0: one); it excludes
	// Autoscale.
	Replicas  int        `yaml:"replicas,omitempty" json:"replicas,omitempty"`
	Autoscale *Autoscale `yaml:"autoscale,omitempty" json:"autoscale,omitempty"`
	// Env is added to the runtime's environment (and wins over it); values
	// may hold placeholders.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
}

// Autoscale scales the replicas on CPU utilisation (HorizontalPodAutoscaler
// autoscaling/v2), which needs Spec.CPU.
type Autoscale struct {
	MinReplicas int `yaml:"min_replicas" json:"min_replicas"`
	MaxReplicas int `yaml:"max_replicas" json:"max_replicas"`
	// TargetCPUPercent is the average CPU utilisation, in percent of the
	// CPU request, that the autoscaler keeps (default 80).
	TargetCPUPercent int `yaml:"target_cpu_percent,omitempty" json:"target_cpu_percent,omitempty"`
}

// Defaults are the bridge's defaults for what a spec leaves out (the
// defaults: section of /etc/strata/bridge.yaml).
type Defaults struct {
	// Runtime is the runtime template of a spec that names none.
	Runtime string `yaml:"runtime"`
	// Replicas of a spec that gives neither replicas nor autoscale.
	Replicas int `yaml:"replicas"`
	// GPUs per replica of a spec that gives none; 0: the runtime's.
	GPUs int `yaml:"gpus"`
}

// MaxReplicas is the most replicas the spec can run (Autoscale.MaxReplicas
// or Replicas, at least 1).
func (s *Spec) MaxReplicas() int {
	if s.Autoscale != nil {
		return s.Autoscale.MaxReplicas
	}
	return max(s.Replicas, 1)
}

// MinReplicas is the replicas the spec starts with (Autoscale.MinReplicas
// or Replicas, at least 1): the Deployment's replicas.
func (s *Spec) MinReplicas() int {
	if s.Autoscale != nil {
		return s.Autoscale.MinReplicas
	}
	return max(s.Replicas, 1)
}

// ApplyDefaults fills what s leaves out from d: the runtime, the replicas
// (unless it autoscales) and the GPUs, and the autoscaling target.
func (s *Spec) ApplyDefaults(d Defaults) {
	if s.Runtime == "" {
		s.Runtime = d.Runtime
	}
	if s.Replicas == 0 && s.Autoscale == nil {
		s.Replicas = d.Replicas
	}
	if s.GPUs == 0 {
		s.GPUs = d.GPUs
	}
	if s.Autoscale != nil && s.Autoscale.TargetCPUPercent == 0 {
		s.Autoscale.TargetCPUPercent = DefaultTargetCPUPercent
	}
}

// Load reads and parses a spec file (see Parse).
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read serve spec: %w", err)
	}
	return Parse(path, data)
}

// MaxFileSize bounds a spec: a real one is a few hundred bytes. A reader
// of a job's file reads no more than this (see userfile).
const MaxFileSize = 1 << 20

var nouns = map[reflect.Type]string{
	reflect.TypeFor[Spec]():      "a serve spec",
	reflect.TypeFor[Autoscale](): "autoscale",
}

const example = "a serve spec holds at least name: and model:, such as name: llama-ft and " +
	"model: /shared/projects/llm/checkpoints/final"

// Parse decodes a spec strictly and validates it; filename names the file
// in diagnostics. On any problem it returns nil and all the problems as
// strictyaml.Diagnostics, each "file:line:col: message (hint: ...)",
// sorted by position. The spec it returns has the autoscaling target
// filled in; the bridge's defaults are the caller's (ApplyDefaults).
func Parse(filename string, data []byte) (*Spec, error) {
	if len(data) > MaxFileSize {
		return nil, strictyaml.Diagnostics{{File: filename, Line: 1, Col: 1,
			Msg:  fmt.Sprintf("%d bytes is too large for a serve spec", len(data)),
			Hint: "a serve spec names a model and its resources; it holds no model data"}}
	}
	var s Spec
	if err := strictyaml.Parse(filename, data, &s, strictyaml.Options{What: "a serve spec", Example: example, Nouns: nouns}); err != nil {
		return nil, err
	}
	if s.Autoscale != nil && s.Autoscale.TargetCPUPercent == 0 {
		s.Autoscale.TargetCPUPercent = DefaultTargetCPUPercent
	}
	return &s, nil
}

// FromComment finds the serving marker "strata:serve=<name>" in a Slurm
// job's comment. A comment may hold several strata:key=value items and
// other words, separated by spaces or commas ("strata:class=train,
// strata:serve=llama-ft"); the first strata:serve= item wins, as the first
// strata:class= does for reclaimd. ok is false when there is none or its
// value is empty. The name is returned as written: check it with
// CheckName (Validate does, on the spec built from it).
func FromComment(comment string) (name string, ok bool) {
	items := strings.FieldsFunc(comment, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	for _, it := range items {
		if v, found := strings.CutPrefix(it, "strata:serve="); found && v != "" {
			return v, true
		}
	}
	return "", false
}

// cleanAbs reports whether p is an absolute, clean path other than "/".
func cleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && p != "/"
}
