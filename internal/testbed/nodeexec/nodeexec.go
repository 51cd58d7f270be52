// Package nodeexec runs commands as root inside the node bed's virtual
// machine: an agent in the guest (test/testbed/node/agent) listens on a
// port that qemu forwards from the host's loopback, reads one Request per
// connection and answers with one Response. It is a test-bed tool: it has
// no authentication, and the bed forwards the port from 127.0.0.1 only.
package nodeexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"time"
)

// Request is a command to run in the guest.
type Request struct {
	Args  []string `json:"args"`
	Stdin []byte   `json:"stdin,omitempty"`
	// Env is added to the agent's environment.
	Env []string `json:"env,omitempty"`
}

// Response is what the command did. Err is set when it could not start.
type Response struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	Code   int    `json:"code"`
	Err    string `json:"err,omitempty"`
}

// Run sends req to the agent at addr and waits for its answer.
func Run(ctx context.Context, addr string, req Request) (*Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node agent at %s: %w (is the node bed up? testbed.sh status --node-vm)", addr, err)
	}
	defer func() { _ = conn.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("node agent at %s: send: %w", addr, err)
	}
	var resp Response
	dec := json.NewDecoder(conn)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("node agent at %s: read answer: %w", addr, err)
	}
	if resp.Err != "" {
		return &resp, fmt.Errorf("node agent at %s: %q: %s", addr, req.Args, resp.Err)
	}
	return &resp, nil
}

// Serve answers requests on ln until it fails.
func Serve(ln net.Listener, log *slog.Logger) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer func() { _ = conn.Close() }()
			if err := handle(conn); err != nil {
				log.Error("request failed", "from", conn.RemoteAddr(), "err", err)
			}
		}()
	}
}

func handle(conn net.Conn) error {
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var req Request
	dec := json.NewDecoder(conn)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	resp := exec1(req)
	return json.NewEncoder(conn).Encode(resp)
}

func exec1(req Request) Response {
	if len(req.Args) == 0 {
		return Response{Code: -1, Err: "empty command"}
	}
	cmd := exec.Command(req.Args[0], req.Args[1:]...)
	cmd.Env = append(cmd.Environ(), req.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	err := cmd.Run()
	resp := Response{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		resp.Code = ee.ExitCode()
	default:
		resp.Code, resp.Err = -1, err.Error()
	}
	return resp
}
