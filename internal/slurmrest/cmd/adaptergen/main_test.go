package main

import (
	"context"
	"strings"
	"testing"
)

func TestRunRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"an argument":       {args: []string{"internal/slurmrest"}, want: `unexpected argument "internal/slurmrest"`},
		"no oapi-codegen":   {args: []string{"-dir", t.TempDir()}, want: "no oapi-codegen given"},
		"a missing one":     {args: []string{"-oapi-codegen", "/nonexistent/oapi-codegen"}, want: "/nonexistent/oapi-codegen"},
		"no captured specs": {args: []string{"-dir", t.TempDir(), "-oapi-codegen", "go"}, want: "captured spec of v0.0.45"},
		"unknown flag":      {args: []string{"-out", "x"}, want: "flag provided but not defined: -out"},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}
