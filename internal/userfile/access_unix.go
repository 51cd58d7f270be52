//go:build unix

package userfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Access is the user a file is read for, when the reader may read more
// than that user (a daemon reading a job's output for whoever asks): every
// folder from / down to the file must let the user search it, and the
// file must let the user read it, as the kernel would judge by the mode
// bits and the POSIX ACLs, or the open is refused with ErrNoAccess.
//
// The check is made on the folders as they are opened, one component at a
// time (the open never follows a link beneath the root, so what was
// checked is what is opened); the reader keeps its own identity and needs
// no privilege (no setfsuid, which would take CAP_SETUID and let a bug
// read as anyone).
type Access struct {
	UID, GID uint32
	// Groups are the user's supplementary groups.
	Groups []uint32
}

// ErrNoAccess: the user the file is read for may not reach or read it.
// It is also what a name that does not exist beneath a folder the user
// cannot search gives: the user could not tell the two apart, so neither
// can the reader's caller.
var ErrNoAccess = errors.New("does not exist or is not readable by the user it is read for")

// Permission bits asked of a file or folder.
const (
	permRead   = 4
	permSearch = 1
)

// openAs opens name beneath root as p.As may: root's own path is walked
// from / (its links resolved first: the root is the caller's choice),
// then name one component at a time, each folder checked before it is
// searched and the last file or folder before it is returned.
func openAs(root, name string, flags int, a *Access) (int, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return -1, deny(err)
	}
	comps := strings.Split(strings.TrimPrefix(filepath.Clean(real), "/"), "/")
	if comps[0] == "" {
		comps = nil
	}
	if name != "." {
		comps = append(comps, strings.Split(name, "/")...)
	}
	dir, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	for i, c := range comps {
		if err := permitted(dir, a, permSearch); err != nil {
			_ = unix.Close(dir)
			return -1, err
		}
		last := i == len(comps)-1
		fl := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
		if last {
			fl = flags | unix.O_NOFOLLOW
		}
		fd, err := unix.Openat(dir, c, fl, 0)
		if err != nil {
			err = classify(dir, c, err)
			_ = unix.Close(dir)
			return -1, deny(err)
		}
		_ = unix.Close(dir)
		dir = fd
	}
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		_ = unix.Close(dir)
		return -1, err
	}
	want := uint32(permRead)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		want |= permSearch // a folder is listed, and its entries looked at
	}
	if err := permitted(dir, a, want); err != nil {
		_ = unix.Close(dir)
		return -1, err
	}
	return dir, nil
}

// deny makes a missing name ErrNoAccess as well: once past the folders
// the user may search, a name that is not there and one the user may not
// read look the same to the user. Other errors (a link) are kept.
func deny(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return ErrNoAccess
	}
	return err
}

// permitted checks that the user may do want (permRead, permSearch) to
// the open file fd.
func permitted(fd int, a *Access, want uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	acl, err := readACL(fd)
	if err != nil {
		return err
	}
	mode := uint32(st.Mode) //nolint:unconvert // uint16 on some systems
	if !allows(mode, st.Uid, st.Gid, acl, a, want) {
		return ErrNoAccess
	}
	return nil
}

// aclEntry is one entry of a POSIX access ACL.
type aclEntry struct {
	tag  uint16
	perm uint16
	id   uint32
}

// The tags of system.posix_acl_access (linux/posix_acl_xattr.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// parseACL decodes the system.posix_acl_access attribute: version 2, then
// entries of tag, perm (16 bits each) and id (32 bits), little-endian.
func parseACL(b []byte) ([]aclEntry, error) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != 2 || (len(b)-4)%8 != 0 {
		return nil, fmt.Errorf("an access ACL of %d bytes that is not version 2", len(b))
	}
	var out []aclEntry
	for b = b[4:]; len(b) > 0; b = b[8:] {
		out = append(out, aclEntry{tag: binary.LittleEndian.Uint16(b), perm: binary.LittleEndian.Uint16(b[2:]), id: binary.LittleEndian.Uint32(b[4:])})
	}
	return out, nil
}

// allows judges as the kernel does (POSIX.1e access check; without an ACL
// the mode bits alone). Root may search and read anything.
func allows(mode, uid, gid uint32, acl []aclEntry, a *Access, want uint32) bool {
	if a.UID == 0 {
		return true
	}
	has := func(perm uint32) bool { return perm&want == want }
	inGroup := func(g uint32) bool { return g == a.GID || slices.Contains(a.Groups, g) }
	if len(acl) == 0 {
		switch {
		case uid == a.UID:
			return has(mode >> 6 & 7)
		case inGroup(gid):
			return has(mode >> 3 & 7)
		}
		return has(mode & 7)
	}
	mask, other := uint32(7), uint32(0)
	for _, e := range acl {
		switch e.tag {
		case aclMask:
			mask = uint32(e.perm)
		case aclOther:
			other = uint32(e.perm)
		}
	}
	if uid == a.UID {
		for _, e := range acl {
			if e.tag == aclUserObj {
				return has(uint32(e.perm))
			}
		}
		return false
	}
	for _, e := range acl {
		if e.tag == aclUser && e.id == a.UID {
			return has(uint32(e.perm) & mask)
		}
	}
	matched := false
	for _, e := range acl {
		if (e.tag == aclGroupObj && inGroup(gid)) || (e.tag == aclGroup && inGroup(e.id)) {
			matched = true
			if has(uint32(e.perm) & mask) {
				return true
			}
		}
	}
	if matched {
		return false
	}
	return has(other)
}
