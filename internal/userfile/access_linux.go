package userfile

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// readACL reads the access ACL of fd; nil where it has none (or its file
// system keeps none).
func readACL(fd int) ([]aclEntry, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Fgetxattr(fd, "system.posix_acl_access", buf)
		switch {
		case err == nil:
			return parseACL(buf[:n])
		case errors.Is(err, syscall.ENODATA), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP):
			return nil, nil
		case errors.Is(err, syscall.ERANGE) && len(buf) < 1<<20:
			buf = make([]byte, 2*len(buf))
			continue
		}
		return nil, fmt.Errorf("read the access ACL: %w", err)
	}
}
