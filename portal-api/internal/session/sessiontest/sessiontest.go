// Package sessiontest speaks to the real servers of the session templates
// for the integration tests on a Slurm test bed started with
// `testbed.sh up --sessions`: a Jupyter kernel's WebSocket (run code, read
// its result), ttyd's terminal WebSocket (its token first, then a line of
// input, the output read back as plain lines), and the bed's nodes and
// users as a test on the host reaches them. The session proxy's tests and
// the portal's reach the same servers, one directly through the proxy, the
// other through the whole portal.
package sessiontest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/strata-hpc/strata/internal/testbed"
)

// Execute runs code in the kernel behind ws (Jupyter's JSON WebSocket
// protocol, a kernel's channels) and returns its result's text/plain: 2
// for 1+1, a string's repr ('0,1') for a string.
func Execute(ctx context.Context, ws *websocket.Conn, code string) (string, error) {
	id := testbed.Unique("m")
	msg, err := json.Marshal(map[string]any{
		"header": map[string]any{"msg_id": id, "msg_type": "execute_request", "username": "alice", "session": "s",
			"date": time.Now().UTC().Format(time.RFC3339), "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell", "buffers": []any{},
		"content": map[string]any{"code": code, "silent": false, "store_history": false, "user_expressions": map[string]any{},
			"allow_stdin": false, "stop_on_error": true},
	})
	if err != nil {
		return "", err
	}
	if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return "", fmt.Errorf("send %q to the kernel: %w", code, err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		typ, data, err := ws.Read(rctx)
		if err != nil {
			return "", fmt.Errorf("no result of %q from the kernel: %w", code, err)
		}
		if typ != websocket.MessageText {
			continue
		}
		var m struct {
			MsgType string `json:"msg_type"`
			Parent  struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content struct {
				Data   map[string]string `json:"data"`
				EName  string            `json:"ename"`
				EValue string            `json:"evalue"`
			} `json:"content"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Parent.MsgID != id {
			continue
		}
		switch m.MsgType {
		case "execute_result":
			return m.Content.Data["text/plain"], nil
		case "error":
			return "", fmt.Errorf("%q in the kernel: %s: %s", code, m.Content.EName, m.Content.EValue)
		}
	}
}

// TerminalSubprotocol is the WebSocket subprotocol of ttyd's terminal.
const TerminalSubprotocol = "tty"

// Terminal speaks ttyd's protocol on ws (dialled with
// TerminalSubprotocol): the first message with token (what ttyd's /token
// answers), then input as a line, and reads the terminal's output until a
// line of it is want. It returns the output read, escapes and all.
func Terminal(ctx context.Context, ws *websocket.Conn, token, input, want string) (string, error) {
	hello, err := json.Marshal(map[string]any{"AuthToken": token, "columns": 120, "rows": 30})
	if err != nil {
		return "", err
	}
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		return "", fmt.Errorf("the terminal's first message: %w", err)
	}
	// '0' is ttyd's INPUT command, and the first byte of its OUTPUT.
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("0"+input+"\r")); err != nil {
		return "", fmt.Errorf("the terminal's input: %w", err)
	}
	var out strings.Builder
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !slices.Contains(TermLines(out.String()), want) {
		_, data, err := ws.Read(rctx)
		if err != nil {
			return out.String(), fmt.Errorf("the terminal did not print %q: %w", want, err)
		}
		if len(data) > 0 && data[0] == '0' {
			out.Write(data[1:])
		}
	}
	return out.String(), nil
}

// The terminal's escape sequences: OSC (titles, the shell integration's
// marks) and CSI (colours, modes).
var termEscape = regexp.MustCompile(`\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b\[[0-9;?]*[A-Za-z]`)

// TermLines is a terminal's output as plain lines, trimmed.
func TermLines(out string) []string {
	var lines []string
	for _, line := range strings.Split(termEscape.ReplaceAllString(out, ""), "\n") {
		lines = append(lines, strings.TrimSpace(line))
	}
	return lines
}

// NodeDialer reaches a node of b by its name at the bed's node address:
// the names resolve inside the bed's root, not on the host.
func NodeDialer(b *testbed.Bed) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if slices.Contains(b.Nodes, host) {
			addr = net.JoinHostPort(b.NodeAddr, port)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// UserID is the uid of user name in the bed's /etc/passwd.
func UserID(b *testbed.Bed, name string) (uint32, error) {
	f, err := os.Open(b.HostPath("/etc/passwd"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 2 && fields[0] == name {
			n, err := strconv.ParseUint(fields[2], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("%s's uid in the bed's /etc/passwd: %w", name, err)
			}
			return uint32(n), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no user " + name + " in the bed's /etc/passwd")
}
