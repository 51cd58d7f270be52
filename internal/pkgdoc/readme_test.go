package pkgdoc

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// buildOutputs are top-level folders that exist only after a build
// (.gitignore); a README may name what lands in them.
var buildOutputs = map[string]bool{"bin": true, "dist": true}

// moduleRoot is the repository's root, two folders up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s", root)
	}
	return root
}

// readmes returns every README.md of the repository, relative to root.
func readmes(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || buildOutputs[d.Name()] && filepath.Dir(path) == root) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "README.md" {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 5 {
		t.Fatalf("found only %d READMEs: the walk is broken", len(out))
	}
	return out
}

// code spans: `...` on one line, outside fenced blocks.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// pathLike is what a repository path may be made of: no spaces, no
// flags, no URLs' colons.
var pathLike = regexp.MustCompile(`^[A-Za-z0-9_.{},*/-]+$`)

// apiVersion is a Kubernetes or Strata API version (`policy/v1`,
// `strata/v1`), which reads like a path but is none.
var apiVersion = regexp.MustCompile(`^[a-z0-9.-]+/v[0-9]+((alpha|beta)[0-9]+)?$`)

// namedPaths returns the code spans of a README that name a repository
// path, by line: a span without spaces whose first element is a file or
// folder at the repository's root or beside the README ("./" dropped).
func namedPaths(text string, isEntry func(first string) bool) map[int][]string {
	out := map[int][]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			p := strings.TrimPrefix(m[1], "./")
			if !pathLike.MatchString(p) || !strings.Contains(p, "/") || apiVersion.MatchString(p) ||
				strings.HasPrefix(p, "/") || strings.HasPrefix(p, ".") || strings.HasPrefix(p, "-") {
				continue
			}
			first, _, _ := strings.Cut(p, "/")
			if isEntry(first) {
				out[i+1] = append(out[i+1], p)
			}
		}
	}
	return out
}

// expand turns "a/{b,c}/d" into "a/b/d" and "a/c/d".
func expand(p string) []string {
	open := strings.Index(p, "{")
	end := strings.Index(p, "}")
	if open < 0 || end < open {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[open+1:end], ",") {
		out = append(out, expand(p[:open]+alt+p[end+1:])...)
	}
	return out
}

// exists reports whether p names something under one of the bases; a
// glob must match something.
func exists(p string, bases ...string) bool {
	for _, b := range bases {
		m, err := filepath.Glob(filepath.Join(b, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
		if err == nil && len(m) > 0 {
			return true
		}
	}
	return false
}

func entryOf(dirs ...string) func(string) bool {
	return func(first string) bool {
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, first)); err == nil {
				return true
			}
		}
		return false
	}
}

// TestNamedPathsExist fails for each path in backquotes in a README.md
// (`internal/slurmrest`, `etc/strata/reclaimd.yaml`, `cmd/reclaimd` in
// reclaimd/README.md) that does not exist, from the repository's root or
// from the README's folder.
func TestNamedPathsExist(t *testing.T) {
	root := moduleRoot(t)
	checked := 0
	for _, rel := range readmes(t, root) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, filepath.Dir(rel))
		top := func(first string) bool { return !buildOutputs[first] && entryOf(root)(first) }
		isEntry := func(first string) bool { return top(first) || entryOf(dir)(first) }
		for line, paths := range namedPaths(string(data), isEntry) {
			for _, p := range paths {
				for _, e := range expand(p) {
					checked++
					if !exists(e, root, dir) {
						t.Errorf("%s:%d: `%s` names %s, which is not in the repository: fix the path or the text", rel, line, p, e)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d paths: the span parser is broken", checked)
	}
}

func TestNamedPaths(t *testing.T) {
	isEntry := func(first string) bool { return first == "internal" || first == "etc" || first == "cmd" }
	text := "See `internal/slurmrest` and `etc/strata/*.yaml`, `cmd/reclaimd`; not `/etc/strata/x.yaml`,\n" +
		"`make lint`, `github.com/x/y`, `strata:class=train`, `internal`, `etc/v1`, `./etc/x` or `test/x`.\n" +
		"```\ninternal/not-a-span\n`internal/in-a-fence`\n```\n" +
		"`internal/{a,b}/c`\n"
	got := namedPaths(text, isEntry)
	want := map[int][]string{1: {"internal/slurmrest", "etc/strata/*.yaml", "cmd/reclaimd"}, 2: {"etc/x"}, 7: {"internal/{a,b}/c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("namedPaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"internal/a/c", "internal/b/c"}, expand("internal/{a,b}/c")); diff != "" {
		t.Errorf("expand (-want +got):\n%s", diff)
	}
}

// layoutEntry is one line of the top README's Layout block: "name/" at
// the start of a line is a top-level folder; an indented "name" under
// "internal/" is one of its packages.
var layoutEntry = regexp.MustCompile(`^(\s*)([A-Za-z0-9_.-]+)/?(\s|$)`)

// layout reads the fenced block after "## Layout" in the top README.
func layout(t *testing.T, text string) (top, internal []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	in, fenced, under := false, false, ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Layout"
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "```"):
			if fenced {
				return top, internal
			}
			fenced = true
			continue
		case !fenced || strings.TrimSpace(line) == "":
			continue
		}
		m := layoutEntry.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("README.md Layout: line %q does not start with a folder", line)
			continue
		}
		if m[1] == "" {
			under = m[2]
			top = append(top, m[2])
		} else if under == "internal" {
			internal = append(internal, m[2])
		}
	}
	t.Fatal(`README.md has no "## Layout" section with a fenced block`)
	return nil, nil
}

// dirs lists the folders in dir, but hidden ones and build outputs.
func dirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !buildOutputs[e.Name()] {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestLayoutIsTheTree: the top README's Layout lists every top-level
// folder, one a line, and under internal/ every shared package, and
// nothing else.
func TestLayoutIsTheTree(t *testing.T) {
	root := moduleRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	top, internal := layout(t, string(data))
	report := func(listed, tree []string, line, path string) {
		for _, d := range tree {
			if !slices.Contains(listed, d) {
				t.Errorf("README.md Layout: add the line %q: %s exists", fmt.Sprintf(line, d), fmt.Sprintf(path, d))
			}
		}
		for _, d := range listed {
			if !slices.Contains(tree, d) {
				t.Errorf("README.md Layout: remove the line of %s: it is not in the tree", fmt.Sprintf(path, d))
			}
		}
	}
	report(top, dirs(t, root), "%s/  <what it holds>", "%s/")
	report(internal, dirs(t, filepath.Join(root, "internal")), "  %s  <what it is>  (under internal/, in alphabetical order)", "internal/%s")
	if !slices.IsSorted(internal) {
		t.Errorf("README.md Layout: list internal/'s packages in alphabetical order, not %v", internal)
	}
}
