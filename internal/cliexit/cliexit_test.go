package cliexit_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

func TestCodeOf(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want int
	}{
		"nil":          {nil, 0},
		"plain":        {errors.New("x"), 1},
		"coded":        {cliexit.Error{Code: 3, Msg: "invalid"}, 3},
		"wrapped code": {fmt.Errorf("outer: %w", cliexit.Error{Code: 4}), 4},
		"wrap":         {cliexit.Wrap(5, errors.New("x")), 5},
		"usage":        {cliexit.Usagef("list takes no arguments"), cliexit.ExitUsage},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cliexit.CodeOf(tc.err); got != tc.want {
				t.Errorf("CodeOf(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	inner := errors.New("slurmctld unreachable")
	for name, tc := range map[string]struct {
		err  cliexit.Error
		want string
	}{
		"message":            {cliexit.Error{Code: 1, Msg: "bad"}, "bad"},
		"wrapped":            {cliexit.Error{Code: 1, Err: inner}, "slurmctld unreachable"},
		"message over error": {cliexit.Error{Code: 1, Msg: "plan: x", Err: inner}, "plan: x"},
		"silent":             {cliexit.Error{Code: 2}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	if cliexit.Wrap(3, nil) != nil {
		t.Errorf("Wrap(3, nil) is not nil")
	}
}

// TestAuthErrorThroughExit: a command that turns a slurmrestd refusal into
// an exit code keeps the *slurmrest.AuthError reachable, so callers (and
// tests) can tell a rejected token from any other failure.
func TestAuthErrorThroughExit(t *testing.T) {
	auth := &slurmrest.AuthError{Op: "jobs", User: "root", Status: http.StatusUnauthorized, Detail: "Unauthorized"}
	err := fmt.Errorf("run: %w", cliexit.Wrap(1, fmt.Errorf("node list: %w", auth)))
	var got *slurmrest.AuthError
	if !errors.As(err, &got) || got != auth {
		t.Fatalf("errors.As did not find the *slurmrest.AuthError in %v", err)
	}
	if !errors.Is(err, auth) {
		t.Errorf("errors.Is did not find the *slurmrest.AuthError in %v", err)
	}
	if cliexit.CodeOf(err) != 1 || err.Error() != "run: node list: "+auth.Error() {
		t.Errorf("code %d, text %q", cliexit.CodeOf(err), err.Error())
	}
}
