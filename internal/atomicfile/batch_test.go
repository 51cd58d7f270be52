package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBatchAllOrNone: when any file of a batch cannot be written, every
// target keeps its old content and mode, and no temporary file is left.
func TestBatchAllOrNone(t *testing.T) {
	for name, tc := range map[string]struct {
		// spoil makes the last target unwritable; it returns that path.
		spoil   func(t *testing.T, dir string) string
		wantErr string
	}{
		"its directory is a file": {
			spoil: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "notadir"), "x")
				return filepath.Join(dir, "notadir", "c.json")
			},
			wantErr: "not a directory",
		},
		"its directory is missing": {
			spoil: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "missing", "c.json")
			},
			wantErr: "no such file or directory",
		},
		"it is a directory": {
			spoil: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "c.json")
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			},
			wantErr: "it is a directory",
		},
		"it is queued twice": {
			spoil: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "sub", "..", "a.lua")
			},
			wantErr: "queued twice",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			a, b := filepath.Join(dir, "a.lua"), filepath.Join(dir, "sub", "b.conf")
			writeFile(t, a, "old a")
			if err := os.Chmod(a, 0o640); err != nil {
				t.Fatal(err)
			}
			bad := tc.spoil(t, dir)

			batch := NewBatch()
			batch.Add(a, []byte("new a"), 0o644)
			batch.Add(b, []byte("new b"), 0o644)
			batch.Add(bad, []byte("new c"), 0o644)
			err := batch.Commit()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Commit() = %v, want an error with %q", err, tc.wantErr)
			}
			if got := readFile(t, a); got != "old a" {
				t.Errorf("a.lua = %q after a failed batch, want the old content", got)
			}
			if st, _ := os.Stat(a); st.Mode().Perm() != 0o640 {
				t.Errorf("a.lua mode %v, want the old 0640", st.Mode().Perm())
			}
			if _, err := os.Stat(b); !os.IsNotExist(err) {
				t.Errorf("sub/b.conf exists after a failed batch (err %v), want it never created", err)
			}
			noTemporaries(t, dir)
			if batch.Len() != 0 {
				t.Errorf("Len() = %d after Commit, want 0", batch.Len())
			}
		})
	}
}

// TestBatchCommit: a good batch replaces every file with its content, the
// mode rule of Write, and no leftovers.
func TestBatchCommit(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b.sh")
	writeFile(t, a, "old")
	if err := os.Chmod(a, 0o600); err != nil {
		t.Fatal(err)
	}
	batch := NewBatch()
	batch.Add(a, []byte("new a"), 0o644)
	batch.Add(b, []byte("#!/bin/sh\n"), 0o755)
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]struct {
		data string
		mode fs.FileMode
	}{a: {"new a", 0o600}, b: {"#!/bin/sh\n", 0o755}} {
		if got := readFile(t, path); got != want.data {
			t.Errorf("%s = %q, want %q", path, got, want.data)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != want.mode {
			t.Errorf("%s mode %v, want %v", path, st.Mode().Perm(), want.mode)
		}
	}
	noTemporaries(t, dir)
	if err := NewBatch().Commit(); err != nil {
		t.Errorf("an empty batch: %v", err)
	}
}

// TestBatchRestore: when a rename fails after others succeeded, the
// targets already replaced get their old files back and new ones go.
func TestBatchRestore(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "old a")
	old, existed, err := linkOld(a)
	if err != nil || old == "" || !existed {
		t.Fatalf("linkOld = %q, %v, %v", old, existed, err)
	}
	// What Commit does next: a new file renamed over each target.
	for path, data := range map[string]string{a: "new a", b: "new b"} {
		tmp, err := stage(path, []byte(data), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := restore([]staged{{path: a, old: old, existed: true}, {path: b}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, a); got != "old a" {
		t.Errorf("a = %q, want the old content back", got)
	}
	if _, err := os.Stat(b); !os.IsNotExist(err) {
		t.Errorf("b, new in the batch, still exists (err %v)", err)
	}
	noTemporaries(t, dir)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), ".tmp-") || strings.Contains(d.Name(), ".old-")) {
			t.Errorf("temporary file left: %s", path)
		}
		return err
	})
}
