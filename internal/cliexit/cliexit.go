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

// ExitUsage is the exit code of a usage error: an argument or flag the
// command does not take, or a missing one. Nothing was read or changed.
const ExitUsage = 2

// ExitChanges is the exit code of a plan, diff or drift check that ran
// and found changes (terraform plan -detailed-exitcode's 2, moved to 3 so
// that a usage error never reads as drift): 0 means the same, 1 an error,
// 2 a usage error.
const ExitChanges = 3

// Error is an error with an exit code. It prints Msg, or the error it
// wraps when Msg is empty; when both are empty it prints nothing (the
// command already explained itself on stdout). Err stays reachable to
// errors.Is and errors.As through the command's run.
type Error struct {
	Code int
	Msg  string
	Err  error
}

func (e Error) Error() string {
	if e.Msg == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the error e carries.
func (e Error) Unwrap() error { return e.Err }

// Wrap gives err an exit code; a nil err stays nil.
func Wrap(code int, err error) error {
	if err == nil {
		return nil
	}
	return Error{Code: code, Err: err}
}

// Usagef is a usage error (exit code ExitUsage) with a message that says
// what the command expected.
func Usagef(format string, args ...any) error {
	return Error{Code: ExitUsage, Msg: fmt.Sprintf(format, args...)}
}

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
