package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/policy/internal/render"
)

// TestRender: render writes every registered file where its reader looks,
// with its mode, leaves no temporary file, keeps the mode an admin gave a
// file, and a second render changes no byte.
func TestRender(t *testing.T) {
	out, slurm := t.TempDir(), t.TempDir()
	args := []string{"strata-policy", "render", "--policy", "../../../etc/strata/policy.yaml", "--output-dir", out, "--slurm-dir", slurm}
	dirs := map[string]string{render.DirStrata: out, render.DirSlurm: slurm}
	renderOnce := func() map[string][]byte {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, &stdout, &stderr); err != nil {
			t.Fatalf("render: %v\n%s", err, stderr.String())
		}
		got := map[string][]byte{}
		for _, f := range render.Files() {
			path := filepath.Join(dirs[f.Dir], f.Name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got[path] = data
			if !strings.Contains(stdout.String(), "wrote "+path) {
				t.Errorf("output does not say it wrote %s", path)
			}
		}
		return got
	}
	first := renderOnce()
	for _, f := range render.Files() {
		path := filepath.Join(dirs[f.Dir], f.Name)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != f.Mode {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), f.Mode)
		}
	}
	if _, err := tenantmap.Load(filepath.Join(out, "tenants.json")); err != nil {
		t.Errorf("the rendered tenant map does not load: %v", err)
	}

	// An admin makes the tenant map group-only; the next render keeps it.
	tenants := filepath.Join(out, "tenants.json")
	if err := os.Chmod(tenants, 0o640); err != nil {
		t.Fatal(err)
	}
	second := renderOnce()
	for path, data := range first {
		if !bytes.Equal(data, second[path]) {
			t.Errorf("%s changed on a second render", path)
		}
	}
	if st, _ := os.Stat(tenants); st.Mode().Perm() != 0o640 {
		t.Errorf("tenants.json mode %v after a second render, want the admin's 0640", st.Mode().Perm())
	}
	for _, dir := range []string{out, slurm} {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), ".tmp") {
				t.Errorf("temporary file left: %s", path)
			}
			return err
		})
	}
}
