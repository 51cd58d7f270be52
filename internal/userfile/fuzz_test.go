package userfile

import (
	"os"
	"strings"
	"testing"
)

// FuzzReadFile: whatever the name, ReadFile returns only a regular file
// of the tree beneath the root, never the secret outside it (through a
// link, .. or an absolute name), and its errors never quote the secret.
// Seeded from TestReadFile's names.
func FuzzReadFile(f *testing.F) {
	for _, s := range []string{"spec.yaml", "sub/spec.yaml", "exact", "big", "fifo", "zero", "token", "inside-link", "adir",
		"../etc/token", "sub/../../etc/token", "linkdir/token", "/etc/passwd", "sub//spec.yaml", "nope.yaml", ".", "", "sub/./spec.yaml"} {
		f.Add(s)
	}
	root, _ := tree(f)
	inside := map[string]bool{"name: a\n": true, "name: b\n": true, strings.Repeat("x", 64): true}
	f.Fuzz(func(t *testing.T, name string) {
		for rname, resolve := range resolvers {
			data, err := readFile(root, name, Policy{UID: uint32(os.Getuid()), MaxSize: 64}, resolve)
			if err != nil {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("%s: ReadFile(%q) error quotes the secret: %v", rname, name, err)
				}
				continue
			}
			if !inside[string(data)] {
				t.Fatalf("%s: ReadFile(%q) = %q: not a file of the root", rname, name, data)
			}
		}
	})
}
