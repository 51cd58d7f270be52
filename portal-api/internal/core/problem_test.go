package core

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// TestAsProblem: no error is no problem (and no panic), whether the nil
// is an untyped one or a nil *Problem held in an error; a Problem, bare
// or wrapped, is itself; any other error is an internal problem that
// says it. StatusOf answers the same statuses, 0 for no error.
func TestAsProblem(t *testing.T) {
	var nilProblem *Problem
	forbidden := problem(http.StatusForbidden, api.Forbidden, "no", "ask")
	for _, tc := range []struct {
		name   string
		err    error
		want   *Problem
		status int
		msg    string
	}{
		{name: "nil", err: nil, status: 0},
		{name: "typed nil", err: nilProblem, status: 0},
		{name: "problem", err: forbidden, want: forbidden, status: http.StatusForbidden},
		{name: "wrapped", err: fmt.Errorf("pages: %w", forbidden), want: forbidden, status: http.StatusForbidden},
		{name: "other", err: errors.New("disk full"), status: http.StatusInternalServerError, msg: "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AsProblem(tc.err)
			if st := StatusOf(tc.err); st != tc.status {
				t.Errorf("StatusOf = %d, want %d", st, tc.status)
			}
			switch {
			case tc.want != nil:
				if got != tc.want {
					t.Errorf("AsProblem = %+v, want %+v", got, tc.want)
				}
			case tc.msg != "":
				if got == nil || got.Code != api.Internal || got.Message != tc.msg {
					t.Errorf("AsProblem = %+v, want an internal problem saying %q", got, tc.msg)
				}
			default:
				if got != nil {
					t.Errorf("AsProblem(%v) = %+v, want nil", tc.err, got)
				}
			}
		})
	}
}
