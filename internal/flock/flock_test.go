package flock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTry: a lock held by another process is refused with ErrHeld naming
// that process; once it exits, the lock is free again.
func TestTry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// flock(1) from util-linux holds it in another process.
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock command")
	}
	// -o: the lock stays with flock itself, not with sleep.
	cmd := exec.Command("flock", "-o", "-x", path, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = Try(fd)
		if err != nil || time.Now().After(deadline) {
			break
		}
		_ = unix.Flock(fd, unix.LOCK_UN) // flock(1) had not taken it yet
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("Try with the lock held elsewhere: %v, want ErrHeld", err)
	}
	if !strings.Contains(err.Error(), " by pid ") {
		t.Errorf("the refusal does not name the holder: %q", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := Try(fd); err != nil {
		t.Errorf("Try once the holder is gone: %v", err)
	}
}

// TestHolderIn: the holder is the FLOCK line of the file, not a waiter's
// line nor another file's.
func TestHolderIn(t *testing.T) {
	locks := "1: POSIX  ADVISORY  WRITE 77 08:02:131090 0 EOF\n" +
		"2: FLOCK  ADVISORY  WRITE 88 08:02:999 0 EOF\n" +
		"3: -> FLOCK  ADVISORY  WRITE 99 08:02:131090 0 EOF\n" +
		"3: FLOCK  ADVISORY  WRITE 1234 08:02:131090 0 EOF\n"
	comm := func(pid int) string { return "cmd" + strconv.Itoa(pid) }
	if got := holderIn(strings.NewReader(locks), "08:02:131090", comm); got != " by pid 1234 (cmd1234)" {
		t.Errorf("holder = %q", got)
	}
	if got := holderIn(strings.NewReader(locks), "08:02:1", comm); got != "" {
		t.Errorf("holder of a file no one locks = %q", got)
	}
}
