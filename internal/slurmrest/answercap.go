package slurmrest

import (
	"fmt"
	"io"
	"net/http"
)

// DefaultMaxAnswerBytes is the cap on one answer of slurmrestd when
// Config.MaxAnswerBytes is 0: 2.5 times the job listing of a large cluster
// (some 200 MB: slurmrestd writes several KiB a job). Job listings are
// read as a stream, so their size costs no memory of its own; the other
// answers are read whole, and the cap keeps a runaway one from taking
// the daemon's memory.
const DefaultMaxAnswerBytes = 512 << 20

// AnswerTooLargeError is an answer of slurmrestd larger than the client's
// cap (Config.MaxAnswerBytes). errors.Is matches ErrAnswerTooLarge.
type AnswerTooLargeError struct {
	Method, Path string
	Limit        int64
	// Setting names what raises the cap (Config.MaxAnswerSetting).
	Setting string
}

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("slurmrestd's answer to %s %s is larger than the cap of %s: "+
		"if answers this large are expected (a cluster with this many jobs, nodes or associations), raise %s",
		e.Method, e.Path, sizeText(e.Limit), e.Setting)
}

// Is matches ErrAnswerTooLarge.
func (e *AnswerTooLargeError) Is(target error) bool { return target == ErrAnswerTooLarge }

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// capTransport makes every answer's body fail with an
// *AnswerTooLargeError once it passes the cap, or at once when its
// Content-Length says it will.
type capTransport struct {
	base    http.RoundTripper
	limit   int64
	setting string
}

func (t *capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	tooLarge := &AnswerTooLargeError{Method: req.Method, Path: req.URL.Path, Limit: t.limit, Setting: t.setting}
	if resp.ContentLength > t.limit {
		_ = resp.Body.Close()
		resp.Body = &cappedBody{err: tooLarge}
		return resp, nil
	}
	resp.Body = &cappedBody{body: resp.Body, left: t.limit, err: tooLarge}
	return resp, nil
}

// cappedBody reads up to left bytes of body, and fails with err at the
// first byte past them, and at every read after.
type cappedBody struct {
	body     io.ReadCloser // nil: refused before reading
	left     int64
	err      error
	exceeded bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.body == nil || b.exceeded {
		return 0, b.err
	}
	if b.left <= 0 {
		// One byte more tells a body of exactly the cap from a larger one.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			b.exceeded = true
			return 0, b.err
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error {
	if b.body == nil {
		return nil
	}
	return b.body.Close()
}

// withCap returns a copy of hc whose answers are capped at limit bytes.
func withCap(hc *http.Client, limit int64, setting string) *http.Client {
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *hc
	c.Transport = &capTransport{base: base, limit: limit, setting: setting}
	return &c
}
