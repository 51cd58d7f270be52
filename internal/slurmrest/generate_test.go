package slurmrest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest/specprep"
)

// generated lists what make generate-slurmrest derives, and from what.
var generated = []struct{ raw, parser, spec, pkg string }{
	{"spec/raw/slurm-24.11.json", "v0.0.42", "spec/v0.0.42.json", "v0042"},
	{"spec/raw/slurm-26.05.json", "v0.0.45", "spec/v0.0.45.json", "v0045"},
}

// TestSpecsCurrent fails when a prepared spec is not what specprep makes of
// the captured one.
func TestSpecsCurrent(t *testing.T) {
	for _, g := range generated {
		raw, err := os.ReadFile(filepath.Join(g.raw))
		if err != nil {
			t.Fatal(err)
		}
		want, err := specprep.Prepare(raw, g.parser)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(g.spec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate-slurmrest`", g.spec)
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
	for _, g := range generated {
		t.Run(g.pkg, func(t *testing.T) {
			dir := t.TempDir()
			cfg, err := os.ReadFile(filepath.Join(g.pkg, "oapi-codegen.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			spec, _ := filepath.Abs(g.spec)
			cmd := exec.Command(tool, "-config", "oapi-codegen.yaml", spec)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("oapi-codegen: %v\n%s", err, out)
			}
			want, err := os.ReadFile(filepath.Join(dir, g.pkg+".gen.go"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(g.pkg, g.pkg+".gen.go"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s.gen.go is stale or edited by hand: run `make generate-slurmrest`", g.pkg, g.pkg)
			}
		})
	}
}
