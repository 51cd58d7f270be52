package slurmrest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Requeuer requeues one job without REST, for parsers that have no requeue
// endpoint (Slurm 25.11 and older).
type Requeuer interface {
	Requeue(ctx context.Context, ref JobRef, hold bool, token string) error
}

// ScontrolRequeuer runs `scontrol requeue` (or `requeuehold`) with the
// token in SLURM_JWT, which makes scontrol authenticate with auth/jwt: the
// host needs slurm.conf and scontrol, but no munge identity.
type ScontrolRequeuer struct {
	// Path of scontrol; "scontrol" when empty.
	Path string
	// Env is added to the command's environment (SLURM_CONF=..., say).
	Env []string
}

// Requeue runs scontrol and maps its messages to the package's errors.
func (s ScontrolRequeuer) Requeue(ctx context.Context, ref JobRef, hold bool, token string) error {
	path := s.Path
	if path == "" {
		path = "scontrol"
	}
	verb := "requeue"
	if hold {
		verb = "requeuehold"
	}
	cmd := exec.CommandContext(ctx, path, verb, string(ref))
	cmd.Env = append(append(os.Environ(), s.Env...), "SLURM_JWT="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(out.String())
	op := fmt.Sprintf("requeue job %s (scontrol %s)", ref, verb)
	switch {
	case strings.Contains(msg, "presently disabled"):
		return fmt.Errorf("%s: %s: %w", op, msg, ErrRequeueDisabled)
	case strings.Contains(msg, "pending execution"):
		return fmt.Errorf("%s: %s: %w", op, msg, ErrJobPending)
	case strings.Contains(msg, "Invalid job id"):
		return fmt.Errorf("%s: %s: %w", op, msg, ErrNotFound)
	case strings.Contains(msg, "Access/permission denied"):
		return fmt.Errorf("%s: %s: %w", op, msg, ErrPermission)
	case strings.Contains(strings.ToLower(msg), "authentication"):
		return &AuthError{Op: op, Status: 0, Detail: msg}
	}
	return fmt.Errorf("%s: %w: %s", op, err, msg)
}
