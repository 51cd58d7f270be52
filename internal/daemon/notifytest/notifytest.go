// Package notifytest stands in for systemd in tests of a daemon: it
// listens on a real notify socket (a unixgram socket in the test's
// temporary directory) and hands the test every datagram the daemon sends
// (READY=1, RELOADING=1, STOPPING=1, WATCHDOG=1).
package notifytest

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Socket listens where systemd would and returns its path and the
// datagrams that arrive on it; the socket closes with the test.
func Socket(t testing.TB) (path string, msgs <-chan string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch := make(chan string, 1000)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return path, ch
}

// Await reads datagrams until one starts with want and returns those read
// before it, and it; it fails the test after timeout.
func Await(t testing.TB, msgs <-chan string, want string, timeout time.Duration) (before []string, match string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-msgs:
			if strings.HasPrefix(m, want) {
				return before, m
			}
			before = append(before, m)
		case <-deadline:
			t.Fatalf("no %q within %s; got %q", want, timeout, before)
			return nil, ""
		}
	}
}
