package specprep

import (
	"bytes"
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

// FuzzPrepare: whatever the spec, Prepare fails or returns a spec of the
// parser alone: every path and schema its own, every reference to one of
// its schemas, no int32 left, and preparing it again changes nothing.
// The seeds are small specs that reach each step (a nested int32, a
// reference from a path, a foreign reference, no info): mutations of one
// large spec never got past the decode.
func FuzzPrepare(f *testing.F) {
	f.Add([]byte(twoParsers), "v0.0.45")
	f.Add([]byte(twoParsers), "v0.0.42")
	f.Add([]byte(`{"paths":{"/slurm/v0.0.1/x":{}},"components":{"schemas":{}}}`), "v0.0.1")
	f.Add([]byte(`{"paths":{"/slurm/v0.0.7/x":{"$ref":"#/components/schemas/v0.0.7_a"}},"components":{"schemas":{"v0.0.7_a":{"format":"int32"},"v0.0.8_b":{}}}}`), "v0.0.7")
	f.Add([]byte(`{"paths":{"/slurm/v0.0.7/x":[{"format":"int32"},[{"$ref":"#/components/schemas/v0.0.8_b"}]]},"components":{"schemas":{"v0.0.8_b":{}}}}`), "v0.0.7")
	f.Add([]byte(`{"info":{"title":"t"},"paths":{"/slurmdb/v0.0.9/a/":{"get":{"items":{"format":"int32","format2":"int32"}}}},"components":{"schemas":{"v0.0.9_x":{"properties":{"n":{"type":"integer","format":"int32"}}}}}}`), "v0.0.9")
	f.Add([]byte(`{"info":[],"paths":{"/v0.0.5/":{}},"components":{"schemas":{"v0.0.5_":{"$ref":"v0.0.5_"}}}}`), "v0.0.5")
	f.Fuzz(func(t *testing.T, spec []byte, parser string) {
		out, err := Prepare(spec, parser)
		if err != nil {
			return
		}
		var doc struct {
			Paths      map[string]json.RawMessage            `json:"paths"`
			Components map[string]map[string]json.RawMessage `json:"components"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("Prepare returned a spec that does not decode: %v", err)
		}
		if len(doc.Paths) == 0 {
			t.Fatalf("Prepare returned a spec without paths")
		}
		for p := range doc.Paths {
			if !strings.Contains(p, "/"+parser+"/") {
				t.Fatalf("path %q kept for parser %s", p, parser)
			}
		}
		for name := range doc.Components["schemas"] {
			if !strings.HasPrefix(name, parser+"_") {
				t.Fatalf("schema %q kept for parser %s", name, parser)
			}
		}
		if bytes.Contains(out, []byte(`"format": "int32"`)) {
			t.Fatalf("int32 left in the prepared spec:\n%s", out)
		}
		again, err := Prepare(out, parser)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("preparing the prepared spec again: %v\n%s\nthen\n%s", err, out, again)
		}
	})
}
