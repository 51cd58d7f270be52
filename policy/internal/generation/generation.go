// Package generation writes a set of files that change together: every
// file of a render goes into a new generation directory, and one rename
// of a symbolic link ("current") switches from the old generation to the
// new. The paths readers open are fixed symbolic links through "current",
// so at every instant, a crash included, they all lead to one generation.
//
// Why a generation directory and not a journal replayed at the next
// start: with a journal, a render killed between its renames leaves
// readers a mix of old and new files until something replays it, and
// slurmctld (job_submit.lua reads its data every few seconds), reclaimd
// and the bridge read them meanwhile. rename(2) of a link over a link is
// atomic, so here there is no such window, and nothing needs repair
// before a reader may look: the next render only removes what a killed
// one left.
//
// Layout of a store (the render's output folder):
//
//	<root>/.generations/<time>-<random>/...   one per render; only the current one is kept
//	<root>/current -> .generations/<name>     switched by rename
//	<root>/<name>  -> current/<name>           a stable path, for files kept in the store
//	<elsewhere>    -> <root>/current/<rel>     a stable path in another folder (Slurm's)
//	<root>/.lock                              flock'ed while a commit runs
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-hpc/strata/internal/flock"
)

// Names inside the store's root.
const (
	CurrentName     = "current"
	GenerationsName = ".generations"
	LockName        = ".lock"
	// tmpMark is in the name of every temporary link this package makes.
	tmpMark = ".tmp-"
)

// File is one file of a generation.
type File struct {
	// Rel is its path inside a generation: "tenants.json",
	// "slurm/strata/policy.lua".
	Rel string
	// Link is the stable path readers open, a symbolic link to
	// <root>/current/<Rel>: relative when it lies in the root, absolute
	// elsewhere.
	Link string
	Data []byte
	// Mode is the permission of a new file. A file the current generation
	// has keeps that file's permission and owner (an admin's chmod or
	// chgrp of the stable path, which follows the link, survives renders).
	Mode fs.FileMode
	// Legacy names other temporary files a writer of Link used to leave
	// beside it, as glob patterns of base names (".tenants.json.tmp-*"):
	// Commit removes them.
	Legacy []string
}

// ErrBusy says another commit holds the store's lock.
var ErrBusy = errors.New("another strata-policy render is writing to this folder")

// Store is a folder of generations.
type Store struct {
	// Root is the store's folder; it is made when missing.
	Root string
	// crash, when set, is called at each point a commit writes something;
	// when it returns true the commit stops there as if the process had
	// been killed (tests).
	crash func(point string) bool
}

// errCrashed is what a commit that a test stopped returns.
var errCrashed = errors.New("stopped at a crash point")

func (s *Store) at(point string) bool { return s.crash != nil && s.crash(point) }

// Commit writes files as a new generation and switches to it, under the
// store's lock, after removing what an earlier commit that was killed
// left: generations other than the current one and temporary links. It
// returns the new generation's name. When it fails before the switch,
// the old generation stays current and whole; the switch itself is one
// rename.
func (s *Store) Commit(files []File) (string, error) {
	root, err := filepath.Abs(s.Root)
	if err != nil {
		return "", err
	}
	if err := check(files); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(root, GenerationsName), 0o755); err != nil {
		return "", fmt.Errorf("make %s: %w", root, err)
	}
	unlock, err := lock(root)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := s.clean(root, files); err != nil {
		return "", err
	}

	old, _ := os.Readlink(filepath.Join(root, CurrentName))
	gens := filepath.Join(root, GenerationsName)
	gen, err := os.MkdirTemp(gens, time.Now().UTC().Format("20060102T150405Z")+"-")
	if err != nil {
		return "", fmt.Errorf("make a generation in %s: %w", gens, err)
	}
	if err := os.Chmod(gen, 0o755); err != nil {
		return "", err
	}
	name := filepath.Base(gen)
	// Before the switch, a failure leaves the old generation current and
	// removes the new one; a crash leaves it to the next commit's clean.
	hadCurrent := old != ""
	prepare := func() error {
		if err := s.writeGeneration(root, gen, old, files); err != nil {
			return err
		}
		if err := syncDir(gens); err != nil {
			return err
		}
		if s.at("generation written") {
			return errCrashed
		}
		// Links that exist already lead through current to the old
		// generation, so making the missing ones now changes nothing a
		// reader sees; only the first commit into a store (no current
		// yet) makes them after the switch.
		if hadCurrent {
			return s.links(root, files)
		}
		return nil
	}
	if err := prepare(); err != nil {
		if !errors.Is(err, errCrashed) {
			_ = os.RemoveAll(gen)
		}
		return "", err
	}
	if renamed, err := replaceLink(filepath.Join(root, CurrentName), filepath.Join(GenerationsName, name)); err != nil {
		if !renamed {
			_ = os.RemoveAll(gen)
			return "", err
		}
		return name, err
	}
	if s.at("switched") {
		return "", errCrashed
	}
	if !hadCurrent {
		if err := s.links(root, files); err != nil {
			return name, err
		}
	}
	if err := removeOthers(gens, name); err != nil {
		return name, fmt.Errorf("generation %s is current, but removing the earlier ones failed (the next render tries again): %w", name, err)
	}
	return name, nil
}

// check refuses two files at one path and paths that leave a generation.
func check(files []File) error {
	seen := map[string]bool{}
	links := map[string]bool{}
	for _, f := range files {
		rel := filepath.Clean(f.Rel)
		if rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("generation file %q: want a path inside the generation", f.Rel)
		}
		if seen[rel] {
			return fmt.Errorf("generation file %s is given twice: render it once", rel)
		}
		seen[rel] = true
		l, err := filepath.Abs(f.Link)
		if err != nil {
			return err
		}
		if links[l] {
			return fmt.Errorf("two files would be read at %s: give them other folders", l)
		}
		links[l] = true
	}
	return nil
}

// writeGeneration writes and syncs every file into gen, and syncs every
// folder it made.
func (s *Store) writeGeneration(root, gen, old string, files []File) error {
	dirs := map[string]bool{gen: true}
	for _, f := range files {
		path := filepath.Join(gen, f.Rel)
		for d := filepath.Dir(path); d != gen && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		// The mode and owner of the file readers see now: the current
		// generation's, or a plain file an earlier release wrote at the
		// stable path.
		mode, owner := f.Mode, (*fileOwner)(nil)
		prevs := []string{f.Link}
		if old != "" {
			prevs = []string{filepath.Join(root, old, f.Rel), f.Link}
		}
		for _, prev := range prevs {
			if st, err := os.Lstat(prev); err == nil && st.Mode().IsRegular() {
				mode, owner = st.Mode().Perm(), ownerOf(st)
				break
			}
		}
		if err := writeFile(path, f.Data, mode, owner); err != nil {
			return err
		}
		if s.at("file " + f.Rel) {
			return errCrashed
		}
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}

func writeFile(path string, data []byte, mode fs.FileMode, owner *fileOwner) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", path, cerr)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if owner != nil && os.Geteuid() == 0 {
		_ = f.Chown(owner.uid, owner.gid) // best effort: the content matters more than the owner
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// links makes each file's stable path the link it must be, replacing a
// regular file an earlier release rendered there.
func (s *Store) links(root string, files []File) error {
	for _, f := range files {
		link, err := filepath.Abs(f.Link)
		if err != nil {
			return err
		}
		target := linkTarget(root, link, f.Rel)
		if got, err := os.Readlink(link); err == nil && got == target {
			continue
		}
		if st, err := os.Lstat(link); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory: remove it or render elsewhere", link)
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return fmt.Errorf("make %s: %w", filepath.Dir(link), err)
		}
		if _, err := replaceLink(link, target); err != nil {
			return err
		}
		if s.at("link " + f.Rel) {
			return errCrashed
		}
	}
	return nil
}

// linkTarget is what the stable path link holds: relative when link lies
// in root (the store can be copied whole), absolute otherwise.
func linkTarget(root, link, rel string) string {
	abs := filepath.Join(root, CurrentName, rel)
	if r, err := filepath.Rel(filepath.Dir(link), abs); err == nil && isUnder(link, root) {
		return r
	}
	return abs
}

func isUnder(path, root string) bool {
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

// replaceLink makes path a symbolic link to target with one rename, and
// says whether the rename was made.
func replaceLink(path, target string) (bool, error) {
	dir, base := filepath.Split(path)
	tmp := filepath.Join(dir, "."+base+tmpMark+fmt.Sprint(os.Getpid()))
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return false, fmt.Errorf("link %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return false, fmt.Errorf("link %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return true, fmt.Errorf("%s is linked, but syncing its folder failed, so a crash may undo it: %w", path, err)
	}
	return true, nil
}

// clean removes what a commit killed before it finished left: the
// generations other than the current one (a half-written one, or the one
// a killed commit switched from), and temporary links and files beside
// the root's and every stable path's.
func (s *Store) clean(root string, files []File) error {
	gens := filepath.Join(root, GenerationsName)
	cur, _ := os.Readlink(filepath.Join(root, CurrentName))
	if err := removeOthers(gens, filepath.Base(cur)); err != nil {
		return fmt.Errorf("remove what an earlier render left in %s: %w", gens, err)
	}
	patterns := map[string][]string{root: {"." + CurrentName + tmpMark + "*"}}
	for _, f := range files {
		link, err := filepath.Abs(f.Link)
		if err != nil {
			return err
		}
		dir, base := filepath.Split(link)
		patterns[dir] = append(patterns[dir], "."+base+tmpMark+"*")
		patterns[dir] = append(patterns[dir], f.Legacy...)
	}
	var errs []error
	for dir, globs := range patterns {
		for _, g := range slices.Compact(globs) {
			matches, err := filepath.Glob(filepath.Join(dir, g))
			if err != nil {
				return err
			}
			for _, m := range matches {
				if st, err := os.Lstat(m); err == nil && !st.IsDir() {
					if err := os.Remove(m); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeOthers removes every generation in gens but keep.
func removeOthers(gens, keep string) error {
	ents, err := os.ReadDir(gens)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.Name() == keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(gens, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Current returns the name of the current generation, "" when there is
// none.
func (s *Store) Current() string {
	t, err := os.Readlink(filepath.Join(s.Root, CurrentName))
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// lock takes an exclusive flock on root/.lock without waiting: two
// commits at once would each remove the other's generation. The lock
// goes with the process, so a killed commit leaves none.
func lock(root string) (func(), error) {
	path := filepath.Join(root, LockName)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	if err = flock.Try(fd); err == nil {
		return func() { _ = unix.Close(fd) }, nil
	}
	_ = unix.Close(fd)
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("%w (%s is %w); wait for it to finish and run again", ErrBusy, path, err)
	}
	return nil, fmt.Errorf("lock %s: %w", path, err)
}

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

func ownerOf(st fs.FileInfo) *fileOwner {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return &fileOwner{uid: int(s.Uid), gid: int(s.Gid)}
	}
	return nil
}
