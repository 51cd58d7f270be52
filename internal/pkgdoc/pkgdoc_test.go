// Package pkgdoc holds the tests that keep the documentation true: every
// package of the module has a doc comment, every README names only paths
// that exist, and the top README's Layout lists the tree.
package pkgdoc

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasDoc walks the module and fails for each package (a
// folder of non-test Go files) without a package doc comment in any file.
func TestEveryPackageHasDoc(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s", root)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		docs := map[string]bool{} // package name -> has a doc comment
		fset := token.NewFileSet()
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			name := f.Name.Name
			docs[name] = docs[name] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
		}
		for pkg, documented := range docs {
			checked++
			if !documented {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("package %s (%s) has no doc comment", pkg, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages: the walk is broken", checked)
	}
}
