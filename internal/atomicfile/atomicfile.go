// Package atomicfile writes the files other programs read (topology.conf,
// gres.conf, policy.lua, partitions.conf, the rendered contracts) so that a
// reader, and a machine that loses power, sees the old file or the new one
// and never half of one.
//
// [Write] writes a temporary file in the target's directory (a rename is
// atomic only within one file system), syncs it, renames it over the
// target and syncs the directory, so that the rename itself survives a
// crash. The temporary name is unique, so two writers never write into one
// temporary file, and it is removed on every failure. [Batch] does the same
// for several files at once, all or none.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data, atomically.
//
// When path exists, the new file keeps its permission bits (and, when the
// caller is root, its owner and group, best effort), so that an admin's
// chmod or chown of a rendered file survives the next render; else the
// file gets mode. The directory must exist. A symbolic link at path is
// replaced by the file, not followed.
func Write(path string, data []byte, mode fs.FileMode) error {
	tmp, err := stage(path, data, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return renameErr(path, err)
	}
	// The new file is in place: nothing is removed from here on.
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("%s is written, but syncing its directory failed, so a crash may undo it: %w", path, err)
	}
	return nil
}

// stage writes data to a fresh temporary file beside path, with the mode
// (and owner) path's new content must have, synced, and returns its name.
// On failure nothing is left behind.
func stage(path string, data []byte, mode fs.FileMode) (tmp string, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var owner *fileOwner
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().IsRegular() {
			mode = st.Mode().Perm()
			owner = ownerOf(st)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("write %s: %w", path, err)
	}

	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	tmp = f.Name()
	defer func() {
		if err != nil {
			_ = f.Close() // a second Close only says it is closed
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	// CreateTemp makes the file 0600; Chmod sets the bits exactly,
	// whatever the umask.
	if err := f.Chmod(mode); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if owner != nil && os.Geteuid() == 0 {
		_ = f.Chown(owner.uid, owner.gid) // best effort: the content matters more than the owner
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	return tmp, nil
}

func renameErr(path string, err error) error {
	if st, serr := os.Lstat(path); serr == nil && st.IsDir() {
		return fmt.Errorf("write %s: it is a directory: remove it or write elsewhere: %w", path, err)
	}
	return fmt.Errorf("write %s: %w", path, err)
}

// syncDir makes a rename in dir durable. File systems that cannot sync a
// directory (EINVAL) make renames durable by themselves.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

type fileOwner struct{ uid, gid int }
