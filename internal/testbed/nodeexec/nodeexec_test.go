package nodeexec

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = Serve(ln, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	return ln.Addr().String()
}

func TestRun(t *testing.T) {
	addr := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name                   string
		req                    Request
		stdout, stderr, errSub string
		code                   int
	}{
		{name: "stdin, output and exit code pass through",
			req:    Request{Args: []string{"sh", "-c", `cat; echo "$X" >&2; exit 3`}, Stdin: []byte("in\n"), Env: []string{"X=env"}},
			stdout: "in\n", stderr: "env\n", code: 3},
		{name: "no stdin reads as empty", req: Request{Args: []string{"sh", "-c", "wc -c"}}, stdout: "0\n"},
		{name: "a command that does not start", req: Request{Args: []string{"/nonexistent/cmd"}}, code: -1, errSub: "no such file"},
		{name: "empty command", req: Request{Args: []string{}}, code: -1, errSub: "empty command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Run(ctx, addr, tc.req)
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("err %v, want one with %q", err, tc.errSub)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimLeft(string(resp.Stdout), " "); got != tc.stdout || string(resp.Stderr) != tc.stderr || resp.Code != tc.code {
				t.Errorf("got stdout %q stderr %q code %d, want %q %q %d", got, resp.Stderr, resp.Code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

func TestRunNoAgent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if _, err := Run(context.Background(), addr, Request{Args: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "node bed up") {
		t.Fatalf("err %v, want one that says to start the node bed", err)
	}
}
