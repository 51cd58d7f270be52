package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestHTTPTimeouts: a client that sends nothing, trickles its body, keeps
// a connection idle, or waits on a handler past the write bound, loses
// its connection after the bound, not never.
func TestHTTPTimeouts(t *testing.T) {
	to := HTTPTimeouts{ReadHeader: 200 * time.Millisecond, Read: 400 * time.Millisecond, Write: 600 * time.Millisecond, Idle: 300 * time.Millisecond}
	const slack = 3 * time.Second // far below the 10 s+ a missing bound gives
	for name, tc := range map[string]struct {
		send     string // what the client writes, then it waits
		wantResp bool   // a response arrives before the close
	}{
		"no headers":  {send: "GET /ok HTTP/1.1\r\nHost: x\r\n"},
		"slow body":   {send: "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nten bytes."},
		"idle":        {send: "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", wantResp: true},
		"slow answer": {send: "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, "ok")
			})
			mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(to.Write + 500*time.Millisecond)
				_, _ = io.WriteString(w, "late")
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Config{Log: testLogger(&logBuffer{}), Listener: ln, Handler: mux, HTTPTimeouts: to, ShutdownTimeout: time.Second})
			}()
			defer func() { cancel(); <-done }()

			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(slack))
			r := bufio.NewReader(conn)
			if tc.wantResp {
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatalf("no response: %v", err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			rest, err := io.ReadAll(r)
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				t.Fatalf("the connection is still open after %s", slack)
			}
			if strings.Contains(string(rest), "late") {
				t.Errorf("the slow answer arrived after the write bound: %q", rest)
			}
			if took := time.Since(start); took > slack {
				t.Errorf("closed after %s", took)
			}
		})
	}
}

func TestHTTPTimeoutDefaults(t *testing.T) {
	if diff := cmp.Diff(DefaultHTTPTimeouts, HTTPTimeouts{}.withDefaults()); diff != "" {
		t.Errorf("zero timeouts (-want +got):\n%s", diff)
	}
	got := HTTPTimeouts{Write: 6 * time.Minute}.withDefaults()
	want := DefaultHTTPTimeouts
	want.Write = 6 * time.Minute
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one set (-want +got):\n%s", diff)
	}
	for name, v := range map[string]time.Duration{"read header": got.ReadHeader, "read": got.Read, "write": got.Write, "idle": got.Idle} {
		if v <= 0 {
			t.Errorf("%s timeout %s: every bound must be set", name, v)
		}
	}
}
