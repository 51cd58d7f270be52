// Package proctest pauses a test's child process (a daemon run as one)
// at a point the test chose: Pause returns only once the process is
// stopped.
//
// kill(2) with SIGSTOP returns before the process stops: a thread that
// is running, or waiting for a CPU, goes on until the kernel next takes
// it into signal handling. On a loaded machine that is milliseconds,
// enough for a daemon to finish the write or the call the test meant to
// stop it in front of.
package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Pause sends p SIGSTOP and waits until every thread of it is stopped,
// as /proc says; it fails the test after within.
func Pause(t testing.TB, p *os.Process, within time.Duration) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP to process %d: %v", p.Pid, err)
	}
	deadline := time.Now().Add(within)
	for {
		states, err := ThreadStates(p.Pid)
		if err != nil {
			t.Fatalf("process %d: %v", p.Pid, err)
		}
		if strings.Trim(states, "Tt") == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped %v after SIGSTOP: its threads' states are %q", p.Pid, within, states)
		}
		time.Sleep(time.Millisecond)
	}
}

// ThreadStates is the state letter of each thread of process pid, as
// /proc/PID/task/TID/stat gives it (R running, S sleeping, T stopped, ...).
// A thread that ends while it is read is left out.
func ThreadStates(pid int) (string, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name, which is in parentheses
		// and may hold spaces or parentheses of its own.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 || i+2 >= len(data) {
			return "", fmt.Errorf("%s/%s/stat: no state in %q", dir, e.Name(), data)
		}
		b.WriteByte(data[i+2])
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("%s: no thread", dir)
	}
	return b.String(), nil
}
