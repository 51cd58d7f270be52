// Package session is the contract between a session job and
// strata-portal-api: the connection file the job writes once its server
// listens (host, port, one-time secret, server kind, start time), its
// reader, and the check that turns a file into a proxy Target only while
// it names the job's own node now.
//
// The file is the user's, so it is hostile until checked: it is read
// through internal/userfile (beneath the session folder, no symbolic
// link, the job user's own regular file, size-capped), it must be
// readable by its owner only, and nothing of it is quoted in an error,
// because it holds a secret. For the same reason it is not decoded with
// internal/strictjson, whose messages quote the offending value: the
// decoding here is as strict (unknown fields, wrong types and trailing
// data are errors), but its messages name fields, never values.
package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/userfile"
)

// FileName is the connection file's name in the session folder.
const FileName = "strata-session.json"

// Version is the connection file format this package reads.
const Version = 1

// MaxBytes caps the file: host, port, secret and a time fit in far less.
const MaxBytes = 4096

// Kind is the server a session runs.
type Kind string

// The servers a session template may start.
const (
	JupyterLab Kind = "jupyterlab"
	TTYD       Kind = "ttyd"
	CodeServer Kind = "code-server"
)

// Kinds lists every Kind, in the order the docs name them.
var Kinds = []Kind{JupyterLab, TTYD, CodeServer}

// Connection is a parsed connection file. Its Secret is never written by
// String, LogValue or an error of this package.
type Connection struct {
	Version int       `json:"version"`
	Kind    Kind      `json:"kind"`
	Host    string    `json:"host"`
	Port    int       `json:"port"`
	Secret  string    `json:"secret"`
	Started time.Time `json:"started"`
}

// String describes c without its secret.
func (c Connection) String() string {
	return fmt.Sprintf("%s on %s started %s", c.Kind, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), c.Started.Format(time.RFC3339))
}

// LogValue logs c without its secret.
func (c Connection) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", string(c.Kind)), slog.String("host", c.Host), slog.Int("port", c.Port),
		slog.Time("started", c.Started))
}

// Why a connection file or a job is refused; test with errors.Is.
var (
	ErrFormat     = errors.New("is not a valid connection file")
	ErrNoSecret   = errors.New("has no secret")
	ErrMode       = errors.New("may be read by others than its owner: write it with mode 0600")
	ErrNotRunning = errors.New("the session's job is not running")
	ErrHost       = errors.New("names a host the session's job is not running on")
	ErrPort       = errors.New("names a port other than the session's")
	ErrNoFile     = errors.New("the session's server has not written its connection file yet")
)

// minSecret is the shortest secret accepted: the scripts write 64 hex
// digits; anything much shorter is guessable from the node.
const minSecret = 32

// Parse decodes and checks a connection file. Its errors wrap ErrFormat
// or ErrNoSecret and name fields only.
func Parse(data []byte) (Connection, error) {
	var c Connection
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Connection{}, fmt.Errorf("%w: %s", ErrFormat, describe(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Connection{}, fmt.Errorf("%w: data after the JSON object", ErrFormat)
	}
	var bad []string
	if c.Version != Version {
		bad = append(bad, fmt.Sprintf("version: want %d", Version))
	}
	if !slices.Contains(Kinds, c.Kind) {
		bad = append(bad, "kind: want jupyterlab, ttyd or code-server")
	}
	if !validHost(c.Host) {
		bad = append(bad, "host: want the node's name")
	}
	if c.Port < 1024 || c.Port > 65535 {
		bad = append(bad, "port: want an unprivileged port, 1024 to 65535")
	}
	if c.Started.IsZero() {
		bad = append(bad, "started: want the server's start time, RFC 3339")
	}
	if len(bad) > 0 {
		return Connection{}, fmt.Errorf("%w: %s", ErrFormat, strings.Join(bad, "; "))
	}
	if len(c.Secret) < minSecret || strings.ContainsFunc(c.Secret, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return Connection{}, fmt.Errorf("%w: want at least %d printable characters, no space", ErrNoSecret, minSecret)
	}
	return c, nil
}

// validHost accepts a Slurm node name (what the job's node list holds):
// letters, digits, '-', '.' and '_', no leading '-' or '.'.
func validHost(h string) bool {
	if h == "" || len(h) > 253 || h[0] == '-' || h[0] == '.' {
		return false
	}
	return !strings.ContainsFunc(h, func(r rune) bool {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_'
		return !ok
	})
}

// describe says what encoding/json found wrong without quoting the input.
func describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s: want %s", te.Field, te.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the file is empty or ends too early"
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return "an unknown field: want version, kind, host, port, secret and started only"
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return "started: want an RFC 3339 time"
	}
	return "not a JSON object of the connection file's fields"
}

// Read reads the connection file in the session folder dir for the job's
// user uid. A file not written yet is ErrNoFile.
func Read(dir string, uid uint32) (Connection, error) {
	f, err := userfile.Open(dir, FileName, userfile.Policy{UID: uid})
	if errors.Is(err, os.ErrNotExist) {
		return Connection{}, fmt.Errorf("%s: %w", dir, ErrNoFile)
	}
	if err != nil {
		return Connection{}, fmt.Errorf("read the connection file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Connection{}, fmt.Errorf("read the connection file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Connection{}, fmt.Errorf("%s: %w", f.Name(), ErrMode)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return Connection{}, fmt.Errorf("read the connection file %s: %w", f.Name(), err)
	}
	if len(data) > MaxBytes {
		return Connection{}, fmt.Errorf("%s: %w: more than %d bytes", f.Name(), ErrFormat, MaxBytes)
	}
	c, err := Parse(data)
	if err != nil {
		return Connection{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return c, nil
}

// Job is what the check needs of the session's Slurm job, as slurmrestd
// reports it now.
type Job struct {
	// State is the job's state ("RUNNING", "PENDING", "COMPLETED", ...).
	State string
	// Nodes are the nodes the job runs on (its node list, expanded).
	Nodes []string
}

// Target is a checked connection: where the proxy may go for a session,
// and how it proves itself to the server.
type Target struct {
	Kind   Kind
	Host   string
	Port   int
	Secret string
}

// Addr is host:port.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// String describes t without its secret.
func (t Target) String() string { return string(t.Kind) + " on " + t.Addr() }

// LogValue logs t without its secret.
func (t Target) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", string(t.Kind)), slog.String("addr", t.Addr()))
}

// Check turns c into a Target for job: only while the job runs, only on
// one of its nodes. pin, when not zero, is the host and port the portal
// recorded from the session's first valid file: a file rewritten later to
// name another port (another service on the node, someone else's server)
// is ErrPort, another host ErrHost.
func Check(c Connection, job Job, pin Pin) (Target, error) {
	if job.State != "RUNNING" {
		return Target{}, fmt.Errorf("%w (state %s)", ErrNotRunning, job.State)
	}
	if !slices.Contains(job.Nodes, c.Host) {
		return Target{}, fmt.Errorf("connection file %w: %s, the job runs on %s", ErrHost, c.Host, strings.Join(job.Nodes, ","))
	}
	if pin.Host != "" && pin.Host != c.Host {
		return Target{}, fmt.Errorf("connection file %w: %s, the session's server is on %s", ErrHost, c.Host, pin.Host)
	}
	if pin.Port != 0 && pin.Port != c.Port {
		return Target{}, fmt.Errorf("connection file %w: %d, the session's server listens on %d", ErrPort, c.Port, pin.Port)
	}
	if c.Secret == "" {
		return Target{}, fmt.Errorf("connection file %w", ErrNoSecret)
	}
	return Target{Kind: c.Kind, Host: c.Host, Port: c.Port, Secret: c.Secret}, nil
}

// Pin is the host and port a session's server was first found on.
type Pin struct {
	Host string
	Port int
}

// Resolve reads the connection file in dir for uid and checks it against
// job and pin: what the server calls for each proxied session.
func Resolve(dir string, uid uint32, job Job, pin Pin) (Target, error) {
	if job.State != "RUNNING" {
		return Target{}, fmt.Errorf("%w (state %s)", ErrNotRunning, job.State)
	}
	c, err := Read(dir, uid)
	if err != nil {
		return Target{}, err
	}
	return Check(c, job, pin)
}
