package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Batch replaces several files all or none: [Batch.Commit] first writes
// and syncs every new file beside its target, and renames them into place
// only when all are written. A failure while staging removes every staged
// file and leaves every old file as it was. Renames themselves fail only
// in odd cases (a directory appeared at a target); then the targets
// already replaced are put back from hard links of the old files, where
// the file system allows them.
//
// The zero value is ready to use; a Batch is for one goroutine.
type Batch struct {
	entries []batchEntry
}

type batchEntry struct {
	path string
	data []byte
	mode fs.FileMode
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{} }

// Add queues path to be replaced by data. The mode rule is [Write]'s: an
// existing file keeps its permission bits, a new one gets mode. Nothing
// is written before Commit.
func (b *Batch) Add(path string, data []byte, mode fs.FileMode) {
	b.entries = append(b.entries, batchEntry{path: path, data: data, mode: mode})
}

// Len is the number of files queued.
func (b *Batch) Len() int { return len(b.entries) }

// staged is one file written to its temporary name, with a hard link to
// the file it replaces (empty when there was none, or the link failed).
type staged struct {
	path, tmp, old string
	existed        bool
}

// Commit writes every queued file, all or none. The batch is empty
// afterwards, whatever the outcome.
func (b *Batch) Commit() (err error) {
	entries := b.entries
	b.entries = nil
	seen := map[string]bool{}
	for _, e := range entries {
		abs, aerr := filepath.Abs(e.path)
		if aerr != nil {
			return fmt.Errorf("write %s: %w", e.path, aerr)
		}
		if seen[abs] {
			return fmt.Errorf("write %s: the same file is queued twice: render it once", e.path)
		}
		seen[abs] = true
	}

	var done []staged
	cleanup := func() {
		for _, s := range done {
			_ = os.Remove(s.tmp)
			if s.old != "" {
				_ = os.Remove(s.old)
			}
		}
	}
	for _, e := range entries {
		tmp, err := stage(e.path, e.data, e.mode)
		if err != nil {
			cleanup()
			return err
		}
		done = append(done, staged{path: e.path, tmp: tmp})
		s := &done[len(done)-1]
		if s.old, s.existed, err = linkOld(e.path); err != nil {
			cleanup()
			return err
		}
	}

	// Every file is written: now the renames, which only fail when a
	// target changed under us.
	for i, s := range done {
		if err := os.Rename(s.tmp, s.path); err != nil {
			err = renameErr(s.path, err)
			if rerr := restore(done[:i]); rerr != nil {
				err = fmt.Errorf("%w; putting back the files already replaced failed too: %w", err, rerr)
			}
			for _, t := range done[i:] {
				_ = os.Remove(t.tmp)
				if t.old != "" {
					_ = os.Remove(t.old)
				}
			}
			return err
		}
	}
	dirs := map[string]bool{}
	var errs []error
	for _, s := range done {
		if s.old != "" {
			_ = os.Remove(s.old)
		}
		dir := filepath.Dir(s.path)
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		if err := syncDir(dir); err != nil {
			errs = append(errs, fmt.Errorf("the files in %s are written, but syncing the directory failed, so a crash may undo them: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// linkOld hard-links the file at path (when it is a regular file) to a
// fresh name beside it, so a failed rename later in the batch can put it
// back. A file system without hard links gives no way back, not an error.
func linkOld(path string) (old string, existed bool, err error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	if st.IsDir() {
		return "", true, fmt.Errorf("write %s: it is a directory: remove it or write elsewhere", path)
	}
	if !st.Mode().IsRegular() {
		return "", true, nil
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".old-*")
	if err != nil {
		return "", true, fmt.Errorf("write %s: %w", path, err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	if err := os.Link(path, name); err != nil {
		return "", true, nil
	}
	return name, true, nil
}

// restore puts back the old files of targets already renamed over; a
// target that was new is removed. A target whose old file could not be
// linked keeps its new content, which is better than no file.
func restore(done []staged) error {
	var errs []error
	for i := len(done) - 1; i >= 0; i-- {
		s := done[i]
		if s.old == "" {
			if !s.existed {
				if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			} else {
				errs = append(errs, fmt.Errorf("%s: the old one could not be kept (not a regular file, or no hard links here), so it stays new", s.path))
			}
			continue
		}
		if err := os.Rename(s.old, s.path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
