package luatest

import (
	"errors"
	"os"
	"os/exec"
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

// TestStart: a script left running answers request after request with
// its files and arguments, and when it fails, ReadLine says why.
func TestStart(t *testing.T) {
	lua := Require(t)
	p, err := lua.Start(`
local f = assert(io.open(arg[1] .. "/greeting", "rb"))
local greeting = f:read("*a")
f:close()
while true do
	local l = io.read("*l")
	if not l then break end
	if l == "fail" then error("asked to fail") end
	io.write(greeting, " ", l, " ", arg[2], "\n")
	io.flush()
end`, map[string][]byte{"greeting": []byte("hello")}, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, name := range []string{"a", "b"} {
		if err := p.Write([]byte(name + "\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := p.ReadLine(); err != nil || got != "hello "+name+" x" {
			t.Errorf("answer to %s: %q, %v", name, got, err)
		}
	}
	if err := p.Write([]byte("fail\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := p.ReadLine(); err == nil || !strings.Contains(err.Error(), "asked to fail") {
		t.Errorf("after the script failed: %q, %v; want its error", got, err)
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

// TestRequireWithoutLua runs this package's test binary again with
// TestRequireHelper, which has no interpreter to give: it must skip, and
// fail when CI is "true".
func TestRequireWithoutLua(t *testing.T) {
	if os.Getenv("STRATA_LUATEST_HELPER") != "" {
		t.Skip("inside the helper process")
	}
	for name, tc := range map[string]struct {
		ci       string
		wantFail bool
		want     string
	}{
		"no CI":    {ci: "", want: "--- SKIP: TestRequireHelper"},
		"CI=false": {ci: "false", want: "--- SKIP: TestRequireHelper"},
		"CI=true":  {ci: "true", wantFail: true, want: "CI=true, so this test fails instead of skipping"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRequireHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "STRATA_LUATEST_HELPER=1", "CI="+tc.ci)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if failed := errors.As(err, &ee); failed != tc.wantFail || (err != nil && !failed) {
				t.Errorf("helper: err = %v, want failure %v; output:\n%s", err, tc.wantFail, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("helper output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestRequireHelper is run by TestRequireWithoutLua only.
func TestRequireHelper(t *testing.T) {
	if os.Getenv("STRATA_LUATEST_HELPER") == "" {
		t.Skip("run by TestRequireWithoutLua")
	}
	require(t, nil, "none for this test")
	t.Error("require returned without an interpreter")
}
