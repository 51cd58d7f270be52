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
	"io"
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
	dir, seen, err := in.prepare(script, files)
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := in.command(ctx, seen)
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

// Proc is a Lua script left running, which reads its requests on its
// standard input and answers on its standard output: one interpreter for
// many inputs (a fuzz target's), where starting one per input would cost
// more than the input's work.
type Proc struct {
	cmd    *exec.Cmd
	dir    string
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// Start is Run for a script that serves requests: it writes files and
// script as Run does, starts the script with its directory as arg[1] and
// extra as arg[2]..., and leaves it running until Close.
func (in *Interp) Start(script string, files map[string][]byte, extra ...string) (*Proc, error) {
	dir, seen, err := in.prepare(script, files)
	if err != nil {
		return nil, err
	}
	p := &Proc{cmd: in.command(context.Background(), seen, extra...), dir: dir}
	p.cmd.Stderr = &p.stderr
	if p.in, err = p.cmd.StdinPipe(); err == nil {
		var out io.Reader
		if out, err = p.cmd.StdoutPipe(); err == nil {
			p.out = bufio.NewReader(out)
			err = p.cmd.Start()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("lua: %w", err)
	}
	return p, nil
}

// Write sends b to the script's standard input.
func (p *Proc) Write(b []byte) error {
	if _, err := p.in.Write(b); err != nil {
		return fmt.Errorf("lua: %w", err)
	}
	return nil
}

// ReadLine returns the script's next line of output, without its "\n".
// When the script has ended, the error carries its standard error.
func (p *Proc) ReadLine() (string, error) {
	line, err := p.out.ReadString('\n')
	if err != nil {
		_ = p.cmd.Wait()
		return line, fmt.Errorf("lua: %w: %s", err, strings.TrimSpace(p.stderr.String()))
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// Close ends the script (its input closes; it is killed if it goes on)
// and removes its directory.
func (p *Proc) Close() error {
	_ = p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		err = <-done
	}
	_ = os.RemoveAll(p.dir)
	return err
}

// prepare writes files and script (as main.lua) into a fresh directory;
// it returns the directory and the path Lua sees it by.
func (in *Interp) prepare(script string, files map[string][]byte) (dir, seen string, err error) {
	base := os.TempDir()
	if in.Root != "" {
		base = filepath.Join(in.Root, "tmp")
	}
	dir, err = os.MkdirTemp(base, "strata-luatest-")
	if err != nil {
		return "", "", err
	}
	fail := func(err error) (string, string, error) {
		_ = os.RemoveAll(dir)
		return "", "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fail(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.lua"), []byte(script), 0o644); err != nil {
		return fail(err)
	}
	seen = dir // the directory as Lua sees it
	if in.Root != "" {
		seen = "/" + strings.TrimPrefix(strings.TrimPrefix(dir, in.Root), "/")
	}
	return dir, seen, nil
}

// command runs main.lua of the directory Lua sees as seen.
func (in *Interp) command(ctx context.Context, seen string, extra ...string) *exec.Cmd {
	args := append([]string{seen + "/main.lua", seen}, extra...)
	if in.Root != "" {
		cmd := exec.CommandContext(ctx, "chroot", append([]string{in.Root, in.Bin}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
		return cmd
	}
	return exec.CommandContext(ctx, in.Bin, args...)
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
