package spec_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/strata-hpc/strata/policy/internal/spec"
)

var update = flag.Bool("update", false, "rewrite policy.schema.json")

const schemaFile = "policy.schema.json"

// TestSchemaGolden: policy.schema.json is what Schema generates (go test
// -run TestSchemaGolden -update rewrites it; review the diff).
func TestSchemaGolden(t *testing.T) {
	got, err := spec.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSchemaGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not current: run go test ./policy/internal/spec -run TestSchemaGolden -update and review the diff", schemaFile)
	}
	again, err := spec.Schema()
	if err != nil || !bytes.Equal(got, again) {
		t.Errorf("Schema is not deterministic")
	}
}

// TestSchemaShape checks what editors rely on: the draft, every object
// closed and described, every property described, the enums.
func TestSchemaShape(t *testing.T) {
	s := loadSchema(t)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
	defs := s["$defs"].(map[string]any)
	objects := map[string]map[string]any{"Policy": s}
	for name, d := range defs {
		if d.(map[string]any)["type"] == "object" {
			objects[name] = d.(map[string]any)
		}
	}
	for _, want := range []string{"Cluster", "Class", "Tenant", "Project", "Member", "Limits", "Serving", "Disk", "ReclaimRule", "IdleDef", "PartialIdle", "Signal"} {
		if objects[want] == nil {
			t.Errorf("no object definition %s", want)
		}
	}
	for name, o := range objects {
		if o["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", name, o["additionalProperties"])
		}
		if o["description"] == nil {
			t.Errorf("%s has no description", name)
		}
		for key, p := range o["properties"].(map[string]any) {
			if p.(map[string]any)["description"] == nil {
				t.Errorf("%s.%s has no description", name, key)
			}
		}
	}
	if _, ok := objects["ReclaimRule"]["properties"].(map[string]any)["name"]; ok {
		t.Errorf("ReclaimRule has a name property: strata-policy fills it")
	}
	for path, want := range map[string][]any{
		"Member.role":        {"member", "viewer", "tenant-admin"},
		"Disk.filesystem":    {"xfs", "lustre"},
		"Class.preempt_mode": {"requeue", "cancel", "suspend"},
	} {
		typ, key, _ := strings.Cut(path, ".")
		got := objects[typ]["properties"].(map[string]any)[key].(map[string]any)["enum"]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s enum = %v, want %v", path, got, want)
		}
	}
	for name, want := range map[string][]any{
		"Policy":  {"apiVersion", "kind", "cluster", "classes", "tenants"},
		"Project": {"name", "members"},
		"Disk":    {"path", "filesystem", "hard_gb"},
		"Serving": {"gpus", "replicas"},
	} {
		if got := objects[name]["required"]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s required = %v, want %v", name, got, want)
		}
	}
}

// TestSchemaAgreesWithParse: the schema accepts every file Parse accepts,
// and rejects the bad files whose problems are of shape (unknown keys,
// types, missing keys, enums, names).
func TestSchemaAgreesWithParse(t *testing.T) {
	s := loadSchema(t)
	files, err := filepath.Glob(filepath.Join("testdata", "*.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, exampleFile)
	for _, file := range files {
		if errs := checkSchema(t, s, file); len(errs) > 0 {
			t.Errorf("%s: schema rejects it:\n%s", file, strings.Join(errs, "\n"))
		}
	}
	for _, name := range []string{"unknown-key", "wrong-types", "missing-keys", "header", "names", "roles", "serving-disk", "times"} {
		file := filepath.Join("testdata", name+".bad.yaml")
		if errs := checkSchema(t, s, file); len(errs) == 0 {
			t.Errorf("%s: schema accepts it", file)
		}
	}
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := spec.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkSchema validates a YAML file against the schema with the keywords
// the schema uses: a small validator, so the test needs no dependency.
func checkSchema(t *testing.T, root map[string]any, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []string{err.Error()}
	}
	var errs []string
	var check func(s map[string]any, v any, path string)
	check = func(s map[string]any, v any, path string) {
		bad := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
		if ref, ok := s["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/$defs/")
			check(root["$defs"].(map[string]any)[name].(map[string]any), v, path)
			return
		}
		if c, ok := s["const"]; ok && v != c {
			bad("%v is not %v", v, c)
		}
		if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
			bad("%v is not one of %v", v, enum)
		}
		switch s["type"] {
		case "object":
			m, ok := v.(map[string]any)
			if !ok {
				bad("want an object, got %T", v)
				return
			}
			props, _ := s["properties"].(map[string]any)
			for _, r := range asList(s["required"]) {
				if _, ok := m[r.(string)]; !ok {
					bad("missing %s", r)
				}
			}
			for k, val := range m {
				if pn, ok := s["propertyNames"].(map[string]any); ok && !regexp.MustCompile(pn["pattern"].(string)).MatchString(k) {
					bad("key %q does not match %s", k, pn["pattern"])
				}
				switch ps, ok := props[k].(map[string]any); {
				case ok:
					check(ps, val, path+"."+k)
				case s["additionalProperties"] == false:
					bad("unknown key %s", k)
				default:
					if ap, ok := s["additionalProperties"].(map[string]any); ok {
						check(ap, val, path+"."+k)
					}
				}
			}
		case "array":
			l, ok := v.([]any)
			if !ok {
				bad("want an array, got %T", v)
				return
			}
			for i, item := range l {
				check(s["items"].(map[string]any), item, fmt.Sprintf("%s[%d]", path, i))
			}
		case "string":
			str, ok := v.(string)
			if !ok {
				bad("want a string, got %T", v)
				return
			}
			if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
				bad("%q does not match %s", str, p)
			}
			if n, ok := s["maxLength"].(float64); ok && float64(len(str)) > n {
				bad("%q is longer than %v", str, n)
			}
		case "integer", "number":
			var f float64
			switch n := v.(type) {
			case int:
				f = float64(n)
			case float64:
				if s["type"] == "integer" {
					bad("want an integer, got %v", n)
				}
				f = n
			default:
				bad("want a number, got %T", v)
				return
			}
			if lo, ok := s["minimum"].(float64); ok && f < lo {
				bad("%v is below %v", f, lo)
			}
			if hi, ok := s["maximum"].(float64); ok && f > hi && !math.IsInf(f, 0) {
				bad("%v is above %v", f, hi)
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				bad("want a boolean, got %T", v)
			}
		}
	}
	check(root, doc, "")
	return errs
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
