package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

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

// TestRenderAllOrNone: when a later output cannot be written, render
// fails and every earlier target keeps its old content.
func TestRenderAllOrNone(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, out string){
		"the last file is a directory": func(t *testing.T, out string) {
			p := filepath.Join(out, "tenants.json")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"a later file's directory is a file": func(t *testing.T, out string) {
			p := filepath.Join(out, "k8s")
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, slurm := t.TempDir(), t.TempDir()
			args := []string{"strata-policy", "render", "--policy", "../../../etc/strata/policy.yaml", "--output-dir", out, "--slurm-dir", slurm}
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Fatalf("first render: %v\n%s", err, stderr.String())
			}
			dirs := map[string]string{render.DirStrata: out, render.DirSlurm: slurm}
			old := map[string]string{}
			for _, f := range render.Files() {
				path := filepath.Join(dirs[f.Dir], f.Name)
				old[path] = "old " + f.Name
				if err := os.WriteFile(path, []byte(old[path]), f.Mode); err != nil {
					t.Fatal(err)
				}
			}
			spoil(t, out)

			stdout.Reset()
			stderr.Reset()
			if err := run(t.Context(), args, &stdout, &stderr); err == nil {
				t.Fatal("render succeeded with an unwritable output")
			}
			for path, want := range old {
				data, err := os.ReadFile(path)
				if err != nil {
					continue // the spoiled one
				}
				if string(data) != want {
					t.Errorf("%s was replaced by a render that failed", path)
				}
			}
			if strings.Contains(stdout.String(), "wrote ") {
				t.Errorf("a failed render says it wrote files:\n%s", stdout.String())
			}
			for _, dir := range []string{out, slurm} {
				_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
					if err == nil && (strings.Contains(d.Name(), ".tmp-") || strings.Contains(d.Name(), ".old-")) {
						t.Errorf("temporary file left: %s", path)
					}
					return err
				})
			}
		})
	}
}

// TestNoPackageOwnsARenderedPath: no package ships a file where render
// writes by default (its store, its links, Slurm's files), nor at the
// places earlier releases rendered to: a rendered file that is also a
// conffile makes the next upgrade whose example differs stop at dpkg's
// question, and fail when nobody is there to answer.
func TestNoPackageOwnsARenderedPath(t *testing.T) {
	type nfpm struct {
		Name     string `yaml:"name"`
		Contents []struct {
			Dst  string `yaml:"dst"`
			Type string `yaml:"type"`
		} `yaml:"contents"`
	}
	configs, err := filepath.Glob("../../../packaging/nfpm/*.yaml")
	if err != nil || len(configs) < 5 {
		t.Fatalf("nfpm configs: %v %v", configs, err)
	}
	var rendered []string // paths no package may ship, nor ship below
	dirs := map[string]string{render.DirStrata: defaultOutputDir, render.DirSlurm: "/etc/slurm"}
	rendered = append(rendered, defaultOutputDir)
	for _, f := range render.Files() {
		rendered = append(rendered, filepath.Join(dirs[f.Dir], f.Name))
		if f.Dir == render.DirStrata {
			rendered = append(rendered, filepath.Join(legacyDir, f.Name))
		}
	}
	for _, path := range configs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c nfpm
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, ct := range c.Contents {
			dst := filepath.Clean(ct.Dst)
			for _, r := range rendered {
				if ct.Type == "dir" && strings.HasPrefix(r, dst+"/") {
					continue // a folder above a rendered path, such as /etc/strata
				}
				if dst == r || strings.HasPrefix(dst, r+"/") || strings.HasPrefix(r, dst+"/") && ct.Type != "dir" {
					t.Errorf("%s ships %s (%s), where strata-policy render writes %s", c.Name, ct.Dst, ct.Type, r)
				}
			}
		}
	}
}
