// Package strictyamltest checks a kind of YAML file against its test
// files, in the manner of Prometheus' config/testdata: every
// testdata/*.good.yaml loads, and every testdata/*.bad.yaml fails with
// exactly the diagnostics of its *.bad.yaml.golden, one per line, each
// "file:line:col: message (hint: ...)". Run the test with -update to
// write the golden files from what the loader says, and review the diff.
package strictyamltest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// located is the start of a diagnostic with a position.
var located = regexp.MustCompile(`^[^:]+:\d+:\d+: `)

// Files checks the test files of dir with load, which reads one file and
// returns its error. With update it writes the golden files instead of
// comparing. It returns the good files' paths, for tests of what they
// load to.
func Files(t *testing.T, dir string, update bool, load func(path string) error) []string {
	t.Helper()
	good, err := filepath.Glob(filepath.Join(dir, "*.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := filepath.Glob(filepath.Join(dir, "*.bad.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(good) == 0 || len(bad) == 0 {
		t.Fatalf("%s: want .good.yaml and .bad.yaml files", dir)
	}
	goldens, err := filepath.Glob(filepath.Join(dir, "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		if _, err := os.Stat(strings.TrimSuffix(g, ".golden")); err != nil && !update {
			t.Errorf("%s has no file beside it: remove it", g)
		}
	}
	for _, f := range good {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := load(f); err != nil {
				t.Errorf("a good file fails:\n%v", err)
			}
		})
	}
	for _, f := range bad {
		t.Run(filepath.Base(f), func(t *testing.T) {
			err := load(f)
			if err == nil {
				t.Fatal("a bad file loads")
			}
			got := err.Error() + "\n"
			golden := f + ".golden"
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("%v (run the test with -update to write it)", rerr)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s (-update rewrites it):\ngot:\n%swant:\n%s", golden, got, want)
			}
			for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				if !strings.HasPrefix(line, f+":") || !located.MatchString(line) {
					t.Errorf("%q is not file:line:col: message", line)
				}
			}
		})
	}
	return good
}
