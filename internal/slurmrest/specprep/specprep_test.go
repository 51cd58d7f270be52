package specprep

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A spec in the shape slurmrestd serves: two parsers in one document.
const twoParsers = `{
 "openapi": "3.0.3",
 "info": {"title": "Slurm REST API", "version": "Slurm-26.05.5"},
 "paths": {
  "/slurm/v0.0.42/ping/": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/v0.0.42_ping"}}}}}}},
  "/slurm/v0.0.45/ping/": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/v0.0.45_ping"}}}}}}},
  "/slurmdb/v0.0.45/qos/": {"get": {}}
 },
 "components": {"schemas": {
  "v0.0.42_ping": {"type": "object", "properties": {"latency": {"type": "integer", "format": "int32"}}},
  "v0.0.45_ping": {"type": "object", "properties": {
    "latency": {"type": "integer", "format": "int32"},
    "nested": {"type": "array", "items": {"type": "integer", "format": "int32"}},
    "big": {"type": "integer", "format": "int64"}}}
 }}
}`

func TestPrepare(t *testing.T) {
	out, err := Prepare([]byte(twoParsers), "v0.0.45")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info       map[string]string         `json:"info"`
		Paths      map[string]any            `json:"paths"`
		Components map[string]map[string]any `json:"components"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var paths, schemas []string
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	for s := range doc.Components["schemas"] {
		schemas = append(schemas, s)
	}
	slices.Sort(paths)
	if diff := cmp.Diff([]string{"/slurm/v0.0.45/ping/", "/slurmdb/v0.0.45/qos/"}, paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"v0.0.45_ping"}, schemas); diff != "" {
		t.Errorf("schemas (-want +got):\n%s", diff)
	}
	if strings.Contains(string(out), `"int32"`) {
		t.Errorf("int32 left in the prepared spec:\n%s", out)
	}
	if got := strings.Count(string(out), `"int64"`); got != 3 {
		t.Errorf("want 3 int64 formats (2 widened, 1 kept), got %d", got)
	}
	if doc.Info["title"] != "Slurm REST API, data parser v0.0.45" || doc.Info["version"] != "Slurm-26.05.5" {
		t.Errorf("info = %v", doc.Info)
	}
	again, err := Prepare([]byte(twoParsers), "v0.0.45")
	if err != nil || string(again) != string(out) {
		t.Errorf("Prepare is not deterministic")
	}
}

func TestPrepareErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		spec, parser, want string
	}{
		"bad parser name": {twoParsers, "0.0.45", "want the form v0.0.NN"},
		"parser absent":   {twoParsers, "v0.0.44", "no paths for parser v0.0.44"},
		"not json":        {"{", "v0.0.45", "decode spec"},
		"no schemas":      {`{"paths": {}}`, "v0.0.45", "no paths or no components.schemas"},
		"foreign ref": {strings.Replace(twoParsers, `"#/components/schemas/v0.0.45_ping"`, `"#/components/schemas/v0.0.42_ping"`, 1),
			"v0.0.45", `reference "#/components/schemas/v0.0.42_ping" leaves parser v0.0.45`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Prepare([]byte(tc.spec), tc.parser)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzPrepare(f *testing.F) {
	f.Add([]byte(twoParsers), "v0.0.45")
	f.Add([]byte(`{"paths":{"/slurm/v0.0.1/x":{}},"components":{"schemas":{}}}`), "v0.0.1")
	f.Fuzz(func(t *testing.T, spec []byte, parser string) {
		out, err := Prepare(spec, parser)
		if err == nil && !json.Valid(out) {
			t.Fatalf("Prepare returned invalid JSON")
		}
	})
}
