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

// A part at its question holds its transaction's locks in slurmdbd's
// database while it waits for the parts before it, and a part before it
// that has not asked yet may be waiting in MariaDB for one of those locks:
// a deadlock MariaDB cannot see, since the part at its question waits in
// apply, not in the database. It was seen on Slurm 24.11, in the apply
// after an interrupted one: the first part's user insert waited in
// MariaDB on a lock of the second part's open transaction, while the
// second waited at its question, until it was told no after answerWithin.
// Whatever the lock, a part waits for the part before it to ask at most
// stallWithin, or as long as it took to ask itself if that is longer
// (parts are of about one size, and normally ask within seconds of each
// other); then it is told no, which releases its locks, and it is loaded
// again in the next round. Past its question, the part before it only
// commits, which takes no row lock, and the wait is answerWithin.
const stallWithin = 30 * time.Second

// cancelGrace is how long a load whose context ends (apply got SIGTERM or
// SIGINT) has to reach its question and be told no, so that slurmdbd
// rolls its transaction back before apply exits; one still working after
// it is killed, and slurmdbd rolls its work back once the request it
// serves ends.
const cancelGrace = 60 * time.Second

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
// A run that would wait for the ones before it longer than answerWithin,
// or that asked while the one before it has not asked for stallWithin (or
// for as long as it took to ask itself), is told no, and it and those
// after it are loaded again, side by side, in a next round; the first run
// of a round never waits, so each round commits one part at least or
// stops at a failure. When ctx ends, no run commits after it: each is told
// no at its question (see loadOne), and no round starts.
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
	t := s.timing()
	n := 0
	for round := 1; ; round++ {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("sacctmgr load, part %d of %d: not started: %w", n+1, len(files), context.Cause(ctx))
		}
		k, err := s.loadRound(ctx, log, path, env, files, n, round, t)
		n += k
		switch {
		case err != nil:
			return n, fmt.Errorf("sacctmgr load, part %d of %d: %w", n+1, len(files), err)
		case n == len(files):
			return n, nil
		}
	}
}

// loadTiming are the waits of LoadInOrder (the package's, or a test's).
type loadTiming struct {
	wait, keep, stall, grace time.Duration
}

func (s *Command) timing() loadTiming {
	t := loadTiming{wait: s.answerWithin, keep: s.keepAlive, stall: s.stallWithin, grace: s.cancelGrace}
	if t.wait == 0 {
		t.wait = answerWithin
	}
	if t.keep == 0 {
		t.keep = keepAlive
	}
	if t.stall == 0 {
		t.stall = stallWithin
	}
	if t.grace == 0 {
		t.grace = cancelGrace
	}
	return t
}

// loadRound runs the parts from the first not committed side by side and
// commits them in order. It returns how many it committed, and the error
// of the part that failed, if one did before a part that was told no for
// lack of time (which the next round loads again).
func (s *Command) loadRound(ctx context.Context, log *slog.Logger, path string, env []string, files [][]byte, from, round int, t loadTiming) (int, error) {
	parts := files[from:]
	// asked[i] is closed when run i asks (or ends without asking), done[i]
	// when it has its answer; ok[i] says whether it committed, late[i]
	// whether it (or one before it) was told no for lack of time.
	asked := make([]chan struct{}, len(parts))
	done := make([]chan struct{}, len(parts))
	ok := make([]bool, len(parts))
	late := make([]bool, len(parts))
	errs := make([]error, len(parts))
	for i := range parts {
		asked[i], done[i] = make(chan struct{}), make(chan struct{})
	}
	var wg sync.WaitGroup
	for i, f := range parts {
		s.runs.Add(1)
		wg.Go(func() {
			defer close(done[i])
			start := time.Now()
			var took time.Duration
			var once sync.Once
			defer once.Do(func() { close(asked[i]) })
			ok[i], errs[i] = loadOne(ctx, path, env, f, t, func() bool {
				// sacctmgr has done its work and asks: what is left is the
				// wait for the parts before and the commit.
				took = time.Since(start)
				once.Do(func() { close(asked[i]) })
				if i == 0 {
					return ctx.Err() == nil // interrupted: no more commits
				}
				answer := time.NewTimer(t.wait)
				defer answer.Stop()
				stall := time.NewTimer(max(t.stall, took))
				defer stall.Stop()
				// First the part before must ask: until it has, it may be
				// waiting in MariaDB for a lock this part holds.
				select {
				case <-asked[i-1]:
				case <-stall.C:
					late[i] = true
					log.Warn("sacctmgr load: the part before has not finished its work since this part asked; telling this part no, "+
						"which releases its locks in slurmdbd's database that the part before may be waiting for, and loading it again after it",
						"part", from+i+1, "before", from+i, "waited", max(t.stall, took))
					return false
				case <-answer.C:
					late[i] = true
					return false
				case <-ctx.Done():
					return false
				}
				select {
				case <-done[i-1]:
					late[i] = late[i-1]
					return ok[i-1] && ctx.Err() == nil
				case <-answer.C:
					late[i] = true
					return false
				case <-ctx.Done():
					return false
				}
			})
			log.Info("sacctmgr load", "part", from+i+1, "of", len(files), "round", round, "bytes", len(f), "committed", ok[i],
				"late", late[i], "asked_after", took, "took", time.Since(start), "error", errs[i])
		})
	}
	wg.Wait()
	n := 0
	for n < len(parts) && ok[n] {
		n++
	}
	if n == len(parts) || late[n] && errs[n] == nil && ctx.Err() == nil {
		return n, nil
	}
	err := errs[n]
	if err == nil {
		err = errors.New("not committed: a load before it failed")
		if ctx.Err() != nil {
			err = fmt.Errorf("not committed: told no: %w", context.Cause(ctx))
		}
	}
	return n, err
}

// loadOne runs one `sacctmgr load` of file and, at its question, commits
// when turn (which waits for the runs before it) says so, keeping
// sacctmgr asking every t.keep meanwhile. It says whether the load
// committed. When ctx ends, it tells sacctmgr no at its question (waiting
// for the question t.grace at most, then killing it), so that slurmdbd has
// rolled the load back when it returns.
func loadOne(ctx context.Context, path string, env []string, file []byte, t loadTiming, turn func() bool) (bool, error) {
	// The file comes on a pipe of its own, as fd 3 (/dev/fd/3), so that
	// standard input carries the answer only.
	r, w, err := os.Pipe()
	if err != nil {
		return false, err
	}
	// Not CommandContext: an interrupted load is told no, not killed.
	cmd := exec.Command(path, "load", "file=/dev/fd/3")
	// Every return after Start waits for the run to end first.
	defer tie(cmd)()
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{r}
	// A child of a wrapper script that outlives it must not hold Wait.
	cmd.WaitDelay = 5 * time.Second
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
	// kill ends a run that has not asked by the end of its grace.
	kill := func() error {
		_ = cmd.Process.Kill()
		ended := <-exited
		return fmt.Errorf("killed before its question, %v after it was interrupted (%v; slurmdbd rolls its work back "+
			"once the request it serves ends): %w", t.grace, ended, context.Cause(ctx))
	}
	noQuestion := func(err error) (bool, error) {
		stdin.Close()
		if err != nil || !strings.Contains(out.String(), "Nothing new added") {
			return false, loadError(err, out.String())
		}
		turn()
		return true, nil
	}
	select {
	case <-prompt:
	case err := <-exited: // no question: it failed, or had nothing to add
		return noQuestion(err)
	case <-ctx.Done():
		grace := time.NewTimer(t.grace)
		defer grace.Stop()
		select {
		case <-prompt:
		case err := <-exited:
			return noQuestion(err)
		case <-grace.C:
			return false, kill()
		}
	}
	turned := make(chan bool, 1)
	go func() { turned <- turn() }()
	var yes bool
	tick := time.NewTicker(t.keep)
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
	var ended bool
	select {
	case err = <-exited:
		ended = true
	case <-ctx.Done():
	}
	if !ended {
		// sacctmgr waits for slurmdbd's answer to the commit or the
		// rollback: a while on a busy slurmdbd.
		grace := time.NewTimer(t.grace)
		defer grace.Stop()
		select {
		case err = <-exited:
		case <-grace.C:
			_ = cmd.Process.Kill()
			err = <-exited
		}
	}
	text := out.String()
	if err != nil || strings.Contains(text, "Changes Discarded") {
		if !yes {
			if ctx.Err() != nil {
				return false, fmt.Errorf("told no: %w", context.Cause(ctx))
			}
			return false, nil
		}
		return false, loadError(err, text)
	}
	if !yes && ctx.Err() != nil {
		return false, fmt.Errorf("told no: %w", context.Cause(ctx))
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
