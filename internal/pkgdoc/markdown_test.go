package pkgdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tableRow is a line of a Markdown table; tableRule its header rule.
var (
	tableRow  = regexp.MustCompile(`^\s*\|`)
	tableRule = regexp.MustCompile(`^\s*\|(\s*:?-+:?\s*\|)+\s*$`)
)

// splitTables returns the lines (1-based) that start a block of table
// rows without a header rule right after a blank line that followed a
// table: rows a blank line cut off from their table, which Markdown shows
// as plain text.
func splitTables(text string) []int {
	var out []int
	lines := strings.Split(text, "\n")
	fenced := false
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !tableRow.MatchString(lines[i]) || i == 0 {
			continue
		}
		// The start of a block of rows: what precedes it?
		if tableRow.MatchString(lines[i-1]) {
			continue
		}
		j := i - 1
		for j >= 0 && strings.TrimSpace(lines[j]) == "" {
			j--
		}
		if j == i-1 || j < 0 || !tableRow.MatchString(lines[j]) {
			continue // a new table after prose, or no blank line
		}
		if i+1 < len(lines) && tableRule.MatchString(lines[i+1]) {
			continue // a table of its own, with its header
		}
		out = append(out, i+1)
	}
	return out
}

// makeCommand is `make <target> ...` in a code span, or a line of a
// fenced block that runs make.
var makeCommand = regexp.MustCompile(`^\s*(?:sudo\s+)?make\s+(?:-C\s+\S+\s+)?([a-z][a-z0-9-]*)(?:\s|$)`)

// makeTargets returns the make targets a README names in code (spans and
// fenced blocks), by line.
func makeTargets(text string) map[int][]string {
	out := map[int][]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		var cmds []string
		if fenced {
			cmds = []string{line}
		} else {
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				cmds = append(cmds, m[1])
			}
		}
		for _, c := range cmds {
			if m := makeCommand.FindStringSubmatch(c); m != nil && !strings.Contains(m[1], "=") {
				out[i+1] = append(out[i+1], m[1])
			}
		}
	}
	return out
}

// makefileTarget is a rule's target at the start of a Makefile line.
var makefileTarget = regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+(?:\s+[a-zA-Z0-9_.-]+)*)\s*:([^=]|$)`)

// targetsOf returns the targets the Makefile defines.
func targetsOf(makefile string) []string {
	var out []string
	for _, m := range makefileTarget.FindAllStringSubmatch(makefile, -1) {
		out = append(out, strings.Fields(m[1])...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestTablesAreWhole fails for each README whose table a blank line cuts
// in two: the rows after the blank line do not render as a table.
func TestTablesAreWhole(t *testing.T) {
	root := moduleRoot(t)
	for _, rel := range readmes(t, root) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range splitTables(string(data)) {
			t.Errorf("%s:%d: a blank line cuts this table in two, so the rows from here on show as text: remove the blank line", rel, line)
		}
	}
}

// TestNamedMakeTargetsExist fails for each `make <target>` in a README
// whose target the Makefile does not have.
func TestNamedMakeTargetsExist(t *testing.T) {
	root := moduleRoot(t)
	mf, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := targetsOf(string(mf))
	if len(targets) < 10 {
		t.Fatalf("found only %d make targets: the Makefile parser is broken", len(targets))
	}
	checked := 0
	for _, rel := range readmes(t, root) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for line, names := range makeTargets(string(data)) {
			for _, n := range names {
				checked++
				if _, ok := slices.BinarySearch(targets, n); !ok {
					t.Errorf("%s:%d: `make %s`: the Makefile has no target %s (make help lists them)", rel, line, n, n)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d make commands: the README parser is broken", checked)
	}
}

func TestSplitTables(t *testing.T) {
	text := "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n| 5 | 6 |\n" + // 5: cut off
		"\ntext\n\n| c | d |\n|---|---|\n| 7 | 8 |\n" + // a table after prose
		"\n| e | f |\n|:--|--:|\n| 9 | 0 |\n" + // two tables, each with a header
		"```\n| x |\n\n| y |\n```\n" // fenced: not a table
	if diff := cmp.Diff([]int{5}, splitTables(text)); diff != "" {
		t.Errorf("splitTables (-want +got):\n%s", diff)
	}
}

func TestMakeTargets(t *testing.T) {
	text := "Run `make build`, `make packages PKG_VERSION=1.0.0` and `make -C dir lint`; not `go build` or make it.\n" +
		"```\nmake demo\n  make test-unit   # indented\nmakes no sense\n```\n" +
		"`make VERSION=1.0 build`\n"
	want := map[int][]string{1: {"build", "packages", "lint"}, 3: {"demo"}, 4: {"test-unit"}}
	if diff := cmp.Diff(want, makeTargets(text)); diff != "" {
		t.Errorf("makeTargets (-want +got):\n%s", diff)
	}
	mf := "X := 1\n.PHONY: build\nbuild: ## b\n\tgo build\npackages-nfpm: $(NFPM)\n$(NFPM):\nA = b:c\n"
	if diff := cmp.Diff([]string{".PHONY", "build", "packages-nfpm"}, targetsOf(mf)); diff != "" {
		t.Errorf("targetsOf (-want +got):\n%s", diff)
	}
}

// buildOutput is a binary a Makefile recipe writes into ./bin.
var buildOutput = regexp.MustCompile(`-o \$\(BIN\)/([a-z-]+)`)

// recipe returns the lines of a Makefile rule's recipe.
func recipe(makefile, target string) string {
	_, after, ok := strings.Cut(makefile, "\n"+target+":")
	if !ok {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(after, "\n")[1:] {
		if !strings.HasPrefix(l, "\t") {
			break
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// TestMakeBuildRowNamesEveryBinary: the top README's row for `make build`
// names every binary the target writes into ./bin.
func TestMakeBuildRowNamesEveryBinary(t *testing.T) {
	root := moduleRoot(t)
	mf, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, m := range buildOutput.FindAllStringSubmatch(recipe(string(mf), "build"), -1) {
		built = append(built, m[1])
	}
	if len(built) < 5 {
		t.Fatalf("make build writes only %v: the recipe parser is broken", built)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| `make build` |") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("README.md has no `make build` row")
	}
	for _, b := range built {
		if !strings.Contains(row, "`"+b+"`") {
			t.Errorf("README.md: the `make build` row does not name `%s`, which make build writes into ./bin", b)
		}
	}
}

// TestEtcReadmeNamesEveryExample: every file of etc/strata is named by a
// row of etc/README.md's first table (a glob counts).
func TestEtcReadmeNamesEveryExample(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "etc", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	inTable := false
	for _, l := range strings.Split(string(readme), "\n") {
		if !tableRow.MatchString(l) {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cell := strings.Split(l, "|")[1]
		for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
			patterns = append(patterns, m[1])
		}
	}
	err = filepath.WalkDir(filepath.Join(root, "etc", "strata"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root, "etc"), path)
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, rel); ok {
				return nil
			}
		}
		t.Errorf("etc/README.md: no row of its first table names %s: add one saying what reads it", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
