package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// TestExitCodes: every verb's exit codes, as cron reads them. 2 is a
// usage error and nothing else (an unknown flag, a flag value the verb
// cannot use); 1 is a failure to run; 4 a policy file with problems; 0
// done. "Changes found" (3) needs a Slurm to differ from: plan, drift and
// apply without --apply give it in TestExitCodesOnSlurm (integration).
func TestExitCodes(t *testing.T) {
	if exitUsage != 2 || exitChanges != 3 || exitChanges == exitInvalid || exitUsage == exitInvalid {
		t.Fatalf("exit codes: usage %d, changes %d, invalid %d; want 2, 3 and one apart from both", exitUsage, exitChanges, exitInvalid)
	}
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: strata/v1\nkind: Policy\ncluster: {clustr: gpu}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noREST := []string{"--url", "http://127.0.0.1:1", "--token-file", filepath.Join(dir, "none.jwt")}
	lockDir := []string{"--lock-dir", dir}
	// An output folder that is a file: render cannot write there.
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	type tc struct {
		args []string
		want int
		msg  string
	}
	cases := map[string]tc{
		"check: valid":           {[]string{"check", examplePolicy}, exitOK, ""},
		"check: broken policy":   {[]string{"check", broken}, exitInvalid, "clustr"},
		"check: unknown flag":    {[]string{"check", "--prune", examplePolicy}, exitUsage, "flag provided but not defined"},
		"bad log level":          {[]string{"--log-level", "loud", "check", examplePolicy}, exitUsage, `--log-level "loud"`},
		"bad policy size":        {[]string{"--max-policy-size", "lots", "check", examplePolicy}, exitUsage, "--max-policy-size"},
		"render: written":        {[]string{"render", examplePolicy, "-o", out, "--slurm-dir", filepath.Join(out, "slurm")}, exitOK, ""},
		"render: cannot write":   {[]string{"render", examplePolicy, "-o", filepath.Join(notDir, "x"), "--slurm-dir", out}, exitFailure, "render"},
		"render: broken policy":  {[]string{"render", broken, "-o", out}, exitInvalid, "clustr"},
		"render: unknown flag":   {[]string{"render", examplePolicy, "--url", "x"}, exitUsage, "flag provided but not defined"},
		"explain: no slurmrestd": {append([]string{"explain", "user", "alice", "-p", examplePolicy}, noREST...), exitFailure, ""},
		"explain: broken policy": {append([]string{"explain", "user", "alice", "-p", broken}, noREST...), exitInvalid, "clustr"},
		"explain: not a job id":  {[]string{"explain", "job", "x"}, exitUsage, "not a job id"},
		"explain: unknown flag":  {[]string{"explain", "account", "acme", "--prune"}, exitUsage, "flag provided but not defined"},
		"apply: batch size 0":    {append([]string{"apply", examplePolicy, "--apply", "--batch-size", "0"}, noREST...), exitUsage, "--batch-size 0"},
		"apply: no slurmrestd":   {append(append([]string{"apply", examplePolicy, "--apply"}, noREST...), lockDir...), exitFailure, ""},
		"apply: broken policy":   {append([]string{"apply", broken, "--apply"}, noREST...), exitInvalid, "clustr"},
		"apply: unknown flag":    {[]string{"apply", examplePolicy, "--aply"}, exitUsage, "flag provided but not defined"},
		"unknown verb":           {[]string{"aply"}, exitUsage, "unknown command"},
	}
	for _, verb := range []string{"plan", "drift"} {
		cases[verb+": no slurmrestd"] = tc{append([]string{verb, examplePolicy}, noREST...), exitFailure, ""}
		cases[verb+": broken policy"] = tc{append([]string{verb, broken}, noREST...), exitInvalid, "clustr"}
		cases[verb+": unknown flag"] = tc{[]string{verb, examplePolicy, "--apply"}, exitUsage, "flag provided but not defined"}
		cases[verb+": bad --read-with"] = tc{append([]string{verb, examplePolicy, "--read-with", "ldap"}, noREST...), exitUsage, `--read-with "ldap"`}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"strata-policy"}, tc.args...), &stdout, &stderr)
			if code := cliexit.CodeOf(err); code != tc.want {
				t.Fatalf("exit %d (%v), want %d\n%s%s", code, err, tc.want, stdout.String(), stderr.String())
			}
			if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("error %v, want it to name %q", err, tc.msg)
			}
		})
	}
}

// TestHelpExitCodes: --help lists the exit codes, changes apart from
// usage errors.
func TestHelpExitCodes(t *testing.T) {
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"strata-policy", "--help"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"EXIT CODES:", "2   usage error", "3   plan, drift, apply without --apply: Slurm differs", "4   the policy file has problems"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("--help lacks %q:\n%s", w, stdout.String())
		}
	}
}
