package luatest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRun: the script gets the directory of its files as arg[1], reads
// them there, and its output and errors come back.
func TestRun(t *testing.T) {
	lua := Require(t)
	out, err := lua.Run(t.Context(), `
local f = assert(io.open(arg[1] .. "/sub/data.txt", "rb"))
io.write(f:read("*a"), "|", _VERSION)
f:close()`, map[string][]byte{"sub/data.txt": []byte("hello")})
	if err != nil || out != "hello|"+lua.Version {
		t.Errorf("Run = %q, %v; want %q", out, err, "hello|"+lua.Version)
	}
	_, err = lua.Run(t.Context(), `error("boom")`, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a failing script: err = %v, want it to carry the error", err)
	}
}

// TestBedRoots reads STRATA_TB_ROOT from every environment file named,
// skipping files that are missing.
func TestBedRoots(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.env"), filepath.Join(dir, "b.env")
	if err := os.WriteFile(a, []byte("# bed a\nSTRATA_TB_NAME=a\nSTRATA_TB_ROOT=/beds/a/root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(`STRATA_TB_ROOT="/beds/b/root"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := bedRoots(a + " " + filepath.Join(dir, "missing.env") + ":" + b)
	if diff := cmp.Diff([]string{"/beds/a/root", "/beds/b/root"}, got); diff != "" {
		t.Errorf("bedRoots (-want +got):\n%s", diff)
	}
}
