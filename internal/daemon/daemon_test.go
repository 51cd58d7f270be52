package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/daemon/notifytest"
)

// These tests send real signals to the test process and read a real
// notify socket, so none of them runs in parallel.

// notifySocket listens where systemd would and sets NOTIFY_SOCKET to it,
// with no watchdog unless the test sets one.
func notifySocket(t *testing.T) <-chan string {
	t.Helper()
	path, msgs := notifytest.Socket(t)
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return msgs
}

var await = notifytest.Await

// logBuffer is a logger whose output the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(b *logBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// ticking is a loop that beats every period until ctx ends.
func ticking(period time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			Beat(ctx)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

func start(t *testing.T, cfg Config) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Run(t.Context(), cfg) }()
	return done
}

func kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// The daemon tells systemd READY=1 once serving, pings the watchdog,
// wraps a SIGHUP reload in RELOADING=1 (with MONOTONIC_USEC) and READY=1,
// and says STOPPING=1 on SIGTERM, in that order; the server answered
// while it ran.
func TestNotifySequence(t *testing.T) {
	msgs := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "100000") // pings every 50ms
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reloads atomic.Int32
	done := start(t, Config{
		Log:      testLogger(&logBuffer{}),
		Listener: ln,
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		Loops:    []Loop{{Name: "tick", Run: ticking(10 * time.Millisecond), Stall: time.Second}},
		Reload:   []Reloader{ReloadFunc(func(context.Context) error { reloads.Add(1); return nil })},
	})

	var got []string
	add := func(before []string, m string) string {
		for _, b := range append(before, m) {
			if len(got) == 0 || got[len(got)-1] != b { // runs of pings count once
				got = append(got, b)
			}
		}
		return m
	}
	add(await(t, msgs, "READY=1", 5*time.Second))
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatalf("server not serving after READY=1: %v", err)
	}
	resp.Body.Close()
	add(await(t, msgs, "WATCHDOG=1", 5*time.Second))

	kill(t, syscall.SIGHUP)
	// One datagram carries RELOADING=1 and MONOTONIC_USEC, as systemd's
	// Type=notify-reload wants.
	if m := add(await(t, msgs, "RELOADING=1", 5*time.Second)); !regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=[0-9]+\n$`).MatchString(m) {
		t.Errorf("reload datagram %q, want RELOADING=1 and MONOTONIC_USEC=", m)
	}
	add(await(t, msgs, "READY=1", 5*time.Second))
	if n := reloads.Load(); n != 1 {
		t.Errorf("reloader ran %d times on one SIGHUP, want 1", n)
	}

	kill(t, syscall.SIGTERM)
	add(await(t, msgs, "STOPPING=1", 5*time.Second))
	if err := wait(t, done); err != nil {
		t.Errorf("Run after SIGTERM: %v", err)
	}
	want := []string{"READY=1", "WATCHDOG=1", "RELOADING=1", "READY=1", "STOPPING=1"}
	var seq []string
	for _, m := range got {
		m, _, _ = strings.Cut(m, "\n")
		if m == "WATCHDOG=1" && len(seq) > 1 { // pings between the later states may fall anywhere
			continue
		}
		seq = append(seq, m)
	}
	if fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Errorf("notify messages %q, want %q in that order (all: %q)", seq, want, got)
	}
}

// A loop that stops beating stops the watchdog pings, so systemd restarts
// the daemon; when it beats again the pings come back.
func TestWatchdogStopsWhenLoopStalls(t *testing.T) {
	msgs := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "40000") // pings every 20ms
	var logs logBuffer
	var stalled atomic.Bool
	done := start(t, Config{
		Log: testLogger(&logs),
		Loops: []Loop{{Name: "cycle", Stall: 100 * time.Millisecond, Run: func(ctx context.Context) error {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				if !stalled.Load() {
					Beat(ctx)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		}}},
	})
	await(t, msgs, "READY=1", 5*time.Second)
	await(t, msgs, "WATCHDOG=1", 5*time.Second)

	stalled.Store(true)
	time.Sleep(200 * time.Millisecond) // past the stall, and a ping period more
	drain := func(d time.Duration) (pings int) {
		end := time.After(d)
		for {
			select {
			case m := <-msgs:
				if m == "WATCHDOG=1" {
					pings++
				}
			case <-end:
				return pings
			}
		}
	}
	for len(msgs) > 0 { // pings sent before the stall was seen
		<-msgs
	}
	if n := drain(300 * time.Millisecond); n != 0 {
		t.Errorf("%d watchdog pings while the loop was stuck, want none", n)
	}
	if !strings.Contains(logs.String(), "loop made no progress") || !strings.Contains(logs.String(), "loop=cycle") {
		t.Errorf("the stuck loop was not logged:\n%s", logs.String())
	}

	stalled.Store(false)
	await(t, msgs, "WATCHDOG=1", 5*time.Second)
	kill(t, syscall.SIGTERM)
	if err := wait(t, done); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// Shutdown waits for a loop that is in the middle of its cycle, even past
// the shutdown timeout, so the store the caller closes next is never
// closed under it; the HTTP server is down by then too.
func TestShutdownWaitsForCycle(t *testing.T) {
	msgs := notifySocket(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var finished atomic.Bool
	done := start(t, Config{
		Log:             testLogger(&logBuffer{}),
		Listener:        ln,
		Handler:         http.NotFoundHandler(),
		ShutdownTimeout: 50 * time.Millisecond,
		Loops: []Loop{{Name: "cycle", Run: func(ctx context.Context) error {
			<-ctx.Done()
			// The cycle that was running when the signal came ends its
			// last write to the store.
			time.Sleep(300 * time.Millisecond)
			finished.Store(true)
			return nil
		}}},
	})
	await(t, msgs, "READY=1", 5*time.Second)
	kill(t, syscall.SIGTERM)
	if err := wait(t, done); err != nil {
		t.Errorf("Run: %v", err)
	}
	if !finished.Load() {
		t.Errorf("Run returned before the loop finished its cycle")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("the HTTP server still accepts connections after Run returned")
	}
}

// A SIGHUP whose new configuration is bad keeps the old one, logs why and
// leaves the daemon running; a later good file is taken.
func TestReloadKeepsOldConfigWhenNewIsBad(t *testing.T) {
	msgs := notifySocket(t)
	path := filepath.Join(t.TempDir(), "limit")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func(context.Context) (int, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		var n int
		if _, err := fmt.Sscan(string(data), &n); err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		return n, nil
	}
	write("1")
	limit, err := Load(t.Context(), "limit", load)
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	done := start(t, Config{Log: testLogger(&logs), Reload: []Reloader{limit},
		Loops: []Loop{{Name: "tick", Run: ticking(10 * time.Millisecond)}}})
	await(t, msgs, "READY=1", 5*time.Second)

	hup := func() {
		kill(t, syscall.SIGHUP)
		await(t, msgs, "RELOADING=1", 5*time.Second)
		await(t, msgs, "READY=1", 5*time.Second)
	}
	write("2")
	hup()
	if got := limit.Get(); got != 2 {
		t.Errorf("after a good reload: %d, want 2", got)
	}
	write("two")
	hup()
	if got := limit.Get(); got != 2 {
		t.Errorf("after a bad reload: %d, want the old 2", got)
	}
	if l := logs.String(); !strings.Contains(l, "reload failed: keeping the configuration in force") ||
		!strings.Contains(l, "reload limit (the one loaded before stays in force)") || !strings.Contains(l, path) {
		t.Errorf("the failed reload was not logged with its file:\n%s", l)
	}
	select {
	case err := <-done:
		t.Fatalf("the daemon stopped after a bad reload: %v", err)
	default:
	}
	write("3")
	hup()
	if got := limit.Get(); got != 3 {
		t.Errorf("after a good reload that followed a bad one: %d, want 3", got)
	}
	kill(t, syscall.SIGTERM)
	if err := wait(t, done); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// A loop that fails, or ends on its own, stops the daemon with its error;
// the other loops are stopped and waited for.
func TestLoopEndStopsDaemon(t *testing.T) {
	for name, tc := range map[string]struct {
		run  func(context.Context) error
		want string
	}{
		"error":  {func(context.Context) error { return errors.New("disk full") }, "broken loop: disk full"},
		"return": {func(context.Context) error { return nil }, "broken loop: it stopped on its own"},
	} {
		t.Run(name, func(t *testing.T) {
			msgs := notifySocket(t)
			var other atomic.Bool
			err := Run(t.Context(), Config{Log: testLogger(&logBuffer{}), Loops: []Loop{
				{Name: "ok", Run: func(ctx context.Context) error {
					<-ctx.Done()
					time.Sleep(50 * time.Millisecond)
					other.Store(true)
					return nil
				}},
				{Name: "broken", Run: tc.run},
			}})
			if err == nil || err.Error() != tc.want {
				t.Errorf("Run: %v, want %q", err, tc.want)
			}
			if !other.Load() {
				t.Errorf("Run returned before the other loop stopped")
			}
			await(t, msgs, "STOPPING=1", time.Second)
		})
	}
}

// Without NOTIFY_SOCKET (not under systemd) nothing is sent and nothing
// fails; a listen error is returned before anything starts.
func TestNoSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := Run(ctx, Config{Log: testLogger(&logBuffer{}), Loops: []Loop{{Name: "tick", Run: ticking(time.Millisecond), Stall: time.Second}}}); err != nil {
		t.Errorf("Run: %v", err)
	}
	err := Run(t.Context(), Config{Log: testLogger(&logBuffer{}), Listen: "256.0.0.1:1"})
	if err == nil || !strings.HasPrefix(err.Error(), "listen: ") {
		t.Errorf("Run on a bad address: %v, want a listen error", err)
	}
}

// Load wraps the first load's error; Beat outside a daemon does nothing.
func TestLoadAndBeat(t *testing.T) {
	_, err := Load(t.Context(), "rules", func(context.Context) (int, error) { return 0, os.ErrNotExist })
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "load rules: ") {
		t.Errorf("Load: %v", err)
	}
	Beat(t.Context())
	var seen []int
	v, err := Load(t.Context(), "n", func(context.Context) (int, error) { return len(seen) + 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	v.OnReload(func(n int) { seen = append(seen, n) })
	if err := v.Reload(t.Context()); err != nil || v.Get() != 1 || fmt.Sprint(seen) != "[1]" {
		t.Errorf("Reload: %v, value %d, seen %v", err, v.Get(), seen)
	}
}
