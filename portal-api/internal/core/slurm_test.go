package core

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// TestSlurmStatus: what Slurm said becomes an answer the caller can act on.
func TestSlurmStatus(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		code int
	}{
		"refused":     {&slurmrest.APIError{Op: "submit job", Status: 422}, 422},
		"auth":        {&slurmrest.AuthError{Op: "cancel"}, 403},
		"not found":   {fmt.Errorf("cancel: %w", slurmrest.ErrNotFound), 404},
		"unsupported": {fmt.Errorf("requeue: %w", slurmrest.ErrUnsupported), 501},
		"down":        {errors.New("dial tcp: connection refused"), 502},
		"server":      {&slurmrest.APIError{Op: "submit job", Status: 503}, 502},
	} {
		if code, _, _ := slurmStatus(c.err); code != c.code {
			t.Errorf("%s: %d, want %d", name, code, c.code)
		}
	}
}
