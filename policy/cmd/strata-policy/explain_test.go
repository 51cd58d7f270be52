package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// TestExplainArgs: explain takes one name, flags may follow it, and bad
// input is a clear error before anything is read from Slurm.
func TestExplainArgs(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "policy.yaml")
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		want     string
	}{
		"no name":        {[]string{"explain", "user"}, exitFailure, "explain user: which one? usage: strata-policy explain user <name>"},
		"two names":      {[]string{"explain", "user", "alice", "bob"}, exitFailure, `explain user takes one <name>, got "alice" and "bob"`},
		"not a job id":   {[]string{"explain", "job", "12x"}, exitFailure, `explain job: "12x" is not a job id`},
		"unknown flag":   {[]string{"explain", "account", "acme", "--jsn"}, exitFailure, "flag provided but not defined: -jsn"},
		"flag after id":  {[]string{"explain", "job", "12", "--policy", missing}, exitInvalid, missing},
		"flag before id": {[]string{"explain", "job", "--policy", missing, "12"}, exitInvalid, missing},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"strata-policy", "--log-level", "error"}, tc.args...), &out, &out)
			if code := cliexit.CodeOf(err); code != tc.wantCode || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exit %d, error %v; want %d and %q", code, err, tc.wantCode, tc.want)
			}
		})
	}
}
