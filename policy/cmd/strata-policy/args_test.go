package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

const examplePolicy = "../../../etc/strata/policy.yaml"

// TestArgs: every verb that reads the policy takes it as an argument as
// well as --policy (check used to validate /etc/strata/policy.yaml whatever
// it was given), a file that is not there fails naming it before Slurm is
// asked anything, and an argument the verb does not take is a usage error
// that says what it takes.
func TestArgs(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	out := filepath.Join(dir, "out")
	// No slurmrestd listens here: a verb that got as far as Slurm fails
	// with exit 1, not 3.
	noREST := []string{"--url", "http://127.0.0.1:1", "--token-file", filepath.Join(dir, "none.jwt")}
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		"check: file":              {args: []string{"check", examplePolicy}, wantOut: examplePolicy + " is valid"},
		"check: file by flag":      {args: []string{"check", "-p", examplePolicy}, wantOut: examplePolicy + " is valid"},
		"check: missing file":      {args: []string{"check", missing}, wantCode: exitInvalid, wantErr: missing},
		"check: file and flag":     {args: []string{"check", "-p", examplePolicy, missing}, wantCode: cliexit.ExitUsage, wantErr: "disagree"},
		"check: two files":         {args: []string{"check", examplePolicy, missing}, wantCode: cliexit.ExitUsage, wantErr: `check: unexpected argument "` + missing + `": check takes at most 1 argument, [POLICY] (usage: strata-policy check [options] [POLICY])`},
		"plan: file reaches Slurm": {args: append([]string{"plan", examplePolicy}, noREST...), wantCode: exitFailure},
		"plan: missing file":       {args: append([]string{"plan", missing}, noREST...), wantCode: exitInvalid, wantErr: missing},
		"plan: extra":              {args: []string{"plan", examplePolicy, "x"}, wantCode: cliexit.ExitUsage, wantErr: `plan: unexpected argument "x"`},
		"apply: missing file":      {args: append([]string{"apply", missing, "--apply"}, noREST...), wantCode: exitInvalid, wantErr: missing},
		"apply: extra":             {args: []string{"apply", examplePolicy, "--apply", "x"}, wantCode: cliexit.ExitUsage, wantErr: `apply: unexpected argument "x"`},
		"drift: missing file":      {args: append([]string{"drift", missing}, noREST...), wantCode: exitInvalid, wantErr: missing},
		"drift: extra":             {args: []string{"drift", examplePolicy, "x"}, wantCode: cliexit.ExitUsage, wantErr: `drift: unexpected argument "x"`},
		"render: file":             {args: []string{"render", examplePolicy, "-o", out, "--slurm-dir", out}, wantOut: "wrote " + out},
		"render: missing file":     {args: []string{"render", missing, "-o", out}, wantCode: exitInvalid, wantErr: missing},
		"render: extra":            {args: []string{"render", examplePolicy, "x"}, wantCode: cliexit.ExitUsage, wantErr: `render: unexpected argument "x"`},
		"explain: missing policy":  {args: []string{"explain", "job", "12", "-p", missing}, wantCode: exitInvalid, wantErr: missing},
		"explain: extra":           {args: []string{"explain", "job", "12", "13"}, wantCode: cliexit.ExitUsage, wantErr: `explain job: unexpected argument "13": explain job takes 1 argument, ID`},
		"unknown verb":             {args: []string{"chek", examplePolicy}, wantCode: cliexit.ExitUsage, wantErr: `unknown command "chek": want one of check, plan, apply, drift, explain, render`},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"strata-policy", "--log-level", "error"}, tc.args...), &stdout, &stderr)
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s%s", code, err, tc.wantCode, stdout.String(), stderr.String())
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, stdout.String())
			}
		})
	}
}

// TestAuthErrorThroughRun: a token slurmrestd rejects comes out of run as
// exit 1 with the *slurmrest.AuthError still in the chain, so a caller can
// tell it from any other failure.
func TestAuthErrorThroughRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"description":"authentication failed","error_number":1007}]}`))
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "policy.jwt")
	if err := os.WriteFile(token, []byte("expired\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"strata-policy", "--log-level", "error", "plan", examplePolicy, "--url", srv.URL, "--token-file", token},
		&stdout, &stderr)
	var auth *slurmrest.AuthError
	if !errors.As(err, &auth) {
		t.Fatalf("errors.As found no *slurmrest.AuthError in %v", err)
	}
	if code := cliexit.CodeOf(err); code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if !strings.Contains(err.Error(), "slurmrestd rejected the token") {
		t.Errorf("message %q lost the AuthError's text", err)
	}
}
