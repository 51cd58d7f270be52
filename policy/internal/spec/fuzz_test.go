package spec_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/policy/internal/spec"
)

// FuzzParse: no input makes Parse panic or hang. It returns either a
// policy that validates, with its defaults filled, or no policy and
// Diagnostics, each located at a line and column of at least 1.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range append(files, exampleFile) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(head + "tenants: []\n---\na: [\n"))
	f.Add([]byte(head + "x: &t {name: acme, projects: []}\ntenants: [*t, *t]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := spec.Parse("f.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatal("a policy and an error")
			}
			var ds spec.Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error %v: want Diagnostics", err)
			}
			for _, d := range ds {
				if d.Line < 1 || d.Col < 1 || d.File != "f.yaml" || d.Msg == "" || d.Hint == "" {
					t.Fatalf("diagnostic %+v: want a file, a line and column from 1, a message and a hint", d)
				}
			}
			return
		}
		if p == nil {
			t.Fatal("no policy and no error")
		}
		if ds := p.Validate("f.yaml"); ds != nil {
			t.Fatalf("Parse accepted a policy that does not validate:\n%v", ds)
		}
		again, err := spec.Parse("f.yaml", data)
		if err != nil {
			t.Fatal(err)
		}
		again.ApplyDefaults()
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("Parse left defaults unfilled (-parsed +defaults applied again):\n%s", diff)
		}
	})
}
