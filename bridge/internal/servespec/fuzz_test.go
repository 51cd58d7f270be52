package servespec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/strata-hpc/strata/internal/strictyaml"
)

// FuzzParse: Parse never panics; a rejected spec comes back as nil with
// diagnostics that each have a position in the file; an accepted spec
// validates, and written back out as YAML parses to the same spec (an
// empty env: {} and none are the same).
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"name: a\nmodel: /m\nenv: {A: &x b, B: *x}\n",
		"name: a\nmodel: /m\nargs: [&a x, *a, *a]\n",
		"&a [*a]",
		"name: a\nmodel: /m\nautoscale: {min_replicas: 1, max_replicas: 2}\ncpu: 1\n",
		"name: !!str a\nmodel: /m\n",
		"name: 'a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse("f.yaml", data)
		if err != nil {
			if spec != nil {
				t.Fatal("a spec came back with an error")
			}
			var ds strictyaml.Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error %T is not Diagnostics: %v", err, err)
			}
			for _, d := range ds {
				if d.File != "f.yaml" || d.Line < 1 || d.Col < 1 || d.Msg == "" {
					t.Fatalf("diagnostic without a place or message: %#v", d)
				}
			}
			return
		}
		if ds := spec.Validate(); len(ds) > 0 {
			t.Fatalf("accepted a spec that does not validate: %v", ds)
		}
		out, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse("again.yaml", out)
		if err != nil {
			t.Fatalf("written back out, the spec does not parse: %v\n%s", err, out)
		}
		if diff := cmp.Diff(spec, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}

// FuzzFromComment: a marker found is non-empty, holds no separator, and is
// in the comment as "strata:serve=<name>".
func FuzzFromComment(f *testing.F) {
	for _, s := range []string{"strata:serve=a", "strata:class=train,strata:serve=b c", "strata:serve=", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, comment string) {
		name, ok := FromComment(comment)
		if !ok {
			if name != "" {
				t.Fatalf("no marker, but name %q", name)
			}
			return
		}
		if name == "" || strings.ContainsAny(name, ", \t\n") || !strings.Contains(comment, "strata:serve="+name) {
			t.Fatalf("FromComment(%q) = %q", comment, name)
		}
	})
}
