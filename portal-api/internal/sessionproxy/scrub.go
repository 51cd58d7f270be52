package sessionproxy

import (
	"fmt"
	"io"
	"mime"
	"strings"
)

// scrubTypes are the responses whose bodies may carry the secret back to
// the browser: JupyterLab writes its token into the page config of every
// page (for its own JavaScript, which the proxy makes needless by adding
// the header itself), and a JSON API may echo it.
var scrubTypes = map[string]bool{"text/html": true, "application/json": true, "text/javascript": true, "application/javascript": true}

func scrubbed(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && scrubTypes[strings.ToLower(mt)]
}

// maxHeld is the most a scrubber holds back from the browser: the part of
// a body that a later copy of the secret could still remove.
const maxHeld = 1 << 20

// scrubber streams r with the secret removed until no copy is left: a
// copy that forms once an inner copy is removed (half the secret, the
// secret, the other half) is removed too, so the browser never gets the
// secret, however the body is built or split. The result is the leftmost
// copy removed again and again while one remains.
//
// It is one pass with a stack (held): each byte is pushed with the length
// of the longest prefix of the secret that the stack then ends with (the
// Knuth-Morris-Pratt automaton), and when that is the whole secret, the
// secret is popped. A byte pushed with length 0 can never be part of a
// copy, nor can any byte below it, so everything up to the last such byte
// is returned as it comes: an ordinary page streams chunk by chunk,
// holding back at most a tail that begins the secret. A body made to hold
// more (a run of the secret's first halves, waiting for their second
// halves) is cut with an error past maxHeld bytes, never passed.
type scrubber struct {
	r      io.ReadCloser
	secret []byte
	fail   []int // fail[i]: the longest proper prefix of secret[:i+1] that is also its suffix
	limit  int   // maxHeld, smaller in tests
	held   []byte
	state  []int // state[i]: the longest prefix of secret that held[:i+1] ends with
	out    []byte
	buf    []byte
	err    error
}

func newScrubber(r io.ReadCloser, secret string) *scrubber {
	s := &scrubber{r: r, secret: []byte(secret), limit: maxHeld}
	s.fail = make([]int, len(s.secret))
	for i, k := 1, 0; i < len(s.secret); i++ {
		for k > 0 && s.secret[i] != s.secret[k] {
			k = s.fail[k-1]
		}
		if s.secret[i] == s.secret[k] {
			k++
		}
		s.fail[i] = k
	}
	return s
}

func (s *scrubber) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			if len(s.held) > 0 { // no copy completed: the held tail was not the secret
				s.out, s.held, s.state = s.held, nil, nil
				break
			}
			return 0, s.err
		}
		if s.buf == nil {
			s.buf = make([]byte, 32<<10)
		}
		n, err := s.r.Read(s.buf)
		s.err = err
		s.push(s.buf[:n])
		final := 0
		for i := len(s.state) - 1; i >= 0; i-- {
			if s.state[i] == 0 {
				final = i + 1
				break
			}
		}
		s.out = append(s.out, s.held[:final]...)
		s.held = append(s.held[:0], s.held[final:]...)
		s.state = append(s.state[:0], s.state[final:]...)
		if len(s.held) > s.limit {
			s.held, s.state = nil, nil
			s.err = fmt.Errorf("session proxy: the response holds more than %d bytes that could still form the session's secret: cut", s.limit)
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// push runs the bytes of b through the stack, popping each copy of the
// secret as it completes.
func (s *scrubber) push(b []byte) {
	if len(s.secret) == 0 {
		s.held = append(s.held, b...)
		s.state = append(s.state, make([]int, len(b))...)
		return
	}
	for _, c := range b {
		q := 0
		if n := len(s.state); n > 0 {
			q = s.state[n-1]
		}
		for q > 0 && s.secret[q] != c {
			q = s.fail[q-1]
		}
		if s.secret[q] == c {
			q++
		}
		s.held, s.state = append(s.held, c), append(s.state, q)
		if q == len(s.secret) {
			s.held, s.state = s.held[:len(s.held)-q], s.state[:len(s.state)-q]
		}
	}
}

func (s *scrubber) Close() error { return s.r.Close() }
