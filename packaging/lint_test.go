//go:build integration

package packaging

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// lintFinding is an error or a warning of lintian ("E: pkg: tag ...") or
// rpmlint ("pkg.x86_64: W: tag ..."); information, pedantic notes and
// overridden tags do not count.
var lintFinding = regexp.MustCompile(`^(?:\S+: )?([EW]): `)

// lintCount runs a linter and returns its errors and warnings.
func lintCount(t *testing.T, name string, args ...string) (errs, warns []string) {
	t.Helper()
	out, _ := exec.Command(name, args...).CombinedOutput() // both exit non-zero on findings
	for _, line := range strings.Split(string(out), "\n") {
		m := lintFinding.FindStringSubmatch(line)
		switch {
		case m == nil:
		case m[1] == "E":
			errs = append(errs, line)
		default:
			warns = append(warns, line)
		}
	}
	return errs, warns
}

// TestLint runs lintian on every deb and rpmlint on every RPM: no error
// and no warning, but those a written override names with its reason
// (packaging/lintian/<package>, installed as the package's lintian
// overrides; packaging/rpmlintrc).
func TestLint(t *testing.T) {
	for _, tool := range []string{"lintian", "rpmlint"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not installed (make deps installs it)", tool)
		}
	}
	dist := packagesDir(t)
	rc := filepath.Join(repoRoot(t), "packaging", "rpmlintrc")
	for _, part := range parts {
		t.Run(part, func(t *testing.T) {
			errs, warns := lintCount(t, "lintian", "--no-cfg", findPackage(t, dist, part, "deb"))
			for _, l := range append(errs, warns...) {
				t.Errorf("lintian: %s", l)
			}
			t.Logf("lintian: %d errors, %d warnings", len(errs), len(warns))
			errs, warns = lintCount(t, "rpmlint", "--ignore-unused-rpmlintrc", "-r", rc, findPackage(t, dist, part, "rpm"))
			for _, l := range append(errs, warns...) {
				t.Errorf("rpmlint: %s", l)
			}
			t.Logf("rpmlint: %d errors, %d warnings", len(errs), len(warns))
		})
	}
}
