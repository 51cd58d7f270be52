package sacctmgr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// commitPrompt is what sacctmgr asks before it commits (without -i); it
// takes "no" when it gets no answer in 30 seconds.
const commitPrompt = "(N/y): "

// sacctmgr takes no answer within 30 seconds as no and discards its
// work, and the parts' commits are one after another (each makes slurmdbd
// and slurmctld update thousands of associations), so on a busy machine
// a part that asked would be lost while it waits for its turn. Every
// keepAlive of its wait it is sent a space: not y, n or a newline, so
// sacctmgr asks again, with 30 seconds more. A part that still waits
// after answerWithin is told no, and loaded again in the next round.
const (
	keepAlive    = 20 * time.Second
	answerWithin = 10 * time.Minute
)

// LoadInOrder loads the files side by side and commits them in their
// order, so that what slurmdbd keeps is always a prefix of them: each
// sacctmgr run (without -i) does its work in its own transaction and asks
// before it commits; it is told yes once every run before it has
// committed, and no when one of them failed. It returns how many files
// were committed, and the error of the first that was not. The files must
// not depend on each other (each names only accounts that exist, and no
// user another creates): sacctmgr reads slurmdbd as it was when it
// started.
//
// A run that would wait for the ones before it longer than answerWithin
// is told no, and it and those after it are loaded again, side by side,
// in a next round; the first run of a round never waits, so each round
// commits one part at least or stops at a failure.
//
// sacctmgr looks up each line of a flat file in lists of what it read
// and what the file adds, one by one, so a load's own time grows with the
// square of its size (35,000 new users: minutes before slurmdbd sees
// anything); runs of a part each, started together, take a fraction of
// it, and slurmdbd works on their transactions side by side. It always
// runs sacctmgr through os/exec, with the token as Load does.
func (s *Command) LoadInOrder(ctx context.Context, files [][]byte) (int, error) {
	if len(files) == 0 {
		return 0, nil
	}
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := s.Path
	if path == "" {
		path = "sacctmgr"
	}
	env := append(os.Environ(), s.Env...)
	if s.Token != nil {
		tok, err := s.Token(ctx)
		if err != nil {
			return 0, fmt.Errorf("sacctmgr load: token: %w", err)
		}
		env = append(env, "SLURM_JWT="+tok)
	}
	wait, keep := s.answerWithin, s.keepAlive
	if wait == 0 {
		wait = answerWithin
	}
	if keep == 0 {
		keep = keepAlive
	}
	n := 0
	for round := 1; ; round++ {
		k, err := s.loadRound(ctx, log, path, env, files, n, round, wait, keep)
		n += k
		switch {
		case err != nil:
			return n, fmt.Errorf("sacctmgr load, part %d of %d: %w", n+1, len(files), err)
		case n == len(files):
			return n, nil
		}
	}
}

// loadRound runs the parts from the first not committed side by side and
// commits them in order. It returns how many it committed, and the error
// of the part that failed, if one did before a part that was told no for
// lack of time (which the next round loads again).
func (s *Command) loadRound(ctx context.Context, log *slog.Logger, path string, env []string, files [][]byte, from, round int, wait, keep time.Duration) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := files[from:]
	// done[i] is closed when run i has its answer; ok[i] says whether it
	// committed, late[i] whether it (or one before it) was told no for
	// lack of time.
	done := make([]chan struct{}, len(parts))
	ok := make([]bool, len(parts))
	late := make([]bool, len(parts))
	errs := make([]error, len(parts))
	for i := range parts {
		done[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for i, f := range parts {
		s.runs.Add(1)
		wg.Go(func() {
			defer close(done[i])
			start := time.Now()
			var asked time.Duration
			ok[i], errs[i] = loadOne(ctx, path, env, f, keep, func() bool {
				// sacctmgr has done its work and asks: what is left is the
				// wait for the parts before and the commit.
				asked = time.Since(start)
				if i == 0 {
					return true
				}
				t := time.NewTimer(wait)
				defer t.Stop()
				select {
				case <-done[i-1]:
					late[i] = late[i-1]
					return ok[i-1]
				case <-t.C:
					late[i] = true
					return false
				}
			})
			log.Info("sacctmgr load", "part", from+i+1, "of", len(files), "round", round, "bytes", len(f), "committed", ok[i],
				"late", late[i], "asked_after", asked, "took", time.Since(start), "error", errs[i])
		})
	}
	wg.Wait()
	n := 0
	for n < len(parts) && ok[n] {
		n++
	}
	if n == len(parts) || late[n] && errs[n] == nil {
		return n, nil
	}
	err := errs[n]
	if err == nil {
		err = errors.New("not committed: a load before it failed")
	}
	return n, err
}

// loadOne runs one `sacctmgr load` of file and, at its question, commits
// when turn (which waits for the runs before it) says so, keeping
// sacctmgr asking every keep meanwhile. It says whether the load
// committed.
func loadOne(ctx context.Context, path string, env []string, file []byte, keep time.Duration, turn func() bool) (bool, error) {
	// The file comes on a pipe of its own, as fd 3 (/dev/fd/3), so that
	// standard input carries the answer only.
	r, w, err := os.Pipe()
	if err != nil {
		return false, err
	}
	cmd := exec.CommandContext(ctx, path, "load", "file=/dev/fd/3")
	// Every return after Start waits for the run to end first.
	defer tie(cmd)()
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{r}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.Close()
		w.Close()
		return false, err
	}
	var out syncBuffer
	prompt := make(chan struct{})
	out.watch, out.signal = commitPrompt, prompt
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return false, err
	}
	r.Close()
	go func() {
		_, _ = w.Write(file)
		w.Close()
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-prompt:
	case err := <-exited: // no question: it failed, or had nothing to add
		stdin.Close()
		if err != nil || !strings.Contains(out.String(), "Nothing new added") {
			return false, loadError(err, out.String())
		}
		turn()
		return true, nil
	}
	turned := make(chan bool, 1)
	go func() { turned <- turn() }()
	var yes bool
	tick := time.NewTicker(keep)
	defer tick.Stop()
wait:
	for {
		select {
		case yes = <-turned:
			break wait
		case <-tick.C:
			_, _ = io.WriteString(stdin, " ")
		}
	}
	answer := "n\n"
	if yes {
		answer = "y\n"
	}
	_, _ = io.WriteString(stdin, answer)
	stdin.Close()
	err = <-exited
	text := out.String()
	if err != nil || strings.Contains(text, "Changes Discarded") {
		if !yes {
			return false, nil
		}
		return false, loadError(err, text)
	}
	return yes, nil
}

func loadError(err error, out string) error {
	msg := strings.TrimSpace(out)
	if len(msg) > maxMessage {
		msg = msg[len(msg)-maxMessage:]
	}
	if err == nil {
		err = errors.New("not committed")
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// syncBuffer collects a command's output and signals once when it has
// printed watch.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	watch  string
	signal chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := s.b.Write(p)
	if s.signal != nil && bytes.Contains(s.b.Bytes()[max(0, s.b.Len()-len(p)-len(s.watch)):], []byte(s.watch)) {
		close(s.signal)
		s.signal = nil
	}
	return n, nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
