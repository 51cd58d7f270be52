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
