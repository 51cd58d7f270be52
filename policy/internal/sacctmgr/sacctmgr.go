// Package sacctmgr runs Slurm's sacctmgr for what slurmrestd cannot do,
// or cannot do fast enough, and parses what it prints.
package sacctmgr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// Command runs sacctmgr for what slurmrestd does not do well on Slurm
// 24.11 through 26.05: the one write it cannot make, emptying a QOS's
// preempt list (it keeps the list when it is posted empty, and 26.05's
// slurmrestd dies on a list that holds an empty name), and reading every
// association of a large slurmdbd (see read.go). Every run is logged; a
// failed run's error carries what sacctmgr printed.
type Command struct {
	// Path of sacctmgr; "sacctmgr" when empty.
	Path string
	// Token, when set, gives the JWT that sacctmgr authenticates with
	// (SLURM_JWT), so the host needs slurm.conf but no munge identity.
	Token func(ctx context.Context) (string, error)
	// Env is added to sacctmgr's environment (SLURM_CONF=..., say).
	Env []string
	// Runner runs the command; nil runs it with os/exec.
	Runner Runner
	Log    *slog.Logger

	runs atomic.Int64
	// answerWithin, keepAlive, stallWithin and cancelGrace replace the
	// package's (tests).
	answerWithin, keepAlive, stallWithin, cancelGrace time.Duration
}

// Runs is the number of times sacctmgr was run.
func (s *Command) Runs() int64 { return s.runs.Load() }

// Runner runs a command and returns what it printed.
type Runner interface {
	Run(ctx context.Context, path string, args, env []string) (stdout, stderr []byte, err error)
}

// InputRunner is a Runner that also feeds the command's standard input
// (what Load needs).
type InputRunner interface {
	RunInput(ctx context.Context, path string, args, env []string, stdin []byte) (stdout, stderr []byte, err error)
}

// ExecRunner runs commands with os/exec, in the caller's environment plus
// env.
type ExecRunner struct{}

// Run implements Runner.
func (e ExecRunner) Run(ctx context.Context, path string, args, env []string) ([]byte, []byte, error) {
	return e.RunInput(ctx, path, args, env, nil)
}

// RunInput implements InputRunner.
func (ExecRunner) RunInput(ctx context.Context, path string, args, env []string, stdin []byte) ([]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	defer tie(cmd)()
	err := cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}

// Load runs `sacctmgr -i load` on a flat file (the format of `sacctmgr
// dump`), given on standard input so that sacctmgr needs no file it can
// see (it may run in another root, or on another host through a wrapper).
// sacctmgr adds what the file has and slurmdbd lacks, and commits it in
// one transaction: a load that fails keeps nothing (Slurm 24.11 through
// 26.05). It changes objects that exist to match the file, and never
// removes any: give it new objects only.
func (s *Command) Load(ctx context.Context, file []byte) error {
	_, err := s.runInput(ctx, file, "-i", "load", "file=/dev/stdin")
	return err
}

// ClearQOSPreempt empties the preempt list of a QOS.
func (s *Command) ClearQOSPreempt(ctx context.Context, qos string) error {
	if qos == "" || strings.ContainsAny(qos, " =,\t\n") {
		return fmt.Errorf("clear the preempt list of QOS %q: not a QOS name", qos)
	}
	_, err := s.run(ctx, "-i", "modify", "qos", "where", "name="+qos, "set", "preempt=")
	return err
}

// maxMessage bounds what a failed run's error carries of its output.
const maxMessage = 4000

// run runs sacctmgr with args and returns what it printed on stdout.
func (s *Command) run(ctx context.Context, args ...string) ([]byte, error) {
	return s.runInput(ctx, nil, args...)
}

// runInput is run with stdin (nil: none) on sacctmgr's standard input.
func (s *Command) runInput(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	path := s.Path
	if path == "" {
		path = "sacctmgr"
	}
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runner := s.Runner
	if runner == nil {
		runner = ExecRunner{}
	}
	env := append([]string(nil), s.Env...)
	if s.Token != nil {
		tok, err := s.Token(ctx)
		if err != nil {
			return nil, fmt.Errorf("sacctmgr %s: token: %w", strings.Join(args, " "), err)
		}
		env = append(env, "SLURM_JWT="+tok)
	}
	full := args
	level := slog.LevelDebug // a read
	if len(full) > 0 && full[0] == "-i" {
		level = slog.LevelInfo // a write
	}
	log.Log(ctx, level, "running sacctmgr", "path", path, "args", strings.Join(full, " "))
	s.runs.Add(1)
	var stdout, stderr []byte
	var err error
	if stdin == nil {
		stdout, stderr, err = runner.Run(ctx, path, full, env)
	} else if ir, ok := runner.(InputRunner); ok {
		stdout, stderr, err = ir.RunInput(ctx, path, full, env, stdin)
	} else {
		err = fmt.Errorf("sacctmgr %s: its runner cannot give it standard input", strings.Join(full, " "))
	}
	if err != nil {
		msg := strings.TrimSpace(strings.TrimSpace(string(stderr)) + "\n" + strings.TrimSpace(string(stdout)))
		if len(msg) > maxMessage { // a load prints every line it adds
			msg = msg[:maxMessage/4] + "\n...\n" + msg[len(msg)-maxMessage*3/4:]
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			msg = strings.TrimSpace(msg + " (no sacctmgr at " + path + ": set --sacctmgr to its path)")
		}
		// A failed write is an error of apply; a failed read is the
		// caller's to report (it may read through slurmrestd instead).
		failed := slog.LevelDebug
		if level == slog.LevelInfo {
			failed = slog.LevelError
		}
		log.Log(ctx, failed, "sacctmgr failed", "args", strings.Join(full, " "), "error", err, "output", msg)
		if msg == "" {
			return nil, fmt.Errorf("sacctmgr %s: %w", strings.Join(full, " "), err)
		}
		return nil, fmt.Errorf("sacctmgr %s: %w: %s", strings.Join(full, " "), err, msg)
	}
	log.Debug("sacctmgr done", "args", strings.Join(full, " "), "bytes", len(stdout))
	return stdout, nil
}
