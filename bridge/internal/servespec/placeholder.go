package servespec

import (
	"fmt"
	"strconv"
	"strings"
)

// Vars are the values of the placeholders that args and env values of a
// spec or a runtime template may hold: {{.ModelPath}} (where the model is
// mounted in the container), {{.Name}} (the spec's name), {{.Version}}
// ("job-<id>"), {{.Port}} (the runtime's port) and {{.GPUs}} (GPUs per
// replica, e.g. for vLLM's --tensor-parallel-size).
type Vars struct {
	ModelPath string
	Name      string
	Version   string
	Port      int
	GPUs      int
}

// Placeholders lists the placeholders Expand knows, for messages.
const Placeholders = "{{.ModelPath}}, {{.Name}}, {{.Version}}, {{.Port}}, {{.GPUs}}"

// lookup returns the value of the placeholder named name.
func (v Vars) lookup(name string) (string, bool) {
	switch name {
	case "ModelPath":
		return v.ModelPath, true
	case "Name":
		return v.Name, true
	case "Version":
		return v.Version, true
	case "Port":
		return strconv.Itoa(v.Port), true
	case "GPUs":
		return strconv.Itoa(v.GPUs), true
	}
	return "", false
}

// Expand replaces the placeholders of s with their values. It is not
// text/template: there is no logic, only the names above, and anything
// else between {{ and }} is an error, so a typo cannot reach a model
// server as a literal argument.
func Expand(s string, v Vars) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return "", fmt.Errorf("%q opens {{ without a closing }}", s)
		}
		inner := strings.TrimSpace(rest[:j])
		name, dotted := strings.CutPrefix(inner, ".")
		val, known := v.lookup(name)
		if !dotted || !known {
			return "", fmt.Errorf("unknown placeholder {{%s}} in %q: the placeholders are %s", rest[:j], s, Placeholders)
		}
		b.WriteString(val)
		s = rest[j+2:]
	}
}

// CheckPlaceholders reports the first placeholder of s that Expand would
// refuse.
func CheckPlaceholders(s string) error {
	_, err := Expand(s, Vars{})
	return err
}
