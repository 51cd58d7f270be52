package slurmrest

import (
	"context"
	"fmt"
	"strings"

	"github.com/strata-hpc/strata/internal/secretfile"
)

// SecretToken is the daemons' FileToken: the token file is read through
// internal/secretfile, so a rotated token is read again when the file
// changes (and on SIGHUP, File being a daemon.Reloader), and a file that
// others can read, a FIFO or a device is refused rather than used.
type SecretToken struct{ File *secretfile.File }

// Token returns the file's current token.
func (s SecretToken) Token(context.Context, string) (string, error) {
	b, err := s.File.Get()
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(strings.TrimPrefix(string(b), "SLURM_JWT="))
	if tok == "" {
		return "", fmt.Errorf("token file %s holds no token: write a token from `scontrol token` into it", s.File.Path)
	}
	return tok, nil
}
