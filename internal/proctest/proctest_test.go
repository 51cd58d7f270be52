package proctest

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child that spins on every CPU it can is stopped, every thread, once
// Pause returns, and runs again after SIGCONT.
func TestPause(t *testing.T) {
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	states, err := ThreadStates(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(states, "Tt") {
		t.Fatalf("states %q before Pause: stopped already", states)
	}
	Pause(t, cmd.Process, 10*time.Second)
	if states, err = ThreadStates(cmd.Process.Pid); err != nil || strings.Trim(states, "Tt") != "" {
		t.Fatalf("states %q (%v) after Pause, want every thread stopped", states, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if states, err = ThreadStates(cmd.Process.Pid); err == nil && strings.Trim(states, "Tt") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("states %q (%v) 10 s after SIGCONT, want running", states, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// A process that is gone is an error, not a stop.
func TestThreadStatesOfNoProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if s, err := ThreadStates(cmd.Process.Pid); err == nil {
		t.Fatalf("states %q of an ended process, want an error", s)
	}
}
