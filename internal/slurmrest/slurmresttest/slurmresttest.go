// Package slurmresttest is the network edge of tests that talk to
// slurmrestd: an httptest server that replays the exchanges captured from
// the real slurmrestd of each supported release
// (internal/slurmrest/testdata/replay, written by the slurmrest package's
// TestCapture), checks that every request body is the one slurmrestd
// accepted, and lets a test answer chosen requests otherwise (an HTTP 500, a
// dropped connection) to see what the code above does when slurmrestd
// fails.
package slurmresttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Record is one exchange with a real slurmrestd, as TestCapture saved it
// under testdata/replay/slurm-<release>/<name>.json.
type Record struct {
	Seq      int             `json:"seq"` // order of capture
	Name     string          `json:"name"`
	User     string          `json:"user"` // X-SLURM-USER-NAME
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Query    string          `json:"query,omitempty"`
	Request  json.RawMessage `json:"request,omitempty"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response,omitempty"`
}

// Key is what a request must match to get the record: user, method, path
// and query.
func (r Record) Key() string { return key(r.User, r.Method, r.Path, r.Query) }

func key(user, method, path, query string) string {
	return user + " " + method + " " + path + "?" + query
}

// Dir is the directory of the records captured from a Slurm release
// ("26.05"), wherever in the module the test runs.
func Dir(release string) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("slurmresttest: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "testdata", "replay", "slurm-"+release)
}

// InfoFile is the file beside the records that describes the test bed
// they were captured from (parser, release, cluster); it is not a record.
const InfoFile = "bed.json"

// Load reads the records of a directory, in the order of capture.
func Load(dir string) ([]Record, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no replay records in %s: run `make capture-slurmrest`", dir)
	}
	recs := make([]Record, 0, len(files))
	for _, f := range files {
		if filepath.Base(f) == InfoFile {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var rec Record
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		recs = append(recs, rec)
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	return recs, nil
}

// Request is one request the server was sent.
type Request struct {
	User, Method, Path, Query string
	Body                      []byte
}

// String is "METHOD /path?query".
func (r Request) String() string {
	if r.Query == "" {
		return r.Method + " " + r.Path
	}
	return r.Method + " " + r.Path + "?" + r.Query
}

// Server is an httptest slurmrestd replaying records. A request whose
// user, method, path and query match a record gets its status and body;
// the same request made again gets the next record of that key in the
// order of capture, and the last one repeats. Anything else is answered
// 599 and fails the test, so that a test sees it at once.
type Server struct {
	*httptest.Server
	t testing.TB

	mu       sync.Mutex
	byKey    map[string][]Record
	byName   map[string]Record
	handlers map[string]http.Handler // by "METHOD /path"
	requests []Request
}

// NewServer starts a server replaying the records of dir; it stops when
// the test ends.
func NewServer(t testing.TB, dir string) *Server {
	t.Helper()
	recs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, byKey: map[string][]Record{}, byName: map[string]Record{}, handlers: map[string]http.Handler{}}
	s.Add(recs...)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Add adds exchanges, after those of the same key already there; a test
// uses it to answer a request that was not captured as it was (the same
// list of jobs asked with another update_time).
func (s *Server) Add(recs ...Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.byKey[r.Key()] = append(s.byKey[r.Key()], r)
		if _, ok := s.byName[r.Name]; !ok {
			s.byName[r.Name] = r
		}
	}
}

// Record returns the record of the given name ("job", "cancel").
func (s *Server) Record(name string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byName[name]
	return r, ok
}

// Handle makes h answer every request for method and path, whatever its
// query and user, instead of the records; a nil h gives the path back to
// the records.
func (s *Server) Handle(method, path string, h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		delete(s.handlers, method+" "+path)
		return
	}
	s.handlers[method+" "+path] = h
}

// Requests returns the requests served so far, in order, those answered by
// a Handle handler included.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is how many requests for method and path were served.
func (s *Server) Count(method, path string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	user := req.Header.Get("X-SLURM-USER-NAME")
	k := key(user, req.Method, req.URL.Path, req.URL.RawQuery)
	s.mu.Lock()
	s.requests = append(s.requests, Request{User: user, Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Body: body})
	h := s.handlers[req.Method+" "+req.URL.Path]
	recs, ok := s.byKey[k]
	var rec Record
	if h == nil && ok {
		rec = recs[0]
		if len(recs) > 1 {
			s.byKey[k] = recs[1:]
		}
	}
	var keys []string
	if h == nil && !ok {
		for k := range s.byKey {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	if req.Header.Get("X-SLURM-USER-TOKEN") == "" {
		s.t.Errorf("replay: %s %s sent no token", req.Method, req.URL.Path)
	}
	if h != nil {
		h.ServeHTTP(w, req)
		return
	}
	if !ok {
		sort.Strings(keys)
		s.t.Errorf("replay: no record for %s (have: %s)", k, strings.Join(keys, "; "))
		w.WriteHeader(599)
		return
	}
	if len(rec.Request) > 0 && !jsonEqual(body, rec.Request) {
		s.t.Errorf("replay %s: request body\n%s\ndiffers from the one slurmrestd accepted:\n%s", rec.Name, body, rec.Request)
	}
	Reply(rec).ServeHTTP(w, req)
}

// Reply answers with the status and body of a record.
func Reply(rec Record) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Status)
		w.Write(rec.Response)
	})
}

// Drop closes the connection without an answer, as a slurmrestd that dies
// mid-request does.
func Drop() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
