package apply

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

// ErrBusy says another apply holds the lock on the live file's folder.
var ErrBusy = errors.New("another topogen apply is running")

// lockDir takes an exclusive flock on dir, the live file's folder, without
// waiting: two applies at once would back up and restore each other's
// files. The lock goes with the process, so a killed apply leaves none
// behind. It returns the function that releases it.
func lockDir(dir string) (unlock func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err == nil {
		return func() { _ = unix.Close(fd) }, nil
	}
	defer func() { _ = unix.Close(fd) }()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: %s is locked%s; wait for it to finish (a timer's apply takes a few seconds) and run again",
			ErrBusy, dir, holder(fd))
	}
	return nil, fmt.Errorf("lock %s: flock: %w", dir, err)
}

// holder names the process that holds the flock on fd's file, from
// /proc/locks (" by pid 1234 (topogen)"), or says nothing when it cannot
// tell.
func holder(fd int) string {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
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
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
			who += " (" + strings.TrimSpace(string(comm)) + ")"
		}
		return who
	}
	return ""
}
