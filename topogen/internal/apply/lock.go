package apply

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/strata-hpc/strata/internal/flock"
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
	if err = flock.Try(fd); err == nil {
		return func() { _ = unix.Close(fd) }, nil
	}
	_ = unix.Close(fd)
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("%w: %s is %w; wait for it to finish (a timer's apply takes a few seconds) and run again",
			ErrBusy, dir, err)
	}
	return nil, fmt.Errorf("lock %s: %w", dir, err)
}
