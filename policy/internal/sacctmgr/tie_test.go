//go:build linux

package sacctmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs a sacctmgr the way apply does, in a process of its own
// that a test kills, when STRATA_SACCTMGR_TEST_CHILD names how
// ("run" or "load") and STRATA_SACCTMGR_TEST_PATH the sacctmgr.
func TestMain(m *testing.M) {
	if how := os.Getenv("STRATA_SACCTMGR_TEST_CHILD"); how != "" {
		s := &Command{Path: os.Getenv("STRATA_SACCTMGR_TEST_PATH")}
		var err error
		if how == "load" {
			_, err = s.LoadInOrder(context.Background(), [][]byte{[]byte("a\n"), []byte("b\n")})
		} else {
			_, err = s.run(context.Background(), "-n", "-P", "show", "associations")
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// alive says whether pid runs (a zombie no longer does).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "123 (sleep) S ...": the state follows the name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestChildDiesWithApply: a strata-policy killed with SIGKILL while
// sacctmgr runs (a read, or the parts of a load waiting at their
// question) takes its sacctmgr with it: none is left to commit or write
// on its own.
func TestChildDiesWithApply(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	// A sacctmgr that records its pid, asks (for a load) and waits.
	fake := filepath.Join(dir, "sacctmgr")
	script := `#!/bin/sh
echo $$ > "` + pids + `/$$"
case "$*" in *load*) printf 'Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): ' ;; esac
exec sleep 60
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"run", "load"} {
		t.Run(how, func(t *testing.T) {
			for _, e := range must(os.ReadDir(pids)) {
				_ = os.Remove(filepath.Join(pids, e.Name()))
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STRATA_SACCTMGR_TEST_CHILD="+how, "STRATA_SACCTMGR_TEST_PATH="+fake)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"run": 1, "load": 2}[how]
			var started []int
			for deadline := time.Now().Add(30 * time.Second); len(started) < want; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("%d sacctmgr runs started, want %d", len(started), want)
				}
				started = started[:0]
				for _, e := range must(os.ReadDir(pids)) {
					if pid, err := strconv.Atoi(e.Name()); err == nil {
						started = append(started, pid)
					}
				}
			}
			time.Sleep(100 * time.Millisecond) // past exec of sleep
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var exit *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &exit) {
				t.Fatalf("the killed process: %v", err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var left []int
				for _, pid := range started {
					if alive(pid) {
						left = append(left, pid)
					}
				}
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					for _, pid := range left {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					t.Fatalf("sacctmgr %v still runs 5 s after the process that started it was killed", left)
				}
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
