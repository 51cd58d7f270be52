package sqlite_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
	"github.com/strata-hpc/strata/internal/sqlite/sqlitetest"
)

func openLocked(t *testing.T) (path string, write func() error) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "r.db")
	db, err := sqlite.OpenOptions(t.Context(), path, "strata-test",
		[]sqlite.Migration{{Name: "a", SQL: `CREATE TABLE a (x INTEGER)`}}, sqlite.Options{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return path, func() error {
		_, err := db.ExecContext(context.Background(), `INSERT INTO a(x) VALUES(1)`)
		return err
	}
}

// A write that finds the database locked beyond its busy timeout is tried
// again, and succeeds once the other connection lets go.
func TestRetryOutlastsALock(t *testing.T) {
	path, write := openLocked(t)
	release := sqlitetest.Lock(t, path)
	if err := write(); !sqlite.Busy(err) {
		t.Fatalf("write under another connection's lock: err = %v; want database is locked", err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		release()
	}()
	tries := 0
	err := sqlite.Retry{Attempts: 50, Wait: 10 * time.Millisecond, MaxWait: 40 * time.Millisecond}.Do(t.Context(), func() error {
		tries++
		return write()
	})
	if err != nil {
		t.Fatalf("retried write: %v", err)
	}
	if tries < 2 {
		t.Errorf("the write succeeded at try %d; the lock should have refused the first", tries)
	}
}

// A lock that outlasts every try fails with the count and SQLite's error;
// an error that is not a lock is not retried.
func TestRetryIsBounded(t *testing.T) {
	path, write := openLocked(t)
	sqlitetest.Lock(t, path)
	tries := 0
	err := sqlite.Retry{Attempts: 3, Wait: time.Millisecond}.Do(t.Context(), func() error {
		tries++
		return write()
	})
	if tries != 3 || !sqlite.Busy(err) || !strings.Contains(err.Error(), "database locked by another process after 3 tries") {
		t.Errorf("tries=%d err=%v; want 3 tries and a locked error", tries, err)
	}
	other := errors.New("disk I/O error")
	tries = 0
	if err := (sqlite.Retry{Attempts: 3}).Do(t.Context(), func() error { tries++; return other }); !errors.Is(err, other) || tries != 1 {
		t.Errorf("tries=%d err=%v; want one try for an error that is not a lock", tries, err)
	}
}

// A database on a read-only mount is reported as such, not as SQLite's
// "no such file or directory" (it cannot create its -wal and -shm files).
// The mount needs root and unshare(1): the test runs itself in a private
// mount namespace where the directory is bound read-only.
func TestReadOnlyMount(t *testing.T) {
	if dir := os.Getenv("STRATA_SQLITE_RO_DIR"); dir != "" {
		_, err := sqlite.Open(t.Context(), filepath.Join(dir, "r.db"), "strata-test", nil)
		var ro *sqlite.ReadOnlyError
		if !errors.As(err, &ro) || !errors.Is(err, syscall.EROFS) ||
			!strings.Contains(err.Error(), "is on a read-only file system: SQLite cannot create the write-ahead log (r.db-wal, r.db-shm) it needs") {
			t.Fatalf("open on a read-only mount: %v", err)
		}
		_, err = sqlite.Open(t.Context(), filepath.Join(dir, "new.db"), "strata-test", nil)
		if err == nil || !strings.Contains(err.Error(), "read-only file system; mount it read-write") {
			t.Fatalf("create on a read-only mount: %v", err)
		}
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Getuid() != 0 {
		t.Skip("needs root and unshare(1) to mount a directory read-only")
	}
	dir := t.TempDir()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "r.db"), "strata-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close() // the last connection removes -wal and -shm
	script := `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec "$2" -test.run '^TestReadOnlyMount$' -test.v`
	cmd := exec.CommandContext(t.Context(), unshare, "-m", "sh", "-c", script, "sh", dir, os.Args[0])
	cmd.Env = append(os.Environ(), "STRATA_SQLITE_RO_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if !strings.Contains(string(out), "=== RUN") { // the mount failed: the test never started
			t.Skipf("cannot mount read-only here: %s", out)
		}
		t.Fatalf("%v\n%s", err, out)
	}
}

// The explanation needs the error SQLite gives; without a read-only
// directory the error passes through unchanged.
func TestWritableDirNotExplained(t *testing.T) {
	if _, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "missing", "r.db"), "strata-test", nil); err == nil ||
		errors.As(err, new(*sqlite.ReadOnlyError)) {
		t.Errorf("open in a missing directory: %v; want the plain error", err)
	}
}
