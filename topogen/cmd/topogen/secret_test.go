package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigToken: check-config refuses a slurmrestd token every
// user can read, and accepts a private one.
func TestCheckConfigToken(t *testing.T) {
	for name, tc := range map[string]struct {
		mode    os.FileMode
		wantErr string
	}{
		"0600": {mode: 0o600},
		"0640": {mode: 0o640},
		"0644": {mode: 0o644, wantErr: "slurm.rest.token_file: "},
		"0606": {mode: 0o606, wantErr: "is readable or writable by every user of this host"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tok := filepath.Join(dir, "slurmrestd.jwt")
			if err := os.WriteFile(tok, []byte("secret-token\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(tok, tc.mode); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "topogen.yaml")
			if err := os.WriteFile(cfg, []byte("apiVersion: strata/v1\nkind: TopogenConfig\nslurm:\n  node_source: slurmrestd\n  rest: {token_file: "+tok+"}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := run(t.Context(), []string{"topogen", "check-config", cfg}, &out, &out)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("check-config: %v\n%s", err, out.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("check-config = %v, want %q", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret-token") {
				t.Errorf("the error quotes the token: %v", err)
			}
		})
	}
}
