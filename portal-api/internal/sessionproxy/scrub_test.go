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
		"none":          {parts: []string{"hello ", "world"}, want: "hello world"},
		"whole":         {parts: []string{`{"token": "` + secret + `"}`}, want: `{"token": ""}`},
		"split":         {parts: []string{`"token": "` + secret[:half], secret[half:] + `"`}, want: `"token": ""`},
		"byte by byte":  {parts: strings.Split("a"+secret+"b", ""), want: "ab"},
		"prefix not it": {parts: []string{"x" + secret[:10], "y"}, want: "x" + secret[:10] + "y"},
		"prefix at end": {parts: []string{"x" + secret[:10]}, want: "x" + secret[:10]},
		"twice":         {parts: []string{secret + "-" + secret}, want: "-"},
		"joined halves": {parts: []string{secret[:half] + secret + secret[half:]}, want: ""},
		"empty":         {parts: nil, want: ""},
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

// FuzzScrubber: whatever the body and however it is split, the scrubber
// gives what one bytes.ReplaceAll of the whole body gives: every copy of
// the secret removed, a body without it unchanged.
func FuzzScrubber(f *testing.F) {
	f.Add([]byte("hello"), 3)
	f.Add([]byte(`{"token": "`+secret+`"}`), 20)
	f.Add([]byte(secret[:30]+secret+secret[30:]), 1)
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
		if want := string(bytes.ReplaceAll(body, []byte(secret), nil)); got != want {
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
