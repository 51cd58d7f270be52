package servespec

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

const nameHint = "lowercase letters, digits and '-', starting with a letter and ending with a letter or digit, " +
	"at most 52 characters, such as llama-ft"

// CheckName reports why name cannot name a served model: it must be a
// DNS-1035 label (a Service name) of at most MaxNameLen characters.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("no name (hint: %s)", nameHint)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("name %q has %d characters, more than %d (hint: %s)", trim(name), len(name), MaxNameLen, nameHint)
	}
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return fmt.Errorf("name %q is not a DNS-1035 label (hint: %s)", trim(name), nameHint)
	}
	return nil
}

// CheckRuntimeName reports why name cannot name a runtime template: it is
// a file name under the runtimes folder, a DNS-1123 label.
func CheckRuntimeName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("runtime %q is not a runtime template name "+
			"(hint: lowercase letters, digits and '-', such as vllm, triton or generic)", trim(name))
	}
	return nil
}

// trim shortens a value for a message.
func trim(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Validate returns every problem of s, each with the path of its value
// ("autoscale.max_replicas") and no position: Parse locates them in the
// file. A spec built in code (from a job comment) is checked the same way.
func (s *Spec) Validate() strictyaml.Diagnostics {
	var ds strictyaml.Diagnostics
	bad := func(path, hint, format string, args ...any) {
		ds = append(ds, strictyaml.Diagnostic{Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	if s.APIVersion != "" && s.APIVersion != APIVersion {
		bad("apiVersion", "write apiVersion: "+APIVersion+", or leave it out", "apiVersion %q is not supported", trim(s.APIVersion))
	}
	if s.Kind != "" && s.Kind != Kind {
		bad("kind", "write kind: "+Kind+", or leave it out", "kind %q: want %s", trim(s.Kind), Kind)
	}
	switch {
	case s.Name == "":
		bad("name", "add name: the model's service name ("+nameHint+")", "no name")
	case len(s.Name) > MaxNameLen:
		bad("name", nameHint, "name %q has %d characters, more than %d", trim(s.Name), len(s.Name), MaxNameLen)
	case len(validation.IsDNS1035Label(s.Name)) > 0:
		bad("name", nameHint, "name %q is not a DNS-1035 label", trim(s.Name))
	}
	switch {
	case s.ModelPath == "":
		bad("model", "add model: the absolute path of the trained model on the shared file system", "no model")
	case !strings.HasPrefix(s.ModelPath, "/"):
		bad("model", "write the absolute path, as the job sees it (such as /shared/projects/llm/final)",
			"model %q is not an absolute path", trim(s.ModelPath))
	case s.ModelPath == "/":
		bad("model", "give the model's own directory or file", "model is the root directory")
	case !cleanAbs(s.ModelPath):
		bad("model", "write it as "+filepath.Clean(s.ModelPath),
			"model %q is not a clean path (no '.', '..', '//' or trailing '/')", trim(s.ModelPath))
	case strings.ContainsFunc(s.ModelPath, unicode.IsControl):
		bad("model", "rename the model's directory", "model %q holds control characters", trim(s.ModelPath))
	}
	if s.Runtime != "" {
		if err := CheckRuntimeName(s.Runtime); err != nil {
			bad("runtime", "a runtime template name such as vllm, triton or generic (/etc/strata/bridge/runtimes/<name>.yaml)",
				"runtime %q is not a runtime template name", trim(s.Runtime))
		}
	}
	if s.Image != "" && strings.ContainsFunc(s.Image, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		bad("image", "write an image reference such as registry.example.org/team/server:1.2", "image %q holds spaces", trim(s.Image))
	}
	for i, a := range s.Args {
		if err := CheckPlaceholders(a); err != nil {
			bad(fmt.Sprintf("args[%d]", i), "write {{ only as a placeholder", "%v", err)
		}
	}
	if s.GPUs < 0 {
		bad("gpus", "give 1 or more, or leave it out for the runtime's default", "gpus %d is negative", s.GPUs)
	}
	if s.Tier != "" {
		if err := servingquota.CheckTier(s.Tier); err != nil {
			bad("tier", "use "+servingquota.TierExamples+", or leave it out for the runtime's", "%v", err)
		}
	}
	s.validateQuantities(bad)
	s.validateScaling(bad)
	names := make([]string, 0, len(s.Env))
	for k := range s.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			bad(strictyaml.Join("env", k), "use letters, digits, '_', '-' and '.', not starting with a digit",
				"env %q is not a valid variable name", trim(k))
			continue
		}
		if err := CheckPlaceholders(s.Env[k]); err != nil {
			bad(strictyaml.Join("env", k), "write {{ only as a placeholder", "%v", err)
		}
	}
	return ds
}

func (s *Spec) validateQuantities(bad func(path, hint, format string, args ...any)) {
	if s.CPU != "" {
		q, err := resource.ParseQuantity(s.CPU)
		switch {
		case err != nil:
			bad("cpu", `write a number of cores, such as "8" or "500m" (thousandths)`, "cpu %q is not a quantity", trim(s.CPU))
		case q.Sign() <= 0:
			bad("cpu", "give a positive number of cores, or leave it out", "cpu %s is not positive", s.CPU)
		}
	}
	if s.Memory != "" {
		q, err := resource.ParseQuantity(s.Memory)
		switch {
		case err != nil:
			bad("memory", "write bytes with a binary unit, such as 64Gi or 512Mi", "memory %q is not a quantity", trim(s.Memory))
		case q.Cmp(resource.MustParse("1Mi")) < 0:
			bad("memory", "write bytes with a binary unit, such as 64Gi or 512Mi ('m' is a thousandth, 'M' a million)",
				"memory %s is less than 1Mi", s.Memory)
		}
	}
}

func (s *Spec) validateScaling(bad func(path, hint, format string, args ...any)) {
	if s.Replicas < 0 {
		bad("replicas", "give 1 or more, or leave it out for one", "replicas %d is negative", s.Replicas)
	}
	a := s.Autoscale
	if a == nil {
		return
	}
	if s.Replicas != 0 {
		bad("replicas", "remove replicas: autoscale.min_replicas is the number it starts with",
			"replicas and autoscale exclude each other")
	}
	if a.MinReplicas < 1 {
		bad("autoscale.min_replicas", "give 1 or more: a HorizontalPodAutoscaler does not scale to zero",
			"min_replicas %d is less than 1", a.MinReplicas)
	}
	switch {
	case a.MaxReplicas == 0:
		bad("autoscale.max_replicas", "add max_replicas: the most replicas the autoscaler may run", "no max_replicas")
	case a.MaxReplicas < a.MinReplicas:
		bad("autoscale.max_replicas", "give max_replicas at least min_replicas",
			"max_replicas %d is less than min_replicas %d", a.MaxReplicas, a.MinReplicas)
	}
	if a.TargetCPUPercent < 0 || a.TargetCPUPercent > 100 {
		bad("autoscale.target_cpu_percent", "give a percentage of the CPU request between 1 and 100 (default 80)",
			"target_cpu_percent %d is not between 1 and 100", a.TargetCPUPercent)
	}
	if s.CPU == "" {
		bad("autoscale", "add cpu: the CPU request per replica, which the utilisation is a percentage of",
			"autoscale works on CPU utilisation, and the spec gives no cpu")
	}
}
