package cliexit

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodeOf(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want int
	}{
		"nil":          {nil, 0},
		"plain":        {errors.New("x"), 1},
		"coded":        {Error{Code: 3, Msg: "invalid"}, 3},
		"wrapped code": {fmt.Errorf("outer: %w", Error{Code: 4}), 4},
	} {
		t.Run(name, func(t *testing.T) {
			if got := CodeOf(tc.err); got != tc.want {
				t.Errorf("CodeOf(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
