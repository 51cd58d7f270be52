package generation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// bed is a store in root with four files in it and two in a folder of
// their own (Slurm's), as render has them.
type bed struct {
	root, other string
}

func newBed(t *testing.T) bed {
	t.Helper()
	d := t.TempDir()
	return bed{root: filepath.Join(d, "rendered"), other: filepath.Join(d, "slurm")}
}

// files is the set a render of version v writes: every file says v.
func (b bed) files(v string) []File {
	var out []File
	for _, n := range []string{"reclaim-rules.json", "tenants.json", "serving.json", "k8s/resourcequotas.yaml"} {
		out = append(out, File{Rel: n, Link: filepath.Join(b.root, n), Data: []byte(v + " " + n + "\n"), Mode: 0o644})
	}
	for _, n := range []string{"strata/policy.lua", "strata/jobpolicy.json"} {
		out = append(out, File{Rel: "slurm/" + n, Link: filepath.Join(b.other, n), Data: []byte(v + " " + n + "\n"), Mode: 0o644,
			Legacy: []string{"." + filepath.Base(n) + ".old-*"}})
	}
	return out
}

// versions reads every stable path as a reader would and returns the
// version each holds ("" for a missing file).
func (b bed) versions(t *testing.T) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, f := range b.files("x") {
		data, err := os.ReadFile(f.Link)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			got[f.Rel] = ""
		case err != nil:
			t.Fatalf("read %s: %v", f.Link, err)
		default:
			v, _, _ := strings.Cut(string(data), " ")
			got[f.Rel] = v
		}
	}
	return got
}

// one returns the single version every file holds, failing on a mix.
func (b bed) one(t *testing.T) string {
	t.Helper()
	vs := b.versions(t)
	var seen []string
	for _, v := range vs {
		if !slices.Contains(seen, v) {
			seen = append(seen, v)
		}
	}
	if len(seen) != 1 {
		t.Fatalf("readers see a mix of generations: %v", vs)
	}
	return seen[0]
}

// leftovers lists what is in the store and the other folder beyond one
// generation, current, the lock and the stable paths.
func (b bed) leftovers(t *testing.T) []string {
	t.Helper()
	var out []string
	gens, err := os.ReadDir(filepath.Join(b.root, GenerationsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != 1 {
		for _, g := range gens {
			out = append(out, filepath.Join(GenerationsName, g.Name()))
		}
	}
	for _, dir := range []string{b.root, b.other} {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == GenerationsName {
				return filepath.SkipDir
			}
			if strings.Contains(d.Name(), ".tmp-") || strings.Contains(d.Name(), ".old-") {
				out = append(out, path)
			}
			return nil
		})
	}
	return out
}

// points lists every crash point of a commit of b's files.
func points(t *testing.T, b bed, v string) []string {
	t.Helper()
	var ps []string
	s := &Store{Root: b.root, crash: func(p string) bool { ps = append(ps, p); return false }}
	if _, err := s.Commit(b.files(v)); err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestCommitCrash: a commit stopped at any point where it writes (as a
// kill -9 would stop it) leaves every reader the old generation or the
// new one, never a mix, and the next commit removes what it left and
// leaves one generation and no temporary file.
func TestCommitCrash(t *testing.T) {
	probe := newBed(t)
	ps := points(t, probe, "v0") // the first: links made after the switch
	for _, p := range points(t, probe, "v1") {
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	if len(ps) < 14 {
		t.Fatalf("crash points %v: want one per file, the generation and the switch", ps)
	}
	for _, first := range []bool{false, true} {
		for _, p := range ps {
			t.Run(fmt.Sprintf("first %v, at %s", first, p), func(t *testing.T) {
				b := newBed(t)
				old := ""
				if !first {
					if _, err := (&Store{Root: b.root}).Commit(b.files("old")); err != nil {
						t.Fatal(err)
					}
					old = "old"
				}
				crashed := false
				s := &Store{Root: b.root, crash: func(q string) bool { crashed = crashed || q == p; return q == p }}
				if _, err := s.Commit(b.files("new")); !errors.Is(err, errCrashed) {
					if err != nil || crashed {
						t.Fatalf("commit = %v, want it stopped at %s", err, p)
					}
					t.Skipf("no point %s in this kind of commit", p)
				}
				if first {
					// No generation before: each path is missing or new.
					for rel, v := range b.versions(t) {
						if v != "" && v != "new" {
							t.Errorf("%s holds %q", rel, v)
						}
					}
				} else if v := b.one(t); v != old && v != "new" {
					t.Errorf("readers see %q, want old or new", v)
				}
				if _, err := (&Store{Root: b.root}).Commit(b.files("next")); err != nil {
					t.Fatalf("the next commit: %v", err)
				}
				if v := b.one(t); v != "next" {
					t.Errorf("after the next commit readers see %q", v)
				}
				if l := b.leftovers(t); len(l) > 0 {
					t.Errorf("left after the next commit: %v", l)
				}
			})
		}
	}
}

// TestCommitFails: a commit that cannot write (a stable path is a
// folder) changes nothing readers see and leaves no generation behind.
func TestCommitFails(t *testing.T) {
	b := newBed(t)
	if _, err := (&Store{Root: b.root}).Commit(b.files("old")); err != nil {
		t.Fatal(err)
	}
	// An admin puts a folder where a file of the new set goes.
	files := append(b.files("new"), File{Rel: "extra.json", Link: filepath.Join(b.root, "extra.json"), Data: []byte("new extra.json\n"), Mode: 0o644})
	if err := os.Mkdir(filepath.Join(b.root, "extra.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := (&Store{Root: b.root}).Commit(files)
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("commit = %v, want the folder named", err)
	}
	if v := b.one(t); v != "old" {
		t.Errorf("readers see %q after a failed commit", v)
	}
	if l := b.leftovers(t); len(l) > 0 {
		t.Errorf("a failed commit left %v", l)
	}
}

// TestCommitKeepsMode: a file an admin made group-only (through its
// stable path, or as the plain file an earlier release wrote) keeps its
// mode in every later generation; a new file gets its own.
func TestCommitKeepsMode(t *testing.T) {
	b := newBed(t)
	legacy := filepath.Join(b.other, "strata", "policy.lua")
	if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, []byte("legacy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What an earlier release's killed render left beside it.
	for _, n := range []string{".policy.lua.tmp-123", ".policy.lua.old-456"} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(legacy), n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &Store{Root: b.root}
	if _, err := s.Commit(b.files("v1")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(legacy); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("%s is not a link after a commit: %v", legacy, err)
	}
	if err := os.Chmod(filepath.Join(b.root, "tenants.json"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(b.files("v2")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{
		filepath.Join(b.root, "tenants.json"): 0o640,
		legacy:                                0o600,
		filepath.Join(b.root, "reclaim-rules.json"): 0o644,
	} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
	if v := b.one(t); v != "v2" {
		t.Errorf("readers see %q", v)
	}
	if l := b.leftovers(t); len(l) > 0 {
		t.Errorf("left: %v", l)
	}
	// Links in the store are relative (the folder can be copied whole),
	// links elsewhere absolute.
	if l, _ := os.Readlink(filepath.Join(b.root, "k8s", "resourcequotas.yaml")); l != "../current/k8s/resourcequotas.yaml" {
		t.Errorf("link in the store = %q", l)
	}
	if l, _ := os.Readlink(legacy); l != filepath.Join(b.root, "current", "slurm", "strata", "policy.lua") {
		t.Errorf("link elsewhere = %q", l)
	}
}

// TestCommitLocked: a second commit while one holds the store's lock
// fails at once and says why.
func TestCommitLocked(t *testing.T) {
	b := newBed(t)
	s := &Store{Root: b.root}
	if _, err := s.Commit(b.files("v1")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(b.root, LockName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(b.files("v2"))
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "wait for it to finish") {
		t.Fatalf("commit while locked = %v, want ErrBusy", err)
	}
	if v := b.one(t); v != "v1" {
		t.Errorf("readers see %q", v)
	}
}
