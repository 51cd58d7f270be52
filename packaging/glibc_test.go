//go:build integration

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// partOf is the package that ships each binary.
var partOf = map[string]string{"topogen": "strata-topogen", "strata-policy": "strata-policy", "reclaimd": "strata-reclaimd",
	"strata-bridge": "strata-bridge", "strata-portal-api": "strata-portal-api"}

// readmeFloors reads packaging/README.md's table of glibc floors: for each
// binary, the newest GLIBC_ symbol it names ("" for none) and the floor
// its packages declare ("" for none).
func readmeFloors(t *testing.T) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| (`[^|]+`) \\| ([^|]+) \\| ([^|]+) \\|$")
	quoted := regexp.MustCompile("`([^`]+)`")
	symbol := regexp.MustCompile("^`GLIBC_([0-9.]+)`")
	declared := regexp.MustCompile("^`libc6 \\(>= ([0-9.]+)\\)`, `glibc >= ([0-9.]+)`$")
	out := map[string][2]string{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var floor [2]string
		sym, decl := strings.TrimSpace(m[2]), strings.TrimSpace(m[3])
		switch s := symbol.FindStringSubmatch(sym); {
		case s != nil:
			floor[0] = s[1]
		case sym != "none":
			continue // another table
		}
		switch d := declared.FindStringSubmatch(decl); {
		case d != nil && d[1] == d[2]:
			floor[1] = d[1]
		case d != nil:
			t.Errorf("README.md: %q declares two floors", line)
		case decl != "none":
			t.Errorf("README.md: %q: write the floor as `libc6 (>= x)`, `glibc >= x`, or none", line)
		}
		for _, q := range quoted.FindAllStringSubmatch(m[1], -1) {
			if _, ok := partOf[q[1]]; ok {
				out[q[1]] = floor
			}
		}
	}
	return out
}

// TestGlibcFloors: each packaged binary's newest GLIBC_ symbol (read from
// the binary in the deb, debug/elf) is at most the floor its deb
// (Depends: libc6 (>= x)) and its RPM (Requires: glibc >= x) declare; a
// binary that imports no glibc symbol declares none; and packaging's
// README table says exactly that of every binary.
func TestGlibcFloors(t *testing.T) {
	for _, tool := range []string{"dpkg-deb", "rpm"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not installed (make deps installs it)", tool)
		}
	}
	dist := packagesDir(t)
	readme := readmeFloors(t)
	depends := regexp.MustCompile(`libc6 \(>= ([0-9.]+)\)`)
	requires := regexp.MustCompile(`(?m)^glibc >= ([0-9.]+)$`)
	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			part := partOf[b]
			dir := t.TempDir()
			deb := findPackage(t, dist, part, "deb")
			run(t, "", "dpkg-deb", "-x", deb, dir)
			newest, err := newestGlibc(filepath.Join(dir, "usr/bin", b))
			if err != nil {
				t.Fatal(err)
			}
			debFloor := ""
			if m := depends.FindStringSubmatch(run(t, "", "dpkg-deb", "-f", deb, "Depends", "Pre-Depends")); m != nil {
				debFloor = m[1]
			}
			rpmFloor := ""
			if m := requires.FindStringSubmatch(run(t, "", "rpm", "-qp", "--nosignature", "--requires", findPackage(t, dist, part, "rpm"))); m != nil {
				rpmFloor = m[1]
			}
			t.Logf("%s: newest GLIBC_ symbol %q; %s declares libc6 (>= %q), glibc >= %q", b, newest, part, debFloor, rpmFloor)
			for _, f := range []struct{ what, floor string }{{"the deb's libc6 (>=)", debFloor}, {"the RPM's glibc >=", rpmFloor}} {
				switch {
				case newest == "" && f.floor != "":
					t.Errorf("%s imports no glibc symbol, but %s is %s", b, f.what, f.floor)
				case newest != "" && f.floor == "":
					t.Errorf("%s needs GLIBC_%s, but its package declares no %s", b, newest, f.what)
				case newest != "" && versionLess(f.floor, newest):
					t.Errorf("%s needs GLIBC_%s, newer than %s %s", b, newest, f.what, f.floor)
				}
			}
			r, ok := readme[b]
			if !ok {
				t.Fatalf("packaging/README.md's glibc table has no row for %s", b)
			}
			if r[0] != newest || r[1] != debFloor {
				t.Errorf("packaging/README.md says %s's newest symbol is %q and its floor %q; the package: %q and %q", b, r[0], r[1], newest, debFloor)
			}
		})
	}
}

// TestNVMLBindsLazily: the packaged topogen (linked by Zig, NVML's
// functions left undefined and weak: packaging/zig/cc) starts without
// NVML and says so, and with a libnvidia-ml.so.1 to open (testdata's
// fake-nvml.c, built here) calls that library's functions: the loader binds
// them at their first call, after go-nvml has opened it.
func TestNVMLBindsLazily(t *testing.T) {
	for _, tool := range []string{"dpkg-deb", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not installed (make deps installs it)", tool)
		}
	}
	dist := packagesDir(t)
	dir := t.TempDir()
	run(t, "", "dpkg-deb", "-x", findPackage(t, dist, "strata-topogen", "deb"), dir)
	topogen := filepath.Join(dir, "usr/bin/topogen")
	lib := filepath.Join(dir, "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "", "gcc", "-shared", "-fPIC", "-o", filepath.Join(lib, "libnvidia-ml.so.1"), "testdata/fake-nvml.c")

	collect := func(env ...string) (string, error) {
		cmd := exec.Command(topogen, "collect", "--hostname", "gpu1")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := collect("LD_LIBRARY_PATH=" + filepath.Join(dir, "none"))
	if err == nil || !strings.Contains(out, "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("topogen collect without NVML: %v, want it to say NVML is not found:\n%s", err, out)
	}
	out, err = collect("LD_LIBRARY_PATH=" + lib)
	if err != nil || !strings.Contains(out, `"driver_version": "999.42.1"`) || !strings.Contains(out, `"cuda_version": "12.8"`) {
		t.Errorf("topogen collect with testdata/fake-nvml.c as NVML: %v, want the fake's driver 999.42.1 and CUDA 12.8:\n%s", err, out)
	}
}
