// Package userfile reads files that a Slurm user controls on the user's
// behalf: a job's strata-serve.yaml (the bridge), its outputs and a
// session's connection file (portal-api), a model under an allowed root.
// Such a file is hostile until proven otherwise, so Open and ReadFile
//
//   - resolve the name beneath a root folder and never follow a symbolic
//     link or ".." below it (openat2 with RESOLVE_BENEATH and
//     RESOLVE_NO_SYMLINKS where the kernel has it, else a walk that opens
//     one component at a time with O_NOFOLLOW), so a link to /dev/zero or
//     to the daemon's own token file is refused, not read;
//   - open with O_NONBLOCK, so a FIFO or a file under a lease cannot hold
//     the caller, and then judge what was opened (fstat), not what a path
//     named a moment before: only a regular file (or, when asked, a
//     folder) is accepted;
//   - check that the file belongs to the user it is read for, which also
//     refuses a hard link to another user's file;
//   - read through a size cap, whatever the file claims its size is;
//   - never quote a byte of the file in an error: errors name the path and
//     what is wrong with it, so a refusal shown to anyone leaks nothing.
//
// The root itself is trusted (the caller chose it: a job's working
// directory as Slurm reports it, an allowed root of the config) and is
// opened as given; nothing beneath it is.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMaxSize is the cap of ReadFile when the Policy gives none.
const DefaultMaxSize = 1 << 20

// Why a file is refused; test with errors.Is. The *Error that carries one
// names the path.
var (
	ErrSymlink    = errors.New("is or passes through a symbolic link, which is not followed for a file a user controls")
	ErrEscapes    = errors.New("leads outside the folder it must stay in")
	ErrNotRegular = errors.New("is not a regular file")
	ErrOwner      = errors.New("is not owned by the user it is read for")
	ErrTooLarge   = errors.New("is too large")
	ErrName       = errors.New("is not a plain relative name")
)

// Policy says what a file must be.
type Policy struct {
	// UID must own the file, unless AnyOwner. The zero value asks for
	// root: a caller that forgets to name the user reads nothing of
	// the user's.
	UID      uint32
	AnyOwner bool
	// MaxSize is the most bytes ReadFile returns; 0 is DefaultMaxSize.
	MaxSize int64
	// AllowDir accepts a folder as well as a regular file (Open only).
	AllowDir bool
	// As, when set, is the user the file is read for: the open goes no
	// further than that user could (see Access), and a file the user may
	// not reach and a name that does not exist are both ErrNoAccess.
	As *Access
}

// Error is a refused or failed open or read. It never holds the file's
// content.
type Error struct {
	Path string // root joined with the name
	Err  error  // a sentinel of this package (wrapped with detail) or the system's error
}

func (e *Error) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Open opens name (a relative, slash-separated path, or "." for root
// itself) beneath root as the policy allows, and returns the open file: a regular file, or a folder
// when p.AllowDir. A name that does not exist gives an error that is
// fs.ErrNotExist.
func Open(root, name string, p Policy) (*os.File, error) {
	return open(root, name, p, resolveBeneath)
}

// ReadFile reads name beneath root (see Open) up to the policy's size
// cap; a larger file is ErrTooLarge, and nothing of it is returned.
func ReadFile(root, name string, p Policy) ([]byte, error) {
	return readFile(root, name, p, resolveBeneath)
}

// resolver opens name (checked: relative, no "." or ".." component)
// beneath the folder rootfd with flags, following no symbolic link.
type resolver func(rootfd int, name string, flags int) (int, error)

func readFile(root, name string, p Policy, resolve resolver) ([]byte, error) {
	p.AllowDir = false
	f, err := open(root, name, p, resolve)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := p.MaxSize
	if limit <= 0 {
		limit = DefaultMaxSize
	}
	path := filepath.Join(root, name)
	tooLarge := func(n string) error {
		return &Error{Path: path, Err: fmt.Errorf("%w: %s bytes, at most %d are read", ErrTooLarge, n, limit)}
	}
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	if st.Size() > limit {
		return nil, tooLarge(fmt.Sprint(st.Size()))
	}
	// The size fstat gave can change, or lie: read one byte past the cap
	// to know.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, tooLarge("more than " + fmt.Sprint(limit))
	}
	return data, nil
}

func open(root, name string, p Policy, resolve resolver) (*os.File, error) {
	path := filepath.Join(root, name)
	if err := checkName(name); err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	var ffd int
	if p.As != nil {
		var err error
		if ffd, err = openAs(root, name, openFlags, p.As); err != nil {
			return nil, &Error{Path: path, Err: err}
		}
	} else {
		fd, err := openRoot(root)
		if err != nil {
			return nil, &Error{Path: path, Err: fmt.Errorf("open the folder %s: %w", root, err)}
		}
		ffd = fd
		if name != "." {
			ffd, err = resolve(fd, name, openFlags)
			closeFD(fd)
		}
		if err != nil {
			return nil, &Error{Path: path, Err: err}
		}
	}
	f := os.NewFile(uintptr(ffd), path)
	if err := check(f, p); err != nil {
		f.Close()
		return nil, &Error{Path: path, Err: err}
	}
	return f, nil
}

// checkName accepts a relative, slash-separated name without empty, "."
// or ".." components (what the caller means, spelled one way), or "." for
// the root itself.
func checkName(name string) error {
	if name == "." {
		return nil
	}
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	for c := range strings.SplitSeq(name, "/") {
		switch c {
		case "..":
			return fmt.Errorf("%w: %q climbs out by \"..\"", ErrEscapes, name)
		case "", ".":
			return fmt.Errorf("%w: %q", ErrName, name)
		}
	}
	return nil
}

// check judges what was opened.
func check(f *os.File, p Policy) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	m := st.Mode()
	switch {
	case m.IsRegular():
	case m.IsDir() && p.AllowDir:
	default:
		return fmt.Errorf("%w: it is %s", ErrNotRegular, kind(m))
	}
	if p.AnyOwner {
		return nil
	}
	uid, ok := owner(st)
	if !ok {
		return fmt.Errorf("%w: its owner cannot be read on this system", ErrOwner)
	}
	if uid != p.UID {
		return fmt.Errorf("%w: it belongs to uid %d, not uid %d", ErrOwner, uid, p.UID)
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file (mode " + m.String() + ")"
}
