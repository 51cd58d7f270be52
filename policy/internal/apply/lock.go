package apply

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrBusy says another apply of the same cluster holds the lock.
var ErrBusy = errors.New("another strata-policy apply is running")

// LockPath is the lock file of cluster's applies in dir.
func LockPath(dir, cluster string) string {
	return filepath.Join(dir, "strata-policy-"+cluster+".lock")
}

// Lock takes an exclusive flock on the lock file of cluster's applies in
// dir (made when missing, never removed), without waiting: two applies at
// once would each plan against a Slurm the other is changing, and write
// on top of each other's batches. The lock goes with the process, so a
// killed apply leaves none behind. It guards the host it is taken on: run
// applies of one cluster from one admin host. It returns the function that
// releases it.
func Lock(dir, cluster string) (unlock func(), err error) {
	path := LockPath(dir, cluster)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w (give a folder strata-policy may write with --lock-dir)", path, err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w (give a folder strata-policy may write with --lock-dir)", path, &os.PathError{Op: "open", Path: path, Err: err})
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
		return nil, fmt.Errorf("%w for cluster %s: %s is locked%s; wait for it to finish and run again (nothing was read or written)",
			ErrBusy, cluster, path, holder(fd))
	}
	return nil, fmt.Errorf("lock %s: flock: %w", path, err)
}

// holder names the process that holds the flock on fd's file, from
// /proc/locks (" by pid 1234 (strata-policy)"), or says nothing when it
// cannot tell.
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
