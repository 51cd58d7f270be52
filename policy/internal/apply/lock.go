package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/strata-hpc/strata/internal/flock"
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
	if err = flock.Try(fd); err == nil {
		return func() { _ = unix.Close(fd) }, nil
	}
	_ = unix.Close(fd)
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("%w for cluster %s: %s is %w; wait for it to finish and run again (nothing was read or written)",
			ErrBusy, cluster, path, err)
	}
	return nil, fmt.Errorf("lock %s: %w", path, err)
}
