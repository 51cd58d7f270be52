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
		"no name": {[]string{"explain", "user"}, cliexit.ExitUsage, "explain user: missing NAME (usage: strata-policy explain user [options] NAME)"},
		"two names": {[]string{"explain", "user", "alice", "bob"}, cliexit.ExitUsage,
			`explain user: unexpected argument "bob": explain user takes 1 argument, NAME`},
		"not a job id":   {[]string{"explain", "job", "12x"}, cliexit.ExitUsage, `explain job: "12x" is not a job id`},
		"unknown flag":   {[]string{"explain", "account", "acme", "--jsn"}, cliexit.ExitUsage, "explain account: flag provided but not defined: -jsn"},
		"unknown kind":   {[]string{"explain", "jobs", "12"}, cliexit.ExitUsage, `explain: unknown command "jobs": want one of user, account, job`},
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
