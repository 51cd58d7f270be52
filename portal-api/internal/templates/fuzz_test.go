package templates

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: no file panics the parser, and a template it accepts
// renders with its defaults or refuses a value with a *ParamError.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	shipped, _ := filepath.Glob(filepath.Join(shippedDir, "*.yaml"))
	for _, name := range append(files, shipped...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if ds := tmpl.Validate(); len(ds) > 0 {
			t.Fatalf("accepted, yet invalid: %v", ds)
		}
		s := &Set{byName: map[string]*Template{tmpl.Name: tmpl}, names: []string{tmpl.Name}}
		_, err = s.Render(tmpl.Name, nil, User{Name: "alice"})
		if err != nil && !isParamError(err, firstRequired(tmpl), "required") {
			for _, p := range tmpl.Parameters {
				if p.Default == nil || p.Type == Path {
					return // a required parameter, or a default path this host resolves
				}
			}
			t.Fatalf("defaults refused: %v", err)
		}
	})
}

func firstRequired(t *Template) string {
	for _, p := range t.Parameters {
		if p.Default == nil {
			return p.Name
		}
	}
	return ""
}
