package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// TestApplyLocked: apply --apply while another apply of the cluster holds
// the lock fails at once, exit 1, naming the lock and its holder, and
// reads nothing from Slurm; plan and apply without --apply take no lock.
func TestApplyLocked(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "strata-policy-gpu.lock") // the example's cluster
	f, err := os.OpenFile(lock, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	noREST := []string{"--url", "http://127.0.0.1:1", "--token-file", filepath.Join(dir, "none.jwt"), "--lock-dir", dir}
	var out bytes.Buffer
	start := time.Now()
	err = run(t.Context(), append([]string{"strata-policy", "--log-level", "error", "apply", examplePolicy, "--apply"}, noREST...), &out, &out)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a refused apply took %v: it must not wait", took)
	}
	msg := "another strata-policy apply is running for cluster gpu: " + lock + " is locked by pid " + strconv.Itoa(os.Getpid())
	if cliexit.CodeOf(err) != exitFailure || err == nil || !strings.Contains(err.Error(), msg) ||
		!strings.Contains(err.Error(), "wait for it to finish and run again") {
		t.Fatalf("apply while locked: exit %d, %v; want %d and %q", cliexit.CodeOf(err), err, exitFailure, msg)
	}
	// Without --apply nothing is written: no lock, so it gets as far as
	// slurmrestd (which is not there).
	for _, verb := range [][]string{{"plan"}, {"apply"}, {"drift"}} {
		args := append(append([]string{"strata-policy", "--log-level", "error"}, verb...), examplePolicy)
		args = append(args, noREST[:4]...)
		if verb[0] == "apply" {
			args = append(args, noREST[4:]...)
		}
		err := run(t.Context(), args, &out, &out)
		if err == nil || strings.Contains(err.Error(), "locked") {
			t.Errorf("%s while an apply holds the lock: %v, want it to go on to Slurm", verb[0], err)
		}
	}
	// A lock folder that cannot be made says which flag to give.
	bad := filepath.Join(dir, "file")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(t.Context(), append([]string{"strata-policy", "--log-level", "error", "apply", examplePolicy, "--apply"},
		append(noREST[:4:4], "--lock-dir", filepath.Join(bad, "x"))...), &out, &out)
	if cliexit.CodeOf(err) != exitFailure || err == nil || !strings.Contains(err.Error(), "--lock-dir") {
		t.Errorf("apply with an unusable lock folder: %v, want exit 1 naming --lock-dir", err)
	}
}
