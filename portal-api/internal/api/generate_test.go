package api

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCurrent runs the pinned oapi-codegen (OAPI_CODEGEN, set by
// make) on openapi.yaml and fails when the checked-in api.gen.go differs
// from its output: the handlers cannot drift from the contract.
func TestGeneratedCurrent(t *testing.T) {
	tool := os.Getenv("OAPI_CODEGEN")
	if tool == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("OAPI_CODEGEN is not set: run the tests through make")
		}
		t.Skip("OAPI_CODEGEN is not set (make test-unit sets it)")
	}
	tool, err := filepath.Abs(tool)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := filepath.Abs("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), tool, "-config", "oapi-codegen.yaml", spec)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(tmp, "api.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("api.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("api.gen.go is stale or edited by hand: change portal-api/openapi.yaml and run `make generate-portal`")
	}
}
