// Package luatest runs Lua scripts for tests: the Lua files Strata ships
// (slurm-plugins/job_submit.lua) and the Lua data it renders for them.
//
// It uses a Lua interpreter of the host when there is one (lua5.1, as
// Debian's Slurm links, then lua5.4, lua5.3, lua), else the lua5.4 of a
// Slurm test bed's root through chroot (the roots carry Lua for the
// job_submit plugin; chroot needs root). [Find] says why when there is
// neither. [Require] skips a test for that reason, except when CI is
// "true": there it fails, so a machine without Lua cannot pass the Lua
// tests silently.
package luatest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Interp is a Lua interpreter.
type Interp struct {
	// Bin is the interpreter: a host path, or a path inside Root.
	Bin string
	// Root is the root Bin runs in through chroot ("": the host).
	Root string
	// Version is its _VERSION, e.g. "Lua 5.4".
	Version string
}

// hostNames are the interpreters looked for on the host, best first:
// Slurm's Debian build links Lua 5.1.
var hostNames = []string{"lua5.1", "lua5.4", "lua5.3", "lua"}

// Find returns a Lua interpreter, or nil and why there is none.
func Find() (*Interp, string) {
	for _, n := range hostNames {
		if p, err := exec.LookPath(n); err == nil {
			in := &Interp{Bin: p}
			if v, err := in.version(); err == nil {
				in.Version = v
				return in, ""
			}
		}
	}
	if os.Geteuid() != 0 {
		return nil, "no Lua on the host (apt-get install lua5.1), and a test bed's Lua needs root for chroot"
	}
	roots := bedRoots(os.Getenv("STRATA_TESTBEDS"))
	found, _ := filepath.Glob("/var/lib/strata/testbed/*/root")
	roots = append(roots, found...)
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(r, "usr/bin/lua5.4")); err != nil {
			continue
		}
		in := &Interp{Bin: "/usr/bin/lua5.4", Root: r}
		if v, err := in.version(); err == nil {
			in.Version = v
			return in, ""
		}
	}
	return nil, "no Lua on the host (apt-get install lua5.1) and no test bed root with /usr/bin/lua5.4 (test/testbed/slurm/testbed.sh up)"
}

// Require returns a Lua interpreter or skips the test, saying why; under
// CI=true it fails the test instead.
func Require(t testing.TB) *Interp {
	t.Helper()
	in, why := Find()
	return require(t, in, why)
}

func require(t testing.TB, in *Interp, why string) *Interp {
	t.Helper()
	if in == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Lua interpreter: %s; and CI=true, so this test fails instead of skipping (.ci/run installs lua5.1)", why)
		}
		t.Skip("no Lua interpreter: " + why)
	}
	t.Logf("Lua: %s (%s%s)", in.Version, in.Root, in.Bin)
	return in
}

func (in *Interp) version() (string, error) {
	out, err := in.Run(context.Background(), `print(_VERSION)`, nil)
	return strings.TrimSpace(out), err
}

// Run writes files (name -> content) into a fresh directory, runs script
// with that directory as arg[1] (the path Lua sees), and returns its
// standard output. The error carries standard error.
func (in *Interp) Run(ctx context.Context, script string, files map[string][]byte) (string, error) {
	base := os.TempDir()
	if in.Root != "" {
		base = filepath.Join(in.Root, "tmp")
	}
	dir, err := os.MkdirTemp(base, "strata-luatest-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.lua"), []byte(script), 0o644); err != nil {
		return "", err
	}
	seen := dir // the directory as Lua sees it
	if in.Root != "" {
		seen = "/" + strings.TrimPrefix(strings.TrimPrefix(dir, in.Root), "/")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if in.Root != "" {
		cmd = exec.CommandContext(ctx, "chroot", in.Root, in.Bin, seen+"/main.lua", seen)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	} else {
		cmd = exec.CommandContext(ctx, in.Bin, seen+"/main.lua", seen)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), fmt.Errorf("lua: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), fmt.Errorf("lua: %w", err)
	}
	return stdout.String(), nil
}

// bedRoots reads STRATA_TB_ROOT from the test beds' environment files
// (STRATA_TESTBEDS, as internal/testbed reads it).
func bedRoots(envFiles string) []string {
	var roots []string
	for _, name := range strings.FieldsFunc(envFiles, func(r rune) bool { return r == ' ' || r == ':' }) {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "STRATA_TB_ROOT="); ok {
				roots = append(roots, strings.Trim(v, `"`))
			}
		}
		f.Close()
	}
	return roots
}
