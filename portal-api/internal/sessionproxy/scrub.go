package sessionproxy

import (
	"bytes"
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

// scrubber streams r with every occurrence of secret removed, as one
// left-to-right pass (bytes.ReplaceAll of the whole body, however it is
// split). It holds back only a tail that could begin the secret, so a
// streamed response still arrives chunk by chunk. A body built to
// re-form the secret once an inner copy is removed keeps it: only the
// session's own user can write such a page, and the secret is theirs.
type scrubber struct {
	r       io.ReadCloser
	secret  []byte
	pending []byte // read, not yet returned
	out     []byte // ready to return
	err     error
}

func newScrubber(r io.ReadCloser, secret string) *scrubber {
	return &scrubber{r: r, secret: []byte(secret)}
}

func (s *scrubber) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			if len(s.pending) > 0 { // the held tail was not the secret after all
				s.out, s.pending = s.pending, nil
				break
			}
			return 0, s.err
		}
		buf := make([]byte, 32<<10)
		n, err := s.r.Read(buf)
		s.err = err
		s.pending = bytes.ReplaceAll(append(s.pending, buf[:n]...), s.secret, nil)
		hold := s.heldTail()
		s.out = append(s.out, s.pending[:len(s.pending)-hold]...)
		s.pending = append([]byte(nil), s.pending[len(s.pending)-hold:]...)
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// heldTail is the length of the longest suffix of pending that is a
// proper prefix of the secret.
func (s *scrubber) heldTail() int {
	for k := min(len(s.secret)-1, len(s.pending)); k > 0; k-- {
		if bytes.HasPrefix(s.secret, s.pending[len(s.pending)-k:]) {
			return k
		}
	}
	return 0
}

func (s *scrubber) Close() error { return s.r.Close() }
