package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Retry tries until the try succeeds, stops at once on an error failed
// does not wait out, and stops when the context ends; the waits it
// reports double from First up to Max.
func TestRetry(t *testing.T) {
	errDown := errors.New("connection refused")
	errBad := errors.New("bad configuration")
	b := Backoff{First: time.Millisecond, Max: 4 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		errs      []error // what each try returns; past the end, errDown
		cancelAt  int     // cancel the context after this many tries (0: never)
		wantTries int
		wantErr   error
		wantWaits []time.Duration
	}{
		{name: "at once", errs: []error{nil}, wantTries: 1},
		{name: "after failures", errs: []error{errDown, errDown, errDown, errDown, nil}, wantTries: 5,
			wantWaits: []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}},
		{name: "an error not waited out", errs: []error{errDown, errBad, nil}, wantTries: 2, wantErr: errBad,
			wantWaits: []time.Duration{time.Millisecond}},
		{name: "stopped while waiting", cancelAt: 3, wantTries: 3, wantErr: context.Canceled,
			wantWaits: []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tries := 0
			var waits []time.Duration
			v, err := Retry(ctx, b, func(context.Context) (int, error) {
				tries++
				if tc.cancelAt != 0 && tries == tc.cancelAt {
					cancel()
				}
				if tries <= len(tc.errs) && tc.errs[tries-1] == nil {
					return tries, nil
				}
				if tries <= len(tc.errs) {
					return -1, tc.errs[tries-1]
				}
				return -1, errDown
			}, func(err error, wait time.Duration) bool {
				if errors.Is(err, errBad) {
					return false
				}
				waits = append(waits, wait)
				return true
			})
			if !errors.Is(err, tc.wantErr) || tries != tc.wantTries {
				t.Fatalf("Retry: %v after %d tries; want %v after %d", err, tries, tc.wantErr, tc.wantTries)
			}
			if err == nil && v != tries {
				t.Errorf("Retry returned %d; want the last try's %d", v, tries)
			}
			if err != nil && v != 0 && !errors.Is(err, errBad) {
				t.Errorf("Retry returned %d with %v; want the zero value", v, err)
			}
			if got, want := fmt.Sprint(waits), fmt.Sprint(tc.wantWaits); got != want {
				t.Errorf("waits %s; want %s", got, want)
			}
		})
	}
}
