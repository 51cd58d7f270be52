//go:build linux

package userfile

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Users of the access tests: alice reads, bob keeps his files to himself,
// carol shares group lab with bob.
const (
	uidAlice, uidBob, uidCarol = 60001, 60002, 60003
	gidAlice, gidBob, gidLab   = 60001, 60002, 60100
)

var (
	alice = &Access{UID: uidAlice, GID: gidAlice}
	carol = &Access{UID: uidCarol, GID: 60003, Groups: []uint32{gidLab}}
)

// accessTree makes, under a folder every user may search:
//
//	alice/      0755 alice  out.txt 0644 alice
//	bob/        0700 bob    secret.out 0600 bob
//	lab/        0750 bob:lab  shared.out 0640 bob:lab
//	open/       0755 bob    inside/ 0700 bob  x.out 0644 bob
func accessTree(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to other users")
	}
	base := t.TempDir()
	// t.TempDir's folders are root's 0700: let everyone search them.
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(p string, mode os.FileMode, uid, gid int, dir bool) {
		t.Helper()
		p = filepath.Join(base, p)
		var err error
		if dir {
			err = os.Mkdir(p, mode)
		} else {
			err = os.WriteFile(p, []byte("output\n"), mode)
		}
		if err == nil {
			err = os.Chmod(p, mode)
		}
		if err == nil {
			err = os.Chown(p, uid, gid)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("alice", 0o755, uidAlice, gidAlice, true)
	mk("alice/out.txt", 0o644, uidAlice, gidAlice, false)
	mk("bob", 0o700, uidBob, gidBob, true)
	mk("bob/secret.out", 0o600, uidBob, gidBob, false)
	mk("lab", 0o750, uidBob, gidLab, true)
	mk("lab/shared.out", 0o640, uidBob, gidLab, false)
	mk("open", 0o755, uidBob, gidBob, true)
	mk("open/inside", 0o700, uidBob, gidBob, true)
	mk("open/inside/x.out", 0o644, uidBob, gidBob, false)
	return base
}

// TestOpenAs: the open goes no further than the user could, and a file
// the user may not reach reads exactly as one that does not exist.
func TestOpenAs(t *testing.T) {
	base := accessTree(t)
	for _, tc := range []struct {
		who        *Access
		root, name string
		dir        bool
		ok         bool
	}{
		{who: alice, root: base, name: "alice/out.txt", ok: true},
		{who: alice, root: filepath.Join(base, "alice"), name: ".", dir: true, ok: true},
		{who: alice, root: base, name: "bob/secret.out"},
		{who: alice, root: base, name: "bob/missing.out"},
		{who: alice, root: filepath.Join(base, "bob"), name: "secret.out"}, // a root the user cannot reach
		{who: alice, root: filepath.Join(base, "bob"), name: "missing.out"},
		{who: alice, root: base, name: "open/inside/x.out"}, // readable, but behind a folder alice cannot search
		{who: alice, root: base, name: "open/inside/none.out"},
		{who: alice, root: base, name: "lab/shared.out"},
		{who: carol, root: base, name: "lab/shared.out", ok: true},
		{who: carol, root: base, name: "lab", dir: true, ok: true},
		{who: &Access{UID: uidBob, GID: gidBob}, root: base, name: "bob/secret.out", ok: true},
	} {
		f, err := Open(tc.root, tc.name, Policy{AnyOwner: true, AllowDir: tc.dir, As: tc.who})
		if f != nil {
			f.Close()
		}
		if tc.ok {
			if err != nil {
				t.Errorf("uid %d, %s beneath %s: %v", tc.who.UID, tc.name, tc.root, err)
			}
			continue
		}
		var ue *Error
		if !errors.Is(err, ErrNoAccess) || !errors.As(err, &ue) || ue.Err.Error() != ErrNoAccess.Error() {
			t.Errorf("uid %d, %s beneath %s: %v, want exactly ErrNoAccess", tc.who.UID, tc.name, tc.root, err)
		}
	}
	// Without As the reader's own permission decides, as before.
	if f, err := Open(base, "bob/secret.out", Policy{UID: uidBob}); err != nil {
		t.Errorf("without As: %v", err)
	} else {
		f.Close()
	}
}

// aclXattr is system.posix_acl_access of the entries.
func aclXattr(entries ...aclEntry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// TestOpenAsACL: an ACL that lets alice into bob's 0700 folder lets her
// in; one that shuts her out of a folder everyone may search shuts her
// out.
func TestOpenAsACL(t *testing.T) {
	base := accessTree(t)
	const undefined = 0xffffffff
	grant := aclXattr(aclEntry{aclUserObj, 7, undefined}, aclEntry{aclUser, 5, uidAlice}, aclEntry{aclGroupObj, 0, undefined},
		aclEntry{aclMask, 5, undefined}, aclEntry{aclOther, 0, undefined})
	if err := unix.Setxattr(filepath.Join(base, "bob"), "system.posix_acl_access", grant, 0); err != nil {
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
			t.Skipf("the file system of %s keeps no ACLs", base)
		}
		t.Fatal(err)
	}
	fileGrant := aclXattr(aclEntry{aclUserObj, 6, undefined}, aclEntry{aclUser, 4, uidAlice}, aclEntry{aclGroupObj, 0, undefined},
		aclEntry{aclMask, 4, undefined}, aclEntry{aclOther, 0, undefined})
	if err := unix.Setxattr(filepath.Join(base, "bob", "secret.out"), "system.posix_acl_access", fileGrant, 0); err != nil {
		t.Fatal(err)
	}
	shut := aclXattr(aclEntry{aclUserObj, 7, undefined}, aclEntry{aclUser, 0, uidAlice}, aclEntry{aclGroupObj, 5, undefined},
		aclEntry{aclMask, 5, undefined}, aclEntry{aclOther, 5, undefined})
	if err := unix.Setxattr(filepath.Join(base, "alice"), "system.posix_acl_access", shut, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(base, "bob/secret.out", Policy{AnyOwner: true, As: alice}); err != nil {
		t.Errorf("alice, let in by ACLs: %v", err)
	} else {
		f.Close()
	}
	if _, err := Open(base, "bob/secret.out", Policy{AnyOwner: true, As: carol}); !errors.Is(err, ErrNoAccess) {
		t.Errorf("carol, whom the ACL does not name: %v", err)
	}
	// alice owns alice/: the owner's entry (rwx) decides, not her named one.
	if f, err := Open(base, "alice/out.txt", Policy{AnyOwner: true, As: alice}); err != nil {
		t.Errorf("alice in her own folder: %v", err)
	} else {
		f.Close()
	}
	if _, err := Open(base, "alice/out.txt", Policy{AnyOwner: true, As: &Access{UID: uidBob, GID: gidBob}}); err != nil {
		t.Errorf("bob, as other: %v", err)
	}
}

// TestAllows: the access check on its own, mode bits and ACLs.
func TestAllows(t *testing.T) {
	const none = 0xffffffff
	for _, tc := range []struct {
		name           string
		mode, uid, gid uint32
		acl            []aclEntry
		who            *Access
		want           uint32
		ok             bool
	}{
		{"owner bits", 0o700, uidAlice, gidBob, nil, alice, permRead | permSearch, true},
		{"owner bits win over other", 0o007, uidAlice, gidBob, nil, alice, permRead, false},
		{"group bits", 0o050, uidBob, gidLab, nil, carol, permRead | permSearch, true},
		{"group bits win over other", 0o705, uidBob, gidLab, nil, carol, permRead, false},
		{"other bits", 0o005, uidBob, gidBob, nil, alice, permRead | permSearch, true},
		{"search without read", 0o001, uidBob, gidBob, nil, alice, permRead, false},
		{"root", 0, uidBob, gidBob, nil, &Access{}, permRead, true},
		{"named user under a mask", 0o750, uidBob, gidBob, []aclEntry{{aclUserObj, 7, none}, {aclUser, 7, uidAlice},
			{aclGroupObj, 5, none}, {aclMask, 1, none}, {aclOther, 0, none}}, alice, permRead, false},
		{"named group", 0o750, uidBob, gidBob, []aclEntry{{aclUserObj, 7, none}, {aclGroupObj, 0, none}, {aclGroup, 4, gidLab},
			{aclMask, 4, none}, {aclOther, 0, none}}, carol, permRead, true},
		{"a matching group that grants nothing denies", 0o755, uidBob, gidLab, []aclEntry{{aclUserObj, 7, none}, {aclGroupObj, 0, none},
			{aclMask, 5, none}, {aclOther, 5, none}}, carol, permRead, false},
	} {
		if got := allows(tc.mode, tc.uid, tc.gid, tc.acl, tc.who, tc.want); got != tc.ok {
			t.Errorf("%s: allows = %t, want %t", tc.name, got, tc.ok)
		}
	}
	if _, err := parseACL([]byte{1, 0, 0, 0}); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("an ACL of another version: %v", err)
	}
}
