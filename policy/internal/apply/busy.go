package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

// Canceller cancels jobs and reads them back (*slurmrest.Client).
type Canceller interface {
	Cancel(ctx context.Context, id int64) error
	Job(ctx context.Context, id int64) (slurmrest.Job, error)
}

// How long apply waits, with --force-busy, for cancelled jobs to end and
// for slurmdbd to stop counting them, and how often it looks. slurmctld
// ends a cancelled job at once, but slurmdbd hears of it a moment later
// and refuses the removal until then.
var (
	busyTimeout = 2 * time.Minute
	busyPoll    = time.Second
)

// cancelJobs cancels the jobs of a cancel change and waits until slurmctld
// reports each of them ended (or no longer knows it).
func cancelJobs(ctx context.Context, s Slurm, c plan.Change) error {
	jc, ok := s.(Canceller)
	if !ok {
		return fmt.Errorf("cancel jobs of %s: not supported by this writer", c.Name)
	}
	for _, id := range c.Busy {
		if err := jc.Cancel(ctx, id); err != nil && !errors.Is(err, slurmrest.ErrNotFound) {
			// A job that ended meanwhile cannot be cancelled: that is fine.
			if j, jerr := jc.Job(ctx, id); jerr == nil && active(j) {
				return fmt.Errorf("cancel job %d: %w", id, err)
			}
		}
	}
	return wait(ctx, fmt.Sprintf("jobs %v of %s to end", c.Busy, c.Name), func() (bool, error) {
		for _, id := range c.Busy {
			j, err := jc.Job(ctx, id)
			if errors.Is(err, slurmrest.ErrNotFound) {
				continue
			}
			if err != nil {
				return false, err
			}
			if active(j) {
				return false, nil
			}
		}
		return true, nil
	})
}

// removeBusy makes a removal that cancelled jobs held back, again while
// slurmdbd still counts them (slurmrest.ErrJobsActive).
func removeBusy(ctx context.Context, c plan.Change, remove func() error) error {
	var last error
	err := wait(ctx, fmt.Sprintf("slurmdbd to see jobs %v end before %s %s %s", c.Busy, c.Op, c.Kind, c.Name), func() (bool, error) {
		last = remove()
		if errors.Is(last, slurmrest.ErrJobsActive) {
			return false, nil
		}
		return true, last
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last answer: %w)", err, last)
	}
	return err
}

// wait polls done every busyPoll until it says true or fails, for at most
// busyTimeout.
func wait(ctx context.Context, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, busyTimeout)
	defer cancel()
	t := time.NewTicker(busyPoll)
	defer t.Stop()
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting (at most %s) for %s: %w", busyTimeout, what, ctx.Err())
		case <-t.C:
		}
	}
}

func active(j slurmrest.Job) bool {
	return j.State.Has("PENDING") || j.State.Has("RUNNING") || j.State.Has("SUSPENDED")
}
