package slurmrest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/http"
	"strings"
	"sync"
	"time"
)

// jobMemo decodes the job lists of one backend. A poller asks for the list
// every cycle, and on a busy cluster slurmrestd sends it whole each time
// (update_time spares only an unchanged cluster): thousands of records of
// several KiB, of which few changed since the last answer. Decoding every
// record into the generated types cost more than everything else in a
// reclaim cycle, so the memo splits the answer into its records with a
// scanner of its own, and decodes only a record whose bytes it has not
// seen in the last answer; the others keep the Job decoded then. The
// answer is read into one of two buffers in turn, so that the last
// answer's records stay valid while the new one is read and no buffer is
// allocated once both have grown to the list's size.
type jobMemo struct {
	mu   sync.Mutex
	seed maphash.Seed
	bufs [2]bytes.Buffer
	cur  int                  // the buffer the next answer goes to
	prev map[uint64]memoEntry // the last answer's records, by hash
}

type memoEntry struct {
	raw []byte // in the buffer of the last answer
	job Job
	err error // of the conversion: the record is unreadable
}

// listJobs reads a GET /jobs/ answer into a JobList, as jobList does for
// a decoded one: a record that does not decode as T fails the list (as a
// whole-body decode would), one that conv refuses is Unreadable. The Jobs
// of a list may share slices with those of earlier lists: callers must
// not change them.
func listJobs[T any](m *jobMemo, op, user string, since time.Time, resp *http.Response, lastUpdate func([]byte) (time.Time, error),
	conv func(T) (Job, error)) (JobList, error) {
	defer resp.Body.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prev == nil {
		m.seed = maphash.MakeSeed()
	}
	buf := &m.bufs[m.cur]
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return JobList{}, fmt.Errorf("%s: read answer: %w", op, err)
	}
	body := buf.Bytes()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if err := checkResponse(op, user, resp.StatusCode, body); err != nil {
			return JobList{}, err
		}
		return JobList{}, fmt.Errorf("%s: HTTP %d with a body that does not decode", op, resp.StatusCode)
	}
	env, err := splitJobList(body)
	if err != nil {
		return JobList{}, fmt.Errorf("%s: %w", op, err)
	}
	var rb responseBody
	if env.errors != nil {
		if err := json.Unmarshal(env.errors, &rb.Errors); err != nil {
			return JobList{}, fmt.Errorf("%s: errors: %w", op, err)
		}
	}
	if err := checkBody(op, user, resp.StatusCode, rb); err != nil {
		return JobList{}, err
	}
	var updated time.Time
	if env.lastUpdate != nil {
		if updated, err = lastUpdate(env.lastUpdate); err != nil {
			return JobList{}, fmt.Errorf("%s: last_update: %w", op, err)
		}
	}
	if !since.IsZero() && len(env.jobs) == 0 && updated.IsZero() {
		return JobList{Unchanged: true, Updated: since}, nil
	}
	out := JobList{Updated: updated, Jobs: make([]Job, 0, len(env.jobs))}
	next := make(map[uint64]memoEntry, len(env.jobs))
	for _, raw := range env.jobs {
		h := maphash.Bytes(m.seed, raw)
		e, ok := m.prev[h]
		if !ok || !bytes.Equal(e.raw, raw) {
			var rec T
			if err := json.Unmarshal(raw, &rec); err != nil {
				return JobList{}, fmt.Errorf("%s: job record: %w", op, err)
			}
			e.raw = raw
			e.job, e.err = conv(rec)
		}
		e.raw = raw
		next[h] = e
		if e.err != nil {
			out.Unreadable = append(out.Unreadable, UnreadableJob{ID: e.job.ID, Err: e.err})
			continue
		}
		out.Jobs = append(out.Jobs, e.job)
	}
	// Only a list read whole becomes the memo: the next answer goes to the
	// other buffer, this one's records stay where next points.
	m.prev = next
	m.cur = 1 - m.cur
	if out.Updated.IsZero() {
		out.Updated = since
	}
	return out, nil
}

// jobListParts are the parts of a job list answer that listJobs reads.
type jobListParts struct {
	jobs               [][]byte // each record of "jobs", as it is in the body
	errors, lastUpdate []byte   // the raw values; nil when absent
}

// splitJobList finds the records of a job list answer, and its errors and
// last_update, without decoding them. It checks the frame of the answer
// (an object; "jobs" an array or null), not the JSON of the values it
// skips: the records it returns are decoded by encoding/json, or are
// byte for byte a record decoded before.
func splitJobList(b []byte) (jobListParts, error) {
	var p jobListParts
	sc := frameScanner{b: b}
	if sc.literal("null") { // as encoding/json reads it: nothing
		return p, sc.end()
	}
	if !sc.expect('{') {
		return p, sc.fail("answer: want a JSON object")
	}
	if sc.expect('}') {
		return p, sc.end()
	}
	for {
		key, err := sc.key()
		if err != nil {
			return p, err
		}
		// encoding/json matches keys without regard to case: so does this.
		switch {
		case strings.EqualFold(key, "jobs"):
			if p.jobs, err = sc.array(); err != nil {
				return p, err
			}
		default:
			v, err := sc.value()
			if err != nil {
				return p, err
			}
			switch {
			case strings.EqualFold(key, "errors"):
				p.errors = v
			case strings.EqualFold(key, "last_update"):
				p.lastUpdate = v
			}
		}
		if sc.expect('}') {
			return p, sc.end()
		}
		if !sc.expect(',') {
			return p, sc.fail("answer: want , or } after a value")
		}
	}
}

// frameScanner walks the frame of a JSON document: keys, arrays, and
// values skipped whole.
type frameScanner struct {
	b   []byte
	off int
}

func (sc *frameScanner) space() {
	for sc.off < len(sc.b) && (sc.b[sc.off] == ' ' || sc.b[sc.off] == '\t' || sc.b[sc.off] == '\n' || sc.b[sc.off] == '\r') {
		sc.off++
	}
}

func (sc *frameScanner) expect(c byte) bool {
	sc.space()
	if sc.off < len(sc.b) && sc.b[sc.off] == c {
		sc.off++
		return true
	}
	return false
}

func (sc *frameScanner) end() error {
	sc.space()
	if sc.off != len(sc.b) {
		return sc.fail("answer: data after the object")
	}
	return nil
}

func (sc *frameScanner) fail(msg string) error {
	near := sc.b[min(sc.off, len(sc.b)):]
	if len(near) > 40 {
		near = near[:40]
	}
	return fmt.Errorf("%s at byte %d (near %q)", msg, sc.off, near)
}

// key reads "name": and returns the name.
func (sc *frameScanner) key() (string, error) {
	sc.space()
	start := sc.off
	if err := sc.skipString(); err != nil {
		return "", err
	}
	key := string(sc.b[start+1 : sc.off-1])
	if strings.IndexByte(key, '\\') >= 0 {
		if err := json.Unmarshal(sc.b[start:sc.off], &key); err != nil {
			return "", fmt.Errorf("answer: key: %w", err)
		}
	}
	if !sc.expect(':') {
		return "", sc.fail("answer: want : after a key")
	}
	return key, nil
}

func (sc *frameScanner) literal(s string) bool {
	sc.space()
	if bytes.HasPrefix(sc.b[sc.off:], []byte(s)) {
		sc.off += len(s)
		return true
	}
	return false
}

// array reads an array (or null) and returns its elements.
func (sc *frameScanner) array() ([][]byte, error) {
	if sc.literal("null") {
		return nil, nil
	}
	if !sc.expect('[') {
		return nil, sc.fail("jobs: want an array")
	}
	out := [][]byte{}
	if sc.expect(']') {
		return out, nil
	}
	for {
		v, err := sc.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if sc.expect(']') {
			return out, nil
		}
		if !sc.expect(',') {
			return nil, sc.fail("jobs: want , or ]")
		}
	}
}

// value skips one value and returns its bytes.
func (sc *frameScanner) value() ([]byte, error) {
	sc.space()
	start := sc.off
	if sc.off >= len(sc.b) {
		return nil, sc.fail("answer: want a value")
	}
	switch sc.b[sc.off] {
	case '"':
		if err := sc.skipString(); err != nil {
			return nil, err
		}
	case '{', '[':
		depth := 0
	loop:
		for sc.off < len(sc.b) {
			switch sc.b[sc.off] {
			case '"':
				if err := sc.skipString(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					sc.off++
					break loop
				}
			}
			sc.off++
		}
		if depth != 0 {
			return nil, sc.fail("answer: unterminated object or array")
		}
	default:
		for sc.off < len(sc.b) && bytes.IndexByte([]byte(",]} \t\r\n{[\":"), sc.b[sc.off]) < 0 {
			sc.off++
		}
		if sc.off == start {
			return nil, sc.fail("answer: want a value")
		}
	}
	return sc.b[start:sc.off], nil
}

// skipString skips a string, escapes and all.
func (sc *frameScanner) skipString() error {
	if sc.off >= len(sc.b) || sc.b[sc.off] != '"' {
		return sc.fail("answer: want a string")
	}
	for i := sc.off + 1; i < len(sc.b); i++ {
		switch sc.b[i] {
		case '\\':
			i++
		case '"':
			sc.off = i + 1
			return nil
		}
	}
	return sc.fail("answer: unterminated string")
}
