package userfile

import (
	"errors"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// resolveBeneath opens name with openat2 (Linux 5.6): the kernel refuses
// every symbolic link and every way out of rootfd in one call, with no
// window between checking a component and opening it. Where openat2 is
// missing or filtered out (ENOSYS, or EPERM from a seccomp profile), it
// walks.
func resolveBeneath(rootfd int, name string, flags int) (int, error) {
	fd, err := openat2(rootfd, name, flags)
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) {
		return walk(rootfd, name, flags)
	}
	return fd, err
}

func openat2(rootfd int, name string, flags int) (int, error) {
	for try := 1; ; try++ {
		fd, err := unix.Openat2(rootfd, name, &unix.OpenHow{Flags: uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, syscall.EINTR),
			errors.Is(err, syscall.EAGAIN) && try < 4:
			// EAGAIN: a rename raced the lookup, and RESOLVE_BENEATH
			// leaves the retry to the caller; or the file is leased, which
			// a few tries will not change, so the last EAGAIN is returned.
			continue
		case errors.Is(err, syscall.ELOOP):
			return -1, ErrSymlink
		case errors.Is(err, syscall.EXDEV):
			return -1, ErrEscapes
		}
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
}
