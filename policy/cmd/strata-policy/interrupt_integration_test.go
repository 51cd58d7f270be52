//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/test/policygen"
)

// watched is a strata-policy run as a process of its own (this test binary,
// see TestMain), with its output collected as it comes.
type watched struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

func (w *watched) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// startPolicy starts strata-policy with args against bed b, logging at
// debug, with sacctmgr run through a wrapper that records each run's pid in
// pids.
func startPolicy(t *testing.T, b *testbed.Bed, sacctmgr string, args ...string) *watched {
	t.Helper()
	full := append([]string{"--log-level", "debug"}, args...)
	full = append(full, "--url", b.URL, "--user", b.AdminUser, "--token-file", b.TokenFile, "--sacctmgr", sacctmgr)
	w := &watched{cmd: selfCommand(full...), done: make(chan error, 1)}
	w.cmd.Stdout, w.cmd.Stderr = w, w
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
		w.done <- nil
	})
	return w
}

// waitFor waits until the run's output holds n lines matching every part,
// and fails when the run ends first.
func (w *watched) waitFor(t *testing.T, n int, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		count := 0
		for _, l := range strings.Split(w.text(), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
				count++
			}
		}
		if count >= n {
			return
		}
		select {
		case err := <-w.done:
			w.done <- err
			t.Fatalf("strata-policy ended (%v) before %d lines with %q:\n%s", err, n, parts, tail(w.text()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d lines with %q in 4 minutes:\n%s", n, parts, tail(w.text()))
		}
	}
}

// policyProcess runs strata-policy as policyOn does, in a process of its
// own with a time limit, and returns its exit code and output.
func policyProcess(t *testing.T, b *testbed.Bed, limit time.Duration, file string, args ...string) (int, string) {
	t.Helper()
	full := append([]string{"--log-level", "warn"}, args...)
	full = append(full, "--policy", file, "--url", b.URL, "--user", b.AdminUser, "--token-file", b.TokenFile,
		"--sacctmgr", filepath.Join(b.Bin, "sacctmgr"))
	if !slices.Contains(args, "--read-with") {
		full = append(full, "--read-with", readSacctmgr)
	}
	if args[0] == "apply" {
		full = append(full, "--lock-dir", t.TempDir())
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], full...)
	cmd.Env = append(os.Environ(), "STRATA_POLICY_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0")
	// Past the limit, SIGTERM: it says how far it got.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("strata-policy %s: %v", args[0], err)
	}
	return code, string(out)
}

// wrapSacctmgr is a sacctmgr that records its pid, then becomes the bed's.
func wrapSacctmgr(t *testing.T, b *testbed.Bed) (path, pids string) {
	t.Helper()
	dir := t.TempDir()
	pids = filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "sacctmgr")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" > %s/$$\nexec %s \"$@\"\n", pids, filepath.Join(b.Bin, "sacctmgr"))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, pids
}

// noneLeft fails when a sacctmgr the wrapper recorded still runs 5 s after
// the apply that started it ended.
func noneLeft(t *testing.T, pids string) {
	t.Helper()
	ents, _ := os.ReadDir(pids)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var left []string
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
				s := string(stat)
				if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] != 'Z' {
					args, _ := os.ReadFile(filepath.Join(pids, e.Name()))
					left = append(left, fmt.Sprintf("%d (sacctmgr %s)", pid, strings.TrimSpace(string(args))))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sacctmgr runs outlived their apply: %v", left)
		}
	}
}

// planKeys is the objects of a plan's changes, in order ("account x",
// "association a/u"): the first two words after the op.
func planKeys(out string) []string {
	var keys []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "   ") {
			continue
		}
		if f := strings.Fields(l); len(f) >= 3 {
			keys = append(keys, f[1]+" "+f[2])
		}
	}
	return keys
}

// checkPrefix fails unless the objects whose changes are done (the plan's
// objects that the plan after the interruption no longer has) are a prefix
// of the plan: apply's promise that what it applied is a prefix of the
// plan, for an apply that was killed too. It returns the prefix's length.
func checkPrefix(t *testing.T, before, after []string) int {
	t.Helper()
	left := map[string]bool{}
	for _, k := range after {
		left[k] = true
		if !slices.Contains(before, k) {
			t.Errorf("the plan after the interruption has %q, which the first did not", k)
		}
	}
	done := 0
	for done < len(before) && !left[before[done]] {
		done++
	}
	for i := done; i < len(before); i++ {
		if !left[before[i]] {
			t.Errorf("%s (change %d of the plan) is done, but %s (change %d) is not: not a prefix", before[i], i+1, before[done], done+1)
			break
		}
	}
	return done
}

// TestApplyTwoAtOnce: a second apply of the same cluster while one runs is
// refused at once, naming the lock and the apply that holds it; the first
// goes on and converges.
func TestApplyTwoAtOnce(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		file, _ := generated(t, b, policygen.Spec{Tenants: 2, Projects: 3, Members: 4, Seed: 11})
		mgr, pids := wrapSacctmgr(t, b)
		lockDir := t.TempDir()
		first := startPolicy(t, b, mgr, "apply", "--apply", "--policy", file, "--lock-dir", lockDir, "--batch-size", "2")
		first.waitFor(t, 1, "took the apply lock")
		start := time.Now()
		code, out := policyOn(t, b, file, "apply", "--apply", "--lock-dir", lockDir)
		want := fmt.Sprintf("another strata-policy apply is running for cluster %s: %s is locked by pid %d",
			b.Cluster, filepath.Join(lockDir, "strata-policy-"+b.Cluster+".lock"), first.cmd.Process.Pid)
		if code != exitFailure || !strings.Contains(out, want) || strings.Contains(out, "changes:") {
			t.Errorf("the second apply: exit %d, want %d, %q and no plan:\n%s", code, exitFailure, want, tail(out))
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the refused apply took %v: it must not wait", took)
		}
		if err := <-first.done; err != nil {
			t.Fatalf("the first apply: %v\n%s", err, tail(first.text()))
		}
		first.done <- nil
		if !strings.Contains(first.text(), "Checked: Slurm now matches") {
			t.Errorf("the first apply did not converge:\n%s", tail(first.text()))
		}
		noneLeft(t, pids)
		// Once it is done, the lock is free.
		if code, out := policyOn(t, b, file, "apply", "--apply", "--lock-dir", lockDir); code != exitOK || !strings.Contains(out, "Slurm matches") {
			t.Errorf("apply after the first ended: exit %d:\n%s", code, tail(out))
		}
	})
}

// TestApplyInterrupted: an apply interrupted by SIGTERM or SIGKILL at
// several points (the reads, the REST batches, during a request, the
// accounts' sacctmgr load, the users' loads side by side, and after the
// first of them committed)
// leaves Slurm holding a prefix of the plan: every object of the plan before
// some change is done, and none after it; no sacctmgr it ran outlives it;
// the next apply converges within 4 minutes, and its read-back finds
// nothing left to do.
func TestApplyInterrupted(t *testing.T) {
	type point struct {
		name   string
		spec   policygen.Spec
		args   []string
		n      int      // the nth line with all of when
		when   []string // parts of the log line to stop at
		signal syscall.Signal
	}
	small := policygen.Spec{Tenants: 3, Projects: 4, Members: 5, Seed: 5}
	// 2,000 user associations: the accounts in one load, the users in two
	// loads side by side (see TestApplyLoadsInParts).
	large := policygen.Spec{Tenants: 4, Projects: 10, Members: 50, Seed: 7}
	rest := []string{"--read-with", readREST, "--batch-size", "10"}
	points := []point{
		{"SIGTERM while sacctmgr reads", small, nil, 1, []string{`msg="running sacctmgr"`, "show"}, syscall.SIGTERM},
		{"SIGKILL after two REST batches", small, rest, 2, []string{`msg="policy batch applied"`}, syscall.SIGKILL},
		{"SIGTERM after four REST batches", small, rest, 4, []string{`msg="policy batch applied"`}, syscall.SIGTERM},
		{"SIGKILL during a POST", small, rest, 3, []string{`msg="slurmrestd request"`, "method=POST"}, syscall.SIGKILL},
		{"SIGKILL during the accounts' load", large, nil, 1, []string{`msg="running sacctmgr"`, "-i load"}, syscall.SIGKILL},
		{"SIGKILL during the users' loads", large, nil, 1, []string{`msg="policy changes loaded"`}, syscall.SIGKILL},
		{"SIGTERM during the users' loads", large, nil, 1, []string{`msg="policy changes loaded"`}, syscall.SIGTERM},
		// Part 1 committed, part 2 at its question or committing.
		{"SIGKILL after the first users' load committed", large, nil, 1, []string{`msg="sacctmgr load"`, "part=1 ", "committed=true"}, syscall.SIGKILL},
	}
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		for _, p := range points {
			t.Run(p.name, func(t *testing.T) {
				file, _ := generated(t, b, p.spec)
				mgr, pids := wrapSacctmgr(t, b)
				code, out := policyProcess(t, b, 5*time.Minute, file, append([]string{"plan"}, p.args[:min(2, len(p.args))]...)...)
				if code != exitChanges {
					t.Fatalf("plan: exit %d:\n%s", code, tail(out))
				}
				before := planKeys(out)
				run := startPolicy(t, b, mgr, append([]string{"apply", "--apply", "--policy", file, "--lock-dir", t.TempDir()}, p.args...)...)
				run.waitFor(t, p.n, p.when...)
				if p.n > 1 || strings.HasSuffix(p.name, "users' loads") {
					// Let the parts reach slurmdbd and their questions.
					time.Sleep(300 * time.Millisecond)
				}
				if err := run.cmd.Process.Signal(p.signal); err != nil {
					t.Fatal(err)
				}
				err := <-run.done
				run.done <- nil
				if err == nil {
					t.Logf("the apply ended before the signal")
				} else if p.signal == syscall.SIGTERM && !strings.Contains(run.text(), "interrupted") && !strings.Contains(p.name, "reads") {
					t.Errorf("an apply stopped by SIGTERM does not say it was interrupted:\n%s", tail(run.text()))
				}
				noneLeft(t, pids)
				open := connections(t, b)
				// A load stopped by SIGTERM was told no and rolled back
				// before apply exited; one killed leaves slurmdbd a
				// transaction to roll back once the request it serves ends.
				if strings.Contains(p.name, "load") {
					left := writesLeft(t, b, 3*time.Minute)
					t.Logf("no write transaction open in slurmdbd's database %v after the apply ended", left.Round(10*time.Millisecond))
					if p.signal == syscall.SIGTERM && left > 2*time.Second {
						t.Errorf("an apply stopped by SIGTERM left a write transaction open in slurmdbd's database for %v", left)
					}
				}

				code, out = policyProcess(t, b, 5*time.Minute, file, append([]string{"plan"}, p.args[:min(2, len(p.args))]...)...)
				if code != exitChanges && code != exitOK {
					t.Fatalf("plan after the interruption: exit %d:\n%s", code, tail(out))
				}
				done := checkPrefix(t, before, planKeys(out))
				t.Logf("interrupted with %d of %d changes done", done, len(before))

				// Its parts do not wait on each other's locks for long
				// (a part is told no when the one before has not asked
				// within 30 s of it; on 24.11 this wait took 10 minutes):
				// the limit is well under the 10 minutes a part waits for
				// its turn to commit.
				// A process of its own: in this one, it would hold cliMu
				// (and so the other release's subtest) that long.
				stop := make(chan struct{})
				watched := make(chan struct{})
				go func() { defer close(watched); lockWaits(t, b, open, stop) }()
				start := time.Now()
				code, out = policyProcess(t, b, 4*time.Minute, file, append([]string{"apply", "--apply"}, p.args...)...)
				close(stop)
				<-watched
				// "Checked: Slurm now matches": apply read Slurm again after
				// its writes and planned nothing (a plan after it would read
				// and find the same). "Slurm matches": the signal came after
				// the apply had done everything, so nothing was left to do.
				if code != exitOK || (!strings.Contains(out, "Checked: Slurm now matches") && !strings.Contains(out, "Slurm matches")) {
					t.Fatalf("the next apply (%v): exit %d:\n%s", time.Since(start).Round(time.Second), code, tail(out))
				}
				t.Logf("the next apply converged in %v; its parts were told no %d times for a part before that had not finished its work",
					time.Since(start).Round(time.Second), strings.Count(out, "the part before has not finished its work"))
			})
		}
	})
}

// writesLeft waits until no transaction in the bed's MariaDB has written
// a row (slurmdbd's, of a load whose sacctmgr ended), limit at most, and
// returns how long that took.
func writesLeft(t *testing.T, b *testbed.Bed, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		out, err := exec.Command("chroot", b.Root, "mariadb", "-N", "-e",
			"SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_rows_modified > 0").CombinedOutput()
		if err != nil {
			t.Fatalf("reading the bed's open transactions: %v: %s", err, out)
		}
		if strings.TrimSpace(string(out)) == "0" {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("slurmdbd's database still holds an open write transaction %v after the apply ended", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockWaits logs, every second until stop is closed, each InnoDB lock
// wait in the bed's MariaDB that has lasted 5 s or more: the waiting
// connection and statement, the one holding the lock (marked "killed
// apply" when it was open when the interrupted apply ended: one of its
// loads that slurmdbd had not yet rolled back) and the lock. before is
// the connections open then.
func lockWaits(t *testing.T, b *testbed.Bed, before map[string]bool, stop <-chan struct{}) {
	const q = `SELECT r.trx_mysql_thread_id, TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW()), LEFT(IFNULL(r.trx_query, ''), 90),
  bt.trx_mysql_thread_id, bt.trx_state, IFNULL(p.COMMAND, ''), IFNULL(p.TIME, ''), LEFT(IFNULL(bt.trx_query, ''), 60), bt.trx_rows_modified,
  l.lock_mode, l.lock_type, l.lock_index, IFNULL(l.lock_data, '')
FROM information_schema.innodb_lock_waits w
JOIN information_schema.innodb_trx r ON r.trx_id = w.requesting_trx_id
JOIN information_schema.innodb_trx bt ON bt.trx_id = w.blocking_trx_id
JOIN information_schema.innodb_locks l ON l.lock_id = w.blocking_lock_id
LEFT JOIN information_schema.processlist p ON p.ID = bt.trx_mysql_thread_id
WHERE TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW()) >= 5`
	seen := map[string]bool{}
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		out, err := exec.Command("chroot", b.Root, "mariadb", "-N", "-B", "-e", q).Output()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(l, "\t")
			if len(f) < 13 {
				continue
			}
			who := "this apply's"
			if before[f[3]] {
				who = "the killed apply's"
			}
			key := f[0] + "/" + f[3] + "/" + f[12]
			if seen[key] {
				continue
			}
			seen[key] = true
			t.Logf("MariaDB lock wait: connection %s waits %s s in %q for a %s %s lock on %s of index %s, held by connection %s (%s; transaction %s, connection %s for %s s, %s rows written, statement %q)",
				f[0], f[1], f[2], f[9], f[10], f[12], f[11], f[3], who, f[4], f[5], f[6], f[8], f[7])
		}
	}
}

// connections are the ids of the connections open in the bed's MariaDB.
func connections(t *testing.T, b *testbed.Bed) map[string]bool {
	out, err := exec.Command("chroot", b.Root, "mariadb", "-N", "-B", "-e", "SELECT ID FROM information_schema.processlist").Output()
	if err != nil {
		t.Logf("reading MariaDB's connections: %v", err)
	}
	ids := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		ids[id] = true
	}
	return ids
}

// TestExitCodesOnSlurm: plan, drift and apply without --apply exit 3 when
// Slurm differs from the policy and 0 when it matches; apply --apply exits
// 0 when it made Slurm match.
func TestExitCodesOnSlurm(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		file, _ := generated(t, b, policygen.Spec{Tenants: 1, Projects: 1, Members: 2, Seed: 1})
		for _, verb := range [][]string{{"plan"}, {"drift"}, {"apply"}} {
			if code, out := policyOn(t, b, file, verb...); code != exitChanges {
				t.Errorf("%s with changes: exit %d, want %d:\n%s", verb[0], code, exitChanges, tail(out))
			}
		}
		if code, out := policyOn(t, b, file, "apply", "--apply"); code != exitOK {
			t.Fatalf("apply --apply: exit %d:\n%s", code, tail(out))
		}
		for _, verb := range [][]string{{"plan"}, {"drift"}, {"apply"}, {"apply", "--apply"}} {
			if code, out := policyOn(t, b, file, verb...); code != exitOK {
				t.Errorf("%s when Slurm matches: exit %d, want %d:\n%s", strings.Join(verb, " "), code, exitOK, tail(out))
			}
		}
	})
}
