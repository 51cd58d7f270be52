package slurmplugins

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
	cliDir  string
)

// TestMain removes the strata-policy binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if cliDir != "" {
		os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// policyCLI runs strata-policy, built once from this checkout (the
// plugin's data comes from its render; the policy packages are internal
// to policy/), and returns its output. It fails the test when the command
// fails.
func policyCLI(t testing.TB, args ...string) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliErr = os.MkdirTemp("", "strata-policy-"); cliErr != nil {
			return
		}
		cliPath = filepath.Join(cliDir, "strata-policy")
		out, err := exec.Command("go", "build", "-o", cliPath, "github.com/strata-hpc/strata/policy/cmd/strata-policy").CombinedOutput()
		if err != nil {
			cliErr = &buildError{err: err, out: string(out)}
		}
	})
	if cliErr != nil {
		t.Fatalf("build strata-policy: %v", cliErr)
	}
	out, err := exec.Command(cliPath, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("strata-policy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
