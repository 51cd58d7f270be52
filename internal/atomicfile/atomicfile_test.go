package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// leftovers lists the files in dir other than the given names.
func leftovers(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		found := false
		for _, k := range keep {
			found = found || e.Name() == k
		}
		if !found {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWrite(t *testing.T) {
	for name, tc := range map[string]struct {
		existing     *fs.FileMode // nil: no file before
		mode         fs.FileMode
		wantMode     fs.FileMode
		data         string
		subdirTarget bool
	}{
		"new file gets the given mode":    {mode: 0o644, wantMode: 0o644, data: "a\n"},
		"new executable":                  {mode: 0o755, wantMode: 0o755, data: "#!/bin/sh\n"},
		"new file ignores the umask":      {mode: 0o666, wantMode: 0o666, data: "x"},
		"existing file keeps its mode":    {existing: ptr(fs.FileMode(0o600)), mode: 0o644, wantMode: 0o600, data: "secret"},
		"existing group-readable file":    {existing: ptr(fs.FileMode(0o640)), mode: 0o755, wantMode: 0o640, data: "b"},
		"empty content":                   {mode: 0o644, wantMode: 0o644, data: ""},
		"file in a directory of its own":  {mode: 0o644, wantMode: 0o644, data: "c", subdirTarget: true},
		"existing file replaced by empty": {existing: ptr(fs.FileMode(0o644)), mode: 0o644, wantMode: 0o644, data: ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.subdirTarget {
				dir = filepath.Join(dir, "strata")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "topology.conf")
			if tc.existing != nil {
				if err := os.WriteFile(path, []byte("old content\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, *tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(path, []byte(tc.data), tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.data {
				t.Errorf("content = %q, want %q", got, tc.data)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tc.wantMode {
				t.Errorf("mode = %v, want %v", st.Mode().Perm(), tc.wantMode)
			}
			if l := leftovers(t, dir, "topology.conf"); len(l) > 0 {
				t.Errorf("files left beside the target: %v", l)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestWriteKeepsOwner: as root, a file an admin gave to another owner
// keeps that owner.
func TestWriteKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file away")
	}
	path := filepath.Join(t.TempDir(), "gres.conf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if o := ownerOf(st); o == nil || o.uid != 65534 || o.gid != 65534 {
		t.Errorf("owner = %+v, want 65534:65534", o)
	}
}

// TestWriteFailures: every failure says what failed, leaves the target as
// it was and leaves no temporary file behind.
func TestWriteFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(t *testing.T, dir string) string // returns the path to write
		wantErr string
	}{
		// The rename fails after the temporary file was written: the
		// temporary file must go.
		"target is a directory": {
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "policy.lua")
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			},
			wantErr: "is a directory",
		},
		"directory missing": {
			setup:   func(t *testing.T, dir string) string { return filepath.Join(dir, "nope", "policy.lua") },
			wantErr: "no such file or directory",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.setup(t, dir)
			before := leftovers(t, dir)
			err := Write(path, []byte("new"), 0o644)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Write = %v, want an error containing %q", err, tc.wantErr)
			}
			after := leftovers(t, dir)
			for _, name := range after {
				if strings.Contains(name, ".tmp-") {
					t.Errorf("temporary file left: %s (before: %v, after: %v)", name, before, after)
				}
			}
		})
	}
}

// TestConcurrentWriters: writers of one path never share a temporary file;
// every write succeeds, the result is one writer's whole content, and
// nothing is left beside it.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "serving.json")
	const writers, rounds = 8, 25
	contents := make([][]byte, writers)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte(fmt.Sprintf("writer %d\n", i)), 1000)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				errs <- Write(path, contents[i], 0o644)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	whole := false
	for _, c := range contents {
		whole = whole || bytes.Equal(got, c)
	}
	if !whole {
		t.Errorf("content is no writer's whole content (%d bytes)", len(got))
	}
	if l := leftovers(t, dir, "serving.json"); len(l) > 0 {
		t.Errorf("files left: %v", l)
	}
}

// TestReaderKeepsOldFile: a reader that opened the file before the write
// reads the old content to its end (slurmctld reading topology.conf while
// topogen writes); a new open sees the new content.
func TestReaderKeepsOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topology.conf")
	old := bytes.Repeat([]byte("SwitchName=s0 Nodes=n[1-4]\n"), 500)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, 10)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("SwitchName=s1 Nodes=n[5-8]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(head, rest...); !bytes.Equal(got, old) {
		t.Errorf("the open reader read %d bytes that are not the old file", len(got))
	}
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(now) != "SwitchName=s1 Nodes=n[5-8]\n" {
		t.Errorf("a new read gives %q", now)
	}
}

// TestSymlinkReplaced: a link at the target is replaced, its target left
// alone.
func TestSymlinkReplaced(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(other, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gres.conf")
	if err := os.Symlink(other, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(other); string(b) != "untouched" {
		t.Errorf("the link's target was changed to %q", b)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 {
		t.Errorf("target is %v, want a regular 0644 file", st.Mode())
	}
}
