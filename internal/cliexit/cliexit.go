// Package cliexit is the main of every Strata command: it runs the
// command with a context that ends on SIGINT or SIGTERM, prints its error,
// and exits with the code the error carries (1 when it carries none), so
// exit codes stay stable for cron and CI.
package cliexit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Error is an error with an exit code. An empty Msg prints nothing (the
// command already explained itself on stdout).
type Error struct {
	Code int
	Msg  string
}

func (e Error) Error() string { return e.Msg }

// CodeOf returns the exit code err stands for: 0 for nil, its Code for an
// Error, 1 otherwise.
func CodeOf(err error) int {
	if err == nil {
		return 0
	}
	var e Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 1
}

// Main runs run and exits.
func Main(prog string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil && err.Error() != "" {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	}
	os.Exit(CodeOf(err))
}
