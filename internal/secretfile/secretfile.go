// Package secretfile reads the secrets Strata's daemons keep in files (the
// slurmrestd JWT, the bridge's API token, the reclaimd agents' shared
// secret, a kubeconfig with credentials) and holds every one of them to one
// rule on its mode:
//
//   - readable or writable by others (o+r, o+w): refused, because every
//     user of the host can read or replace the secret;
//   - readable or writable by its group: accepted silently when the group
//     is one the caller names (the daemon's own group, such as
//     strata-bridge: the packaged layout is root:strata-bridge 0640) or
//     the group the process runs as, and with a warning otherwise (the
//     shared group strata, users);
//   - not a regular file (a FIFO, a device, a folder): refused.
//
// A File is a secret that rotates: it is read again whenever the file
// changes (its size, modification time or inode), and on SIGHUP through
// Reload, like the slurmrestd token. Errors name the file and its mode,
// never a byte of its content.
package secretfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxSize bounds a secret file: tokens, keys and kubeconfigs are a few KiB.
const MaxSize = 1 << 20

// Rule says who besides the owner may read a secret without a warning.
type Rule struct {
	// Groups are the group names that may read the secret (the daemon's
	// own group); the process's effective group may always.
	Groups []string
}

// ModeError is a secret refused for its mode or its kind.
type ModeError struct {
	Path string
	Mode fs.FileMode
	Why  string
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%s (mode %04o) %s", e.Path, e.Mode.Perm(), e.Why)
}

// Judge applies the rule to a file's status: a refusal is a *ModeError,
// a warning is a non-empty text that says what to change.
func (r Rule) Judge(path string, st fs.FileInfo) (warning string, err error) {
	m := st.Mode()
	if !m.IsRegular() {
		return "", &ModeError{Path: path, Mode: m, Why: "is not a regular file: a secret must be a plain file"}
	}
	if m.Perm()&0o006 != 0 {
		return "", &ModeError{Path: path, Mode: m,
			Why: fmt.Sprintf("is readable or writable by every user of this host: chmod o-rwx %s (0600 or 0640), then replace the secret, which others may have read", path)}
	}
	if m.Perm()&0o060 == 0 {
		return "", nil
	}
	gid, ok := fileGID(st)
	if !ok || r.allowed(gid) {
		return "", nil
	}
	name := groupName(gid)
	return fmt.Sprintf("%s (mode %04o) is readable by group %s, which may include other users and daemons: chgrp it to %s or chmod g-rwx it",
		path, m.Perm(), name, r.want()), nil
}

func (r Rule) allowed(gid uint32) bool {
	if gid == uint32(os.Getegid()) {
		return true
	}
	return slices.Contains(r.Groups, groupName(gid))
}

func (r Rule) want() string {
	if len(r.Groups) == 0 {
		return "the group the daemon runs as"
	}
	return strings.Join(r.Groups, " or ")
}

func fileGID(st fs.FileInfo) (uint32, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Gid, true
	}
	return 0, false
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// Check applies the rule to the file at path (a link is followed: the
// target is what others could read), for check-config and start-up.
func (r Rule) Check(path string) (warning string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return r.Judge(path, st)
}

// Verify checks what a daemon's start-up would refuse, for check-config:
// the rule on the file's mode, and a content that is not empty or
// oversized (Read's checks), with Read's messages, so that check-config
// and the daemon say the same. A file this process may not read (an
// admin's check as another user than the daemon's) is held to the rule on
// its mode alone, with a warning that its content went unchecked.
func (r Rule) Verify(path string) (warning string, err error) {
	_, warning, _, err = r.Read(path)
	if errors.Is(err, fs.ErrPermission) {
		if warning, err = r.Check(path); err != nil {
			return "", err
		}
		note := fmt.Sprintf("%s is not readable by this user, so its content was not checked: run check-config as the daemon's user or root", path)
		if warning != "" {
			note = warning + "; " + note
		}
		return note, nil
	}
	return warning, err
}

// Read reads the secret at path and applies the rule to the file it
// opened (not to a name that could change between a check and the read).
// The content comes back with surrounding white space trimmed; an empty
// file is an error.
func (r Rule) Read(path string) (secret []byte, warning string, st fs.FileInfo, err error) {
	// O_NONBLOCK: a FIFO put in the secret's place must not block the
	// daemon; it is refused below as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, "", nil, err
	}
	if warning, err = r.Judge(path, st); err != nil {
		return nil, "", nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, "", nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxSize {
		return nil, "", nil, fmt.Errorf("%s is larger than %d bytes: not a secret file", path, MaxSize)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, "", nil, fmt.Errorf("%s is empty: write the secret into it", path)
	}
	return b, warning, st, nil
}

// File is a secret file that rotates: Get reads it again whenever it
// changed, Reload (SIGHUP) reads it again in any case. When a new read
// fails, Get fails too: a secret that became readable by every user is
// not used any more.
type File struct {
	Path string
	// What names the secret in errors and logs ("api.token_file").
	What string
	Rule Rule
	// Log receives a warning once per change of the file; nil: none.
	Log *slog.Logger

	mu     sync.Mutex
	secret []byte
	stamp  stamp
}

type stamp struct {
	size  int64
	mtime time.Time
	ino   uint64
	mode  fs.FileMode
}

func stampOf(st fs.FileInfo) stamp {
	s := stamp{size: st.Size(), mtime: st.ModTime(), mode: st.Mode()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.ino = sys.Ino
	}
	return s
}

// Get returns the secret in the file now.
func (f *File) Get() ([]byte, error) {
	st, err := os.Stat(f.Path)
	if err != nil {
		return nil, f.wrap(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.secret != nil && stampOf(st) == f.stamp {
		return f.secret, nil
	}
	return f.read()
}

// Reload reads the file again; on an error the secret read before stays
// for Get only as long as the file does not change.
func (f *File) Reload(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.read()
	return err
}

// read needs f.mu.
func (f *File) read() ([]byte, error) {
	b, warning, st, err := f.Rule.Read(f.Path)
	if err != nil {
		return nil, f.wrap(err)
	}
	if warning != "" && f.Log != nil {
		f.Log.Warn("secret file readable by its group", "secret", f.what(), "warning", warning)
	}
	f.secret, f.stamp = b, stampOf(st)
	return b, nil
}

func (f *File) what() string {
	if f.What != "" {
		return f.What
	}
	return "secret file"
}

func (f *File) wrap(err error) error { return fmt.Errorf("%s: %w", f.what(), err) }
