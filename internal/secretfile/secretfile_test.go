package secretfile

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const secret = "s3cr3t-token-value"

// otherGroup is a group the test process is not in, or skips: a file is
// chowned to it to test the group rule.
func otherGroup(t *testing.T) int {
	t.Helper()
	for _, gid := range []int{1, 2, 3, 65534} {
		if gid == os.Getegid() {
			continue
		}
		p := filepath.Join(t.TempDir(), "probe")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if os.Chown(p, -1, gid) == nil {
			return gid
		}
	}
	t.Skip("cannot give a file a group the process is not in (not root)")
	return 0
}

func TestRule(t *testing.T) {
	tests := map[string]struct {
		mode        fs.FileMode
		foreign     bool     // the file's group is not the process's
		groups      []string // Rule.Groups; "FOREIGN" is the file's group name
		wantErr     string
		wantWarning string
	}{
		"0600":                          {mode: 0o600},
		"0400":                          {mode: 0o400},
		"0640 own group":                {mode: 0o640},
		"0640 foreign group":            {mode: 0o640, foreign: true, wantWarning: "readable by group"},
		"0660 foreign group":            {mode: 0o660, foreign: true, wantWarning: "chgrp it to the group the daemon runs as or chmod g-rwx"},
		"0640 foreign group, named":     {mode: 0o640, foreign: true, groups: []string{"FOREIGN"}},
		"0640 foreign group, not named": {mode: 0o640, foreign: true, groups: []string{"strata-bridge"}, wantWarning: "chgrp it to strata-bridge"},
		"0644 world-readable":           {mode: 0o644, wantErr: "(mode 0644) is readable or writable by every user of this host: chmod o-rwx"},
		"0604 world-readable":           {mode: 0o604, wantErr: "readable or writable by every user"},
		"0602 world-writable":           {mode: 0o602, wantErr: "readable or writable by every user"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			groups := tc.groups
			if tc.foreign {
				gid := otherGroup(t)
				if err := os.Chown(p, -1, gid); err != nil {
					t.Fatal(err)
				}
				for i, g := range groups {
					if g == "FOREIGN" {
						groups[i] = groupName(uint32(gid))
					}
				}
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			r := Rule{Groups: groups}
			for what, call := range map[string]func() (string, error){
				"Check": func() (string, error) { return r.Check(p) },
				"Read": func() (string, error) {
					b, w, _, err := r.Read(p)
					if err == nil && string(b) != secret {
						t.Errorf("Read = %q, want the trimmed secret", b)
					}
					return w, err
				},
			} {
				w, err := call()
				switch {
				case tc.wantErr != "":
					var me *ModeError
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &me) {
						t.Errorf("%s: error %v, want a *ModeError with %q", what, err, tc.wantErr)
					}
					if err != nil && strings.Contains(err.Error(), secret) {
						t.Errorf("%s: the error quotes the secret: %v", what, err)
					}
				case err != nil:
					t.Errorf("%s: %v", what, err)
				case tc.wantWarning == "" && w != "":
					t.Errorf("%s: warning %q, want none", what, w)
				case !strings.Contains(w, tc.wantWarning):
					t.Errorf("%s: warning %q, want %q", what, w, tc.wantWarning)
				}
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	big := filepath.Join(dir, "big")
	for p, data := range map[string][]byte{empty: []byte(" \n"), big: bytes.Repeat([]byte("x"), MaxSize+1)} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct{ path, want string }{
		"a FIFO (does not block)": {fifo, "is not a regular file"},
		"a folder":                {dir, "is not a regular file"},
		"/dev/zero":               {"/dev/zero", "is not a regular file"},
		"empty":                   {empty, "is empty"},
		"too large":               {big, "larger than"},
		"missing":                 {filepath.Join(dir, "nope"), "no such file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, _, _, err := (Rule{}).Read(tc.path); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Read(%s) = %v, want %q", tc.path, err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Read(%s) blocked", tc.path)
			}
		})
	}
}

// A rotated secret is read again when the file changes; one made
// world-readable is refused at once, even though its content and time did
// not change; SIGHUP (Reload) re-reads.
func TestFileRotates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		t.Helper()
		tmp := p + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil { // a new inode, as rotation by rename gives
			t.Fatal(err)
		}
	}
	write("one\n")
	var logs bytes.Buffer
	f := &File{Path: p, What: "api.token_file", Log: slog.New(slog.NewTextHandler(&logs, nil))}
	get := func(want string) {
		t.Helper()
		b, err := f.Get()
		if err != nil || string(b) != want {
			t.Fatalf("Get = %q, %v, want %q", b, err, want)
		}
	}
	get("one")
	write("two") // same size and, within the clock's step, maybe the same time: the inode tells
	get("two")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(); err == nil || !strings.Contains(err.Error(), "api.token_file: ") || !strings.Contains(err.Error(), "every user") {
		t.Errorf("Get of a world-readable file = %v, want a refusal naming api.token_file", err)
	}
	if err := f.Reload(context.Background()); err == nil {
		t.Error("Reload of a world-readable file succeeded")
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	get("two")
	if strings.Contains(logs.String(), "two") {
		t.Errorf("the log quotes the secret:\n%s", logs.String())
	}
}

// A File readable by a group other than the rule's logs one warning per
// change of the file, and none for a read that found it unchanged.
func TestFileWarnsOncePerChange(t *testing.T) {
	gid := otherGroup(t)
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(secret), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, -1, gid); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f := &File{Path: p, What: "agent.token_file", Log: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 3 {
		if _, err := f.Get(); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "secret file readable by its group"); n != 1 {
		t.Errorf("%d warnings for one file read three times, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "secret=agent.token_file") || strings.Contains(logs.String(), secret) {
		t.Errorf("the warning does not name the secret, or quotes it:\n%s", logs.String())
	}
}

// TestVerify: check-config's look at a secret refuses what a daemon's
// start-up refuses, with the same message: an empty or oversized file as
// well as one others may read, not only its mode.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	files := map[string]struct {
		data string
		mode os.FileMode
	}{"good": {secret, 0o600}, "empty": {"\n", 0o600}, "open": {secret, 0o644}, "big": {strings.Repeat("x", MaxSize+1), 0o600}}
	for name, f := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for name := range files {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			_, verr := Rule{}.Verify(p)
			_, _, _, rerr := Rule{}.Read(p)
			switch {
			case name == "good" && verr != nil:
				t.Errorf("Verify = %v", verr)
			case name != "good" && (verr == nil || rerr == nil || verr.Error() != rerr.Error()):
				t.Errorf("Verify = %v, Read = %v: want the same refusal", verr, rerr)
			}
			if verr != nil && strings.Contains(verr.Error(), secret) {
				t.Errorf("Verify quotes the secret: %v", verr)
			}
		})
	}
}
