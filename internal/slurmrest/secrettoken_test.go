package slurmrest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/secretfile"
)

// SecretToken reads the token as FileToken does (SLURM_JWT= or bare,
// read again after a rotation) and refuses a file every user can read.
func TestSecretToken(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slurm.jwt")
	tok := SecretToken{File: &secretfile.File{Path: p, What: "slurm.token_file"}}
	for _, tc := range []struct {
		data    string
		mode    os.FileMode
		want    string
		wantErr string
	}{
		{data: "SLURM_JWT=abc\n", mode: 0o600, want: "abc"},
		{data: "defgh\n", mode: 0o640, want: "defgh"},
		{data: "SLURM_JWT=\n", mode: 0o600, wantErr: "holds no token"},
		{data: "xyz\n", mode: 0o644, wantErr: "slurm.token_file: "},
	} {
		tmp := p + ".new"
		if err := os.WriteFile(tmp, []byte(tc.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(tmp, tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		got, err := tok.Token(t.Context(), "alice")
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q mode %04o: %q, %v; want an error with %q", tc.data, tc.mode, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%q mode %04o: %q, %v; want %q", tc.data, tc.mode, got, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "xyz") {
			t.Errorf("the error quotes the token: %v", err)
		}
	}
}
