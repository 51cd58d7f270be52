package sessionproxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// chunks is a reader that returns each of its strings in its own Read.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	if n == len((*c)[0]) {
		*c = (*c)[1:]
	} else {
		(*c)[0] = (*c)[0][n:]
	}
	return n, nil
}

func scrubAll(t *testing.T, parts []string) string {
	t.Helper()
	c := chunks(append([]string(nil), parts...))
	got, err := io.ReadAll(newScrubber(io.NopCloser(&c), secret))
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

func TestScrubber(t *testing.T) {
	half := len(secret) / 2
	for name, tc := range map[string]struct {
		parts []string
		want  string
	}{
		"none":                  {parts: []string{"hello ", "world"}, want: "hello world"},
		"whole":                 {parts: []string{`{"token": "` + secret + `"}`}, want: `{"token": ""}`},
		"split":                 {parts: []string{`"token": "` + secret[:half], secret[half:] + `"`}, want: `"token": ""`},
		"byte by byte":          {parts: strings.Split("a"+secret+"b", ""), want: "ab"},
		"prefix not it":         {parts: []string{"x" + secret[:10], "y"}, want: "x" + secret[:10] + "y"},
		"prefix at end":         {parts: []string{"x" + secret[:10]}, want: "x" + secret[:10]},
		"twice":                 {parts: []string{secret + "-" + secret}, want: "-"},
		"joined halves":         {parts: []string{secret[:half] + secret + secret[half:]}, want: ""},
		"joined halves, split":  {parts: []string{secret[:half] + secret[:3], secret[3:] + secret[half:] + "!"}, want: "!"},
		"nested twice":          {parts: []string{"<" + secret[:5] + secret[:half] + secret + secret[half:] + secret[5:] + ">"}, want: "<>"},
		"formed on the left":    {parts: []string{secret[:half], secret[:1] + secret + secret[1:] + secret[half:]}, want: ""},
		"half left over":        {parts: []string{secret[:half] + secret + "x" + secret[half:]}, want: secret[:half] + "x" + secret[half:]},
		"prefix runs":           {parts: []string{strings.Repeat(secret[:half], 3), strings.Repeat(secret[half:], 3)}, want: ""},
		"prefix runs, one left": {parts: []string{strings.Repeat(secret[:half], 3), strings.Repeat(secret[half:], 2)}, want: secret[:half]},
		"empty":                 {parts: nil, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := scrubAll(t, tc.parts); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	r := newScrubber(io.NopCloser(strings.NewReader("abc"+secret+"def")), secret)
	if err := iotest.TestReader(r, []byte("abcdef")); err != nil {
		t.Error(err)
	}
}

// TestScrubberHeldLimit: a body that keeps more than the limit open to a
// later copy of the secret is cut with an error, and what was returned
// before holds no secret; an ordinary body of any size streams through.
func TestScrubberHeldLimit(t *testing.T) {
	// secret is periodic, so this test takes one whose halves differ:
	// each "abcd" waits for an "efgh".
	const key = "abcdefgh"
	parts := chunks{"page " + strings.Repeat("abcd", 100), strings.Repeat("efgh", 100)}
	body := parts[0] + parts[1]
	s := newScrubber(io.NopCloser(&parts), key)
	s.limit = 40
	got, err := io.ReadAll(s)
	if err == nil || !strings.Contains(err.Error(), "could still form the session's secret") {
		t.Errorf("err = %v, want the held limit's error", err)
	}
	if string(got) != "page " {
		t.Errorf("returned %q before the error, want only what no copy can reach", got)
	}
	s = newScrubber(io.NopCloser(strings.NewReader(body)), key)
	if got, err := io.ReadAll(s); err != nil || string(got) != "page " {
		t.Errorf("under the default limit: %q, %v; want \"page \"", got, err)
	}
	big := strings.Repeat("<p>"+secret[:10]+"</p>", 100000)
	if got, err := io.ReadAll(newScrubber(io.NopCloser(strings.NewReader(big)), secret)); err != nil || string(got) != big {
		t.Errorf("an ordinary %d-byte page: %d bytes, %v", len(big), len(got), err)
	}
}

// removeAll removes the leftmost copy of secret from b while one is left:
// the scrubber's result, written the slow, plain way.
func removeAll(b []byte, secret string) []byte {
	b = bytes.Clone(b)
	for {
		i := bytes.Index(b, []byte(secret))
		if i < 0 {
			return b
		}
		b = append(b[:i], b[i+len(secret):]...)
	}
}

// FuzzScrubber: whatever the body and however it is split, the scrubber
// gives no copy of the secret, not even one formed by removing another,
// and gives what removing the leftmost copy of the whole body while one
// is left gives: a body without the secret unchanged.
func FuzzScrubber(f *testing.F) {
	half := len(secret) / 2
	f.Add([]byte("hello"), 3)
	f.Add([]byte(`{"token": "`+secret+`"}`), 20)
	f.Add([]byte(secret[:30]+secret+secret[30:]), 1)
	f.Add([]byte(secret[:half]+secret+secret[half:]), 40)
	f.Add([]byte("<"+secret[:5]+secret[:half]+secret+secret[half:]+secret[5:]+">"), 7)
	f.Add([]byte(strings.Repeat(secret[:half], 3)+"x"+strings.Repeat(secret[half:], 3)), 64)
	f.Add([]byte(secret[:10]+secret[:10]+"f00d"), 2)
	// The find: a copy split by a copy, which one pass leaves whole.
	f.Add([]byte("0"+secret[:17]+secret+secret[17:]+"0"), 5)
	f.Fuzz(func(t *testing.T, body []byte, split int) {
		var parts []string
		if split <= 0 {
			split = 1
		}
		for s := string(body); len(s) > 0; {
			n := min(split, len(s))
			parts = append(parts, s[:n])
			s = s[n:]
		}
		got := scrubAll(t, parts)
		if strings.Contains(got, secret) {
			t.Fatalf("scrub(%q) split by %d = %q, which holds the secret", body, split, got)
		}
		if want := string(removeAll(body, secret)); got != want {
			t.Fatalf("scrub(%q) split by %d = %q, want %q", body, split, got, want)
		}
	})
}

// TestSecretNotInBody: JupyterLab's page config holds its token; the
// browser gets the page without it, streamed.
func TestSecretNotInBody(t *testing.T) {
	b := newBed(t, session.JupyterLab, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "" {
			http.Error(w, "compressed bodies cannot be scrubbed", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", "1000")
		page := `<script id="jupyter-config-data" type="application/json">{"baseUrl": "/v1/sessions/s1/proxy/", "token": "` + secret + `"}</script>`
		_, _ = io.WriteString(w, page+strings.Repeat(" ", 1000-len(page)))
	}), Config{})
	res := get(t, b.url("lab"))
	if res.StatusCode != http.StatusOK || strings.Contains(string(res.Body), secret) || !strings.Contains(string(res.Body), `"token": ""`) {
		t.Errorf("%d %q; want the page without its token", res.StatusCode, res.Body)
	}
}
