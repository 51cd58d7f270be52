package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// TestArgs: the environment file is an argument as well as -env; a file
// that is not there fails naming it before anything is started, and any
// other argument is a usage error.
func TestArgs(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "env")
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		"env as argument":       {[]string{missing}, 1, missing},
		"env as flag":           {[]string{"-env", missing}, 1, missing},
		"flag after the env":    {[]string{missing, "-gpus", "1"}, 1, missing},
		"env and -env disagree": {[]string{"-env", "/x/env", missing}, cliexit.ExitUsage, `the ENV "` + missing + `" and --env "/x/env" disagree`},
		"two envs": {[]string{missing, "extra"}, cliexit.ExitUsage,
			`strata-demo: unexpected argument "extra": strata-demo takes at most 1 argument, [ENV] (usage: strata-demo [options] [ENV])`},
		"unknown flag":            {[]string{"-gpu", "1"}, cliexit.ExitUsage, "flag provided but not defined: -gpu"},
		"fault without its files": {[]string{"-fault", "-work", "/x", missing}, cliexit.ExitUsage, "-fault needs -tenants and -work"},
		"fault and reclaim": {[]string{"-fault", "-reclaim", "-idle-job", "4", "-waiting-job", "5", "-tenants", "/t", "-work", "/x", missing},
			cliexit.ExitUsage, "-fault and -reclaim are two runs: give one"},
		"fault with its files":       {[]string{"-fault", "-tenants", "/t", "-work", "/x", missing}, 1, missing},
		"visit without shots":        {[]string{"-visit", "alice http://127.0.0.1:1/signin/link?t=a /,/jobs"}, cliexit.ExitUsage, "-visit needs -shots"},
		"visit with no link":         {[]string{"-visit", "alice nolink /", "-shots", "/x"}, cliexit.ExitUsage, `"nolink" is not a sign-in link`},
		"visit with no paths":        {[]string{"-visit", "alice http://127.0.0.1:1/signin/link?t=a", "-shots", "/x"}, cliexit.ExitUsage, "give NAME LINK PATHS"},
		"visit with a relative path": {[]string{"-visit", "alice http://127.0.0.1:1/signin/link?t=a jobs", "-shots", "/x"}, cliexit.ExitUsage, `page "jobs" is not a path`},
		"reclaim without its jobs":   {[]string{"-reclaim", "-idle-job", "4", missing}, cliexit.ExitUsage, "-reclaim needs -idle-job, -waiting-job, -tenants and -work"},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tc.args, &out)
			if code := cliexit.CodeOf(err); code != tc.wantCode || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("exit %d, error %v; want %d and %q", code, err, tc.wantCode, tc.wantErr)
			}
		})
	}
}
