package slurmrest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest/adaptergen"
)

// TestSpecsCurrent fails when a prepared spec is not what specprep makes of
// the captured one.
func TestSpecsCurrent(t *testing.T) {
	for _, p := range adaptergen.Parsers {
		want, err := adaptergen.Spec(".", p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.FromSlash(p.Spec()))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate-slurmrest`", p.Spec())
		}
	}
}

// TestAdaptersCurrent fails when an adapter, the list of parsers or a
// client's oapi-codegen configuration is not what adaptergen makes of the
// parsers it lists, for example after an edit by hand.
func TestAdaptersCurrent(t *testing.T) {
	files, err := adaptergen.Files(adaptergen.Parsers)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[filepath.FromSlash(f.Path)] = true
		got, err := os.ReadFile(filepath.FromSlash(f.Path))
		if err != nil {
			t.Errorf("%v: run `make generate-slurmrest`", err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s is stale or edited by hand: change internal/slurmrest/adaptergen and run `make generate-slurmrest`", f.Path)
		}
	}
	// An adapter of a parser taken off the list must go too.
	old, err := filepath.Glob("adapter_*.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range old {
		if !want[name] {
			t.Errorf("%s is of no parser adaptergen lists: delete it", name)
		}
	}
}

// TestGeneratedCurrent runs the pinned oapi-codegen (OAPI_CODEGEN, set by
// make) and fails when the checked-in client differs from its output.
func TestGeneratedCurrent(t *testing.T) {
	tool := os.Getenv("OAPI_CODEGEN")
	if tool == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("OAPI_CODEGEN is not set: run the tests through make")
		}
		t.Skip("OAPI_CODEGEN is not set (make test-unit sets it)")
	}
	for _, p := range adaptergen.Parsers {
		t.Run(p.Package(), func(t *testing.T) {
			want, err := adaptergen.Client(context.Background(), tool, ".", p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.FromSlash(p.Client()))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale or edited by hand: run `make generate-slurmrest`", p.Client())
			}
		})
	}
}
