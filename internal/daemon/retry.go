package daemon

import (
	"context"
	"time"
)

// Backoff is how a daemon tries again for what it waits for at start
// (slurmrestd, its database): First, then doubling up to Max.
type Backoff struct {
	First, Max time.Duration
}

// StartBackoff is the daemons' back-off while they wait at start: 2 s
// doubling up to a minute. A variable, so that tests can shorten it.
var StartBackoff = Backoff{First: 2 * time.Second, Max: time.Minute}

// retryBeat is how often Retry beats the watchdog while it waits: a wait
// longer than a loop's stall is not a stall.
var retryBeat = 5 * time.Second

// Retry calls try until it succeeds or ctx ends. After each failure it
// calls failed with the error and the wait before the next try; failed
// records and logs it, and returns false for an error not to wait out (a
// bad configuration, as opposed to a server that does not answer): Retry
// then returns that error. While it waits it beats the watchdog at once
// and every few seconds (waiting is not being stuck). When ctx ends it
// returns ctx's error.
func Retry[T any](ctx context.Context, b Backoff, try func(context.Context) (T, error), failed func(err error, retryIn time.Duration) bool) (T, error) {
	wait := b.First
	for {
		v, err := try(ctx)
		if err == nil || !failed(err, wait) {
			return v, err
		}
		if err := sleepBeating(ctx, wait); err != nil {
			var zero T
			return zero, err
		}
		wait = min(2*wait, b.Max)
	}
}

// sleepBeating waits d, or until ctx ends, beating the watchdog at once
// and every retryBeat.
func sleepBeating(ctx context.Context, d time.Duration) error {
	Beat(ctx)
	end := time.NewTimer(d)
	defer end.Stop()
	t := time.NewTicker(retryBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return nil
		case <-t.C:
			Beat(ctx)
		}
	}
}
