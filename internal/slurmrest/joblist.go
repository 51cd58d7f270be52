package slurmrest

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// jobMemo decodes the job lists of one backend. A poller asks for the list
// every cycle, and on a busy cluster slurmrestd sends it whole each time
// (update_time spares only an unchanged cluster): thousands of records of
// several KiB, of which few changed since the last answer.
//
// The answer is read as a stream, one record at a time: a 200 MB listing
// costs the Jobs kept, not the bytes read. Each record is hashed as it
// arrives (128 bits, with seeds of this process), and only a record whose
// hash was not in the last answer is decoded into the generated type and
// converted; the others keep the Job decoded then, since decoding every
// record cost more than everything else in a reclaim cycle.
type jobMemo struct {
	mu    sync.Mutex
	seeds [2]maphash.Seed
	prev  map[memoKey]memoEntry // the last answer's records, by hash
	raw   json.RawMessage       // the record being read; its memory is reused
}

type memoKey [2]uint64

type memoEntry struct {
	job Job
	err error // of the conversion: the record is unreadable
}

func (m *jobMemo) key(raw []byte) memoKey {
	return memoKey{maphash.Bytes(m.seeds[0], raw), maphash.Bytes(m.seeds[1], raw)}
}

// listJobs reads a GET /jobs/ answer into a JobList, as a decode of the
// whole body into the generated answer would: a record that does not
// decode as T fails the list, one that conv refuses is Unreadable. Keys
// match without regard to case and the last of a repeated key counts, as
// with encoding/json. The Jobs of a list may share slices with those of
// earlier lists: callers must not change them.
func listJobs[T any](m *jobMemo, op, user string, since time.Time, resp *http.Response, lastUpdate func([]byte) (time.Time, error),
	conv func(T) (Job, error)) (JobList, error) {
	defer resp.Body.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prev == nil {
		m.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// An error answer is a few hundred bytes: read it whole.
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return JobList{}, fmt.Errorf("%s: read answer: %w", op, err)
		}
		if err := checkResponse(op, user, resp.StatusCode, body); err != nil {
			return JobList{}, err
		}
		return JobList{}, fmt.Errorf("%s: HTTP %d with a body that does not decode", op, resp.StatusCode)
	}
	var (
		out     = JobList{Jobs: []Job{}}
		next    = map[memoKey]memoEntry{}
		rb      responseBody
		updated time.Time
		listed  int // records in the (last) "jobs" array
	)
	record := func(raw []byte) error {
		k := m.key(raw)
		e, ok := next[k]
		if !ok {
			e, ok = m.prev[k]
		}
		if !ok {
			var rec T
			if err := json.Unmarshal(raw, &rec); err != nil {
				return fmt.Errorf("job record: %w", err)
			}
			e.job, e.err = conv(rec)
		}
		next[k] = e
		if e.err != nil {
			out.Unreadable = append(out.Unreadable, UnreadableJob{ID: e.job.ID, Err: e.err})
			return nil
		}
		out.Jobs = append(out.Jobs, e.job)
		return nil
	}
	dec := json.NewDecoder(resp.Body)
	err := readJobList(dec, func(key string) error {
		switch {
		case strings.EqualFold(key, "jobs"):
			// A repeated key replaces the list, as it does a decoded slice.
			out.Jobs, out.Unreadable, listed = out.Jobs[:0], nil, 0
			return readArray(dec, &m.raw, func(raw []byte) error { listed++; return record(raw) })
		case strings.EqualFold(key, "errors"):
			if err := dec.Decode(&rb.Errors); err != nil {
				return fmt.Errorf("errors: %w", err)
			}
		case strings.EqualFold(key, "last_update"):
			if err := dec.Decode(&m.raw); err != nil {
				return err
			}
			var err error
			if updated, err = lastUpdate(m.raw); err != nil {
				return fmt.Errorf("last_update: %w", err)
			}
		default:
			return dec.Decode(&m.raw) // skipped
		}
		return nil
	})
	if err != nil {
		return JobList{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := checkBody(op, user, resp.StatusCode, rb); err != nil {
		return JobList{}, err
	}
	if !since.IsZero() && listed == 0 && updated.IsZero() {
		return JobList{Unchanged: true, Updated: since}, nil
	}
	// Only a list read whole becomes the memo.
	m.prev = next
	out.Updated = updated
	if out.Updated.IsZero() {
		out.Updated = since
	}
	return out, nil
}

// readJobList reads a JSON object (or null) from dec, calling member for
// each key with dec at the key's value, which member must read; then it
// checks that nothing follows the object.
func readJobList(dec *json.Decoder, member func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("answer: %w", eofIsUnexpected(err))
	}
	switch tok {
	case nil: // as encoding/json reads it: nothing
	case json.Delim('{'):
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("answer: %w", eofIsUnexpected(err))
			}
			key, ok := tok.(string)
			if !ok {
				return fmt.Errorf("answer: want a key, found %v", tok)
			}
			if err := member(key); err != nil {
				return eofIsUnexpected(err)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return fmt.Errorf("answer: %w", eofIsUnexpected(err))
		}
	default:
		return fmt.Errorf("answer: want a JSON object, found %v", tok)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("another value")
		}
		return fmt.Errorf("answer: data after the object: %w", err)
	}
	return nil
}

// readArray reads an array (or null) from dec, one element at a time into
// buf, and calls each with it.
func readArray(dec *json.Decoder, buf *json.RawMessage, each func([]byte) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return nil
	case json.Delim('['):
	default:
		return fmt.Errorf("jobs: want an array, found %v", tok)
	}
	for dec.More() {
		*buf = (*buf)[:0]
		if err := dec.Decode(buf); err != nil {
			return err
		}
		if err := each(*buf); err != nil {
			return err
		}
	}
	_, err = dec.Token() // the closing bracket
	return err
}

// eofIsUnexpected: an answer that ends inside the object is cut short.
func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
