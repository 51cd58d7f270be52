//go:build unix

package userfile

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// openFlags open a file without letting it hold the caller (O_NONBLOCK: a
// FIFO with no writer, a leased file) and without following a final
// symbolic link.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

func openRoot(root string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	return fd, nil
}

func closeFD(fd int) { _ = unix.Close(fd) }

// walk opens name beneath rootfd one component at a time, each with
// O_NOFOLLOW: the way that works on every kernel (and where openat2 is
// missing or filtered out).
func walk(rootfd int, name string, flags int) (int, error) {
	comps := strings.Split(name, "/")
	dir := rootfd
	defer func() {
		if dir != rootfd {
			_ = unix.Close(dir)
		}
	}()
	for _, c := range comps[:len(comps)-1] {
		fd, err := unix.Openat(dir, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, classify(dir, c, err)
		}
		if dir != rootfd {
			_ = unix.Close(dir)
		}
		dir = fd
	}
	last := comps[len(comps)-1]
	fd, err := unix.Openat(dir, last, flags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, classify(dir, last, err)
	}
	return fd, nil
}

// classify says ErrSymlink for a component that is a link, whatever the
// system answered for it (ELOOP, or ENOTDIR where a folder was asked).
func classify(dir int, c string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return ErrSymlink
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return ErrSymlink
	}
	return &fs.PathError{Op: "open", Path: c, Err: err}
}

func owner(st fs.FileInfo) (uint32, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return s.Uid, true
}
