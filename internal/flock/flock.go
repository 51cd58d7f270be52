// Package flock is the one exclusive, non-blocking lock that keeps two
// runs of a Strata command from changing the same thing at once (topogen
// apply, strata-policy apply and render): flock(2) on a file or folder,
// which goes with the process, so a killed run leaves no lock behind, and
// the holder named from /proc/locks when the lock is taken.
package flock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrHeld says another process holds the lock.
var ErrHeld = errors.New("locked by another process")

// Try takes an exclusive flock on the open file fd without waiting. It
// returns nil once held, an error matching ErrHeld that names the holder
// (" by pid 1234 (topogen)") when another process holds it, and any other
// failure as it is. The lock lasts until fd is closed.
func Try(fd int) error {
	var err error
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return heldError{holder: Holder(fd)}
	}
	return fmt.Errorf("flock: %w", err)
}

// heldError is ErrHeld with the holder, when it could be told.
type heldError struct{ holder string }

func (e heldError) Error() string   { return "locked" + e.holder }
func (e heldError) Is(t error) bool { return t == ErrHeld }

// Holder names the process that holds the flock on fd's file, from
// /proc/locks (" by pid 1234 (strata-policy)"), or says nothing when it
// cannot tell.
func Holder(fd int) string {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	return holderIn(f, fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino), procComm)
}

func procComm(pid int) string {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(comm))
}

// holderIn reads /proc/locks' lines for the FLOCK held on the file id
// ("major:minor:inode", in hexadecimal device numbers as the kernel writes
// them).
func holderIn(f interface{ Read([]byte) (int, error) }, id string, comm func(int) string) string {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:02:131090 0 EOF"; waiters
		// are "1: -> FLOCK ..." and hold nothing.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil {
			continue
		}
		who := fmt.Sprintf(" by pid %d", pid)
		if c := comm(pid); c != "" {
			who += " (" + c + ")"
		}
		return who
	}
	return ""
}
