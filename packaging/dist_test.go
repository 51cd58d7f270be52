package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildFromTarball: a tarball of make dist, unpacked where there is no
// git, builds with the version of the commit it was made from (its VERSION
// file); without that file, make build, make packages and version.sh stop
// and say why, instead of stamping "unknown" or a version dpkg refuses.
func TestBuildFromTarball(t *testing.T) {
	for _, tool := range []string{"git", "make", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--show-toplevel").Output(); err != nil || strings.TrimSpace(string(out)) != root {
		t.Skipf("%s is not a git checkout", root)
	}
	scratch := t.TempDir()
	env := append(os.Environ(), "GIT_CEILING_DIRECTORIES="+scratch, "MAKEFLAGS=", "MAKELEVEL=")
	runIn := func(dir string, extraEnv []string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(env, extraEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(dir string, extraEnv []string, name string, args ...string) string {
		t.Helper()
		out, err := runIn(dir, extraEnv, name, args...)
		if err != nil {
			t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return out
	}

	wantVersion := strings.TrimSpace(must(root, nil, "git", "describe", "--tags", "--always"))
	wantRevision := strings.TrimSpace(must(root, nil, "git", "rev-parse", "HEAD"))
	wantPackage := strings.TrimSpace(must(root, []string{"STRATA_VERSION_CLEAN=1"}, "sh", "packaging/nfpm/version.sh"))

	dist := filepath.Join(scratch, "dist")
	must(root, nil, "make", "--no-print-directory", "dist", "DIST="+dist)
	tarball := filepath.Join(dist, "strata-"+wantPackage+".tar.gz")
	src := filepath.Join(scratch, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	must(src, nil, "tar", "-xzf", tarball, "--strip-components=1")
	if _, err := os.Stat(filepath.Join(src, ".git")); err == nil {
		t.Fatal("the tarball has .git")
	}

	want := "version: " + wantVersion + "\nrevision: " + wantRevision + "\npackage: " + wantPackage + "\n"
	if got := must(src, nil, "make", "--no-print-directory", "version"); got != want {
		t.Errorf("make version in the tarball:\n%s\nwant:\n%s", got, want)
	}
	if got := strings.TrimSpace(must(src, nil, "sh", "packaging/nfpm/version.sh")); got != wantPackage {
		t.Errorf("version.sh in the tarball: %q, want %q", got, wantPackage)
	}
	// make build stamps the VERSION file's version (GO=echo prints the
	// go commands instead of running them).
	if out := must(src, nil, "make", "--no-print-directory", "build", "GO=echo"); !strings.Contains(out, "buildinfo.version="+wantVersion+" ") ||
		!strings.Contains(out, "buildinfo.revision="+wantRevision) {
		t.Errorf("make build in the tarball does not stamp version %s and revision %s:\n%s", wantVersion, wantRevision, out)
	}

	// Without the VERSION file, every way in stops with a message.
	if err := os.Remove(filepath.Join(src, "VERSION")); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"make", "--no-print-directory", "build", "GO=echo"},
		{"make", "--no-print-directory", "packages", "GO=echo", "NFPM=/bin/true"},
		{"make", "--no-print-directory", "version"},
		{"sh", "packaging/nfpm/version.sh"},
	} {
		out, err := runIn(src, nil, c[0], c[1:]...)
		if err == nil || !strings.Contains(out, "cannot tell the version") {
			t.Errorf("%s without git or VERSION: %v, want a failure saying it cannot tell the version:\n%s", strings.Join(c, " "), err, out)
		}
	}
}
