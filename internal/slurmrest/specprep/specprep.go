// Package specprep turns the OpenAPI document a real slurmrestd serves into
// the input oapi-codegen gets for one data parser. It is the only change made
// to Slurm's spec, it is repeatable (make generate-slurmrest), and each step
// has a reason:
//
//  1. Select one parser: slurmrestd serves every loaded parser in one
//     document (v0.0.40 to v0.0.42 on 24.11, v0.0.42 to v0.0.45 on 26.05);
//     one generated package per parser keeps the Go types apart.
//  2. Widen "format: int32" to int64: Slurm declares its unsigned 32-bit
//     values (NoVal numbers, hashes, job priorities) as int32, so a value
//     above 2^31 would fail to decode into a generated int32 field.
package specprep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

var parserRE = regexp.MustCompile(`^v0\.0\.[0-9]+$`)

// Prepare returns the spec for parser (for example "v0.0.42") selected out of
// raw, with the transformations in the package comment applied.
func Prepare(raw []byte, parser string) ([]byte, error) {
	if !parserRE.MatchString(parser) {
		return nil, fmt.Errorf("parser %q: want the form v0.0.NN", parser)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	if paths == nil || schemas == nil {
		return nil, fmt.Errorf("spec has no paths or no components.schemas")
	}
	keptPaths := map[string]any{}
	for p, v := range paths {
		if strings.Contains(p, "/"+parser+"/") {
			keptPaths[p] = v
		}
	}
	if len(keptPaths) == 0 {
		return nil, fmt.Errorf("spec has no paths for parser %s", parser)
	}
	keptSchemas := map[string]any{}
	for name, v := range schemas {
		if strings.HasPrefix(name, parser+"_") {
			keptSchemas[name] = v
		}
	}
	doc["paths"] = keptPaths
	comps["schemas"] = keptSchemas
	if info, ok := doc["info"].(map[string]any); ok {
		info["title"] = "Slurm REST API, data parser " + parser
	}
	widenInt32(doc)
	if err := checkRefs(doc, parser); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	return append(out, '\n'), nil
}

func widenInt32(v any) {
	switch t := v.(type) {
	case map[string]any:
		if f, ok := t["format"].(string); ok && f == "int32" {
			t["format"] = "int64"
		}
		for _, c := range t {
			widenInt32(c)
		}
	case []any:
		for _, c := range t {
			widenInt32(c)
		}
	}
}

// checkRefs fails when a kept path or schema refers to a schema of another
// parser, which would make the generated package incomplete.
func checkRefs(v any, parser string) error {
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/components/schemas/")
			if !strings.HasPrefix(name, parser+"_") {
				return fmt.Errorf("reference %q leaves parser %s", ref, parser)
			}
		}
		for _, c := range t {
			if err := checkRefs(c, parser); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range t {
			if err := checkRefs(c, parser); err != nil {
				return err
			}
		}
	}
	return nil
}
