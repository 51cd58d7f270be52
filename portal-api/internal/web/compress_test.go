package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCompress: what is compressed and what passes as it is, and that a
// compressed answer reads back to the plain one's bytes.
func TestCompress(t *testing.T) {
	page := strings.Repeat("<tr><td>job</td><td>RUNNING</td></tr>\n", 200) // 7.4 KB of HTML
	write := func(ct, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			_, _ = io.WriteString(w, body)
		}
	}
	pieces := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		for i := range 200 { // small pieces, as a template executed straight into w writes
			_, _ = io.WriteString(w, page[i*len(page)/200:(i+1)*len(page)/200])
		}
	}
	for _, tc := range []struct {
		name     string
		h        http.HandlerFunc
		accept   string
		header   http.Header
		gzipped  bool
		body     string
		status   int
		wantETag string
	}{
		{name: "a page", h: write("text/html; charset=utf-8", page), accept: "gzip, deflate, br", gzipped: true, body: page},
		{name: "a page written in pieces", h: pieces, accept: "gzip", gzipped: true, body: page},
		{name: "no Content-Type: sniffed as HTML", h: write("", "<!doctype html>"+page), accept: "gzip", gzipped: true, body: "<!doctype html>" + page},
		{name: "the stylesheet", h: write("text/css; charset=utf-8", page), accept: "gzip", gzipped: true, body: page},
		{name: "small", h: write("text/html", "<p>ok</p>"), accept: "gzip", body: "<p>ok</p>"},
		{name: "gzip not accepted", h: write("text/html", page), accept: "deflate, br", body: page},
		{name: "gzip refused with q=0", h: write("text/html", page), accept: "gzip;q=0, br", body: page},
		{name: "any encoding", h: write("text/html", page), accept: "*", gzipped: true, body: page},
		{name: "no Accept-Encoding", h: write("text/html", page), body: page},
		{name: "a range", h: write("text/html", page), accept: "gzip", header: http.Header{"Range": {"bytes=0-9"}}, body: page},
		{name: "an image already compressed", h: write("image/png", page), accept: "gzip", body: page},
		{name: "an answer with its own encoding", h: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", "br")
			_, _ = io.WriteString(w, page)
		}, accept: "gzip, br", body: page},
		{name: "a strong ETag becomes weak", h: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/css")
			w.Header().Set("ETag", `"abc"`)
			_, _ = io.WriteString(w, page)
		}, accept: "gzip", gzipped: true, body: page, wantETag: `W/"abc"`},
		{name: "an error's status is kept", h: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, page)
		}, accept: "gzip", gzipped: true, body: page, status: http.StatusForbidden},
		{name: "not modified", h: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotModified)
		}, accept: "gzip", status: http.StatusNotModified},
		{name: "a redirect", h: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/jobs", http.StatusSeeOther)
		}, accept: "gzip", status: http.StatusSeeOther, body: "<a href=\"/jobs\">See Other</a>.\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			if tc.accept != "" {
				r.Header.Set("Accept-Encoding", tc.accept)
			}
			for k, v := range tc.header {
				r.Header[k] = v
			}
			rec := httptest.NewRecorder()
			Compress(tc.h).ServeHTTP(rec, r)
			res := rec.Result()
			if want := tc.status; want != 0 && res.StatusCode != want {
				t.Errorf("status %d, want %d", res.StatusCode, want)
			}
			if got := res.Header.Get("Vary"); got != "Accept-Encoding" {
				t.Errorf("Vary %q", got)
			}
			body := rec.Body.Bytes()
			if gz := res.Header.Get("Content-Encoding") == "gzip"; gz != tc.gzipped {
				t.Fatalf("gzipped %v, want %v (Content-Encoding %q)", gz, tc.gzipped, res.Header.Get("Content-Encoding"))
			}
			if tc.gzipped {
				if res.Header.Get("Content-Length") != "" {
					t.Errorf("a compressed answer keeps the plain Content-Length %s", res.Header.Get("Content-Length"))
				}
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
				if n := rec.Body.Len(); n*3 > len(body) {
					t.Errorf("%d bytes compressed to %d", len(body), n)
				}
			}
			if string(body) != tc.body {
				t.Errorf("the body reads %d bytes %.40q, want %d bytes %.40q", len(body), body, len(tc.body), tc.body)
			}
			if tc.wantETag != "" && res.Header.Get("ETag") != tc.wantETag {
				t.Errorf("ETag %q, want %q", res.Header.Get("ETag"), tc.wantETag)
			}
		})
	}
}

// TestCompressFlush: a handler that flushes sends what it wrote so far,
// compressed and readable before the answer ends.
func TestCompressFlush(t *testing.T) {
	first := strings.Repeat("first ", 400)
	release := make(chan struct{})
	srv := httptest.NewServer(Compress(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "second")
	})))
	defer srv.Close()
	defer close(release)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client does not undo it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first))
	if _, err := io.ReadFull(zr, got); err != nil || string(got) != first {
		t.Fatalf("before the answer ends: %v, %.20q", err, got)
	}
}

// TestMountCompresses: the pages are compressed, the JSON API and the
// sessions' proxy beneath it are not touched.
func TestMountCompresses(t *testing.T) {
	big := strings.Repeat("x", 4096)
	h := func(ct string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ct)
			_, _ = io.WriteString(w, big)
		})
	}
	m := Mount(h("application/json"), h("text/html"), "")
	for path, gz := range map[string]bool{"/jobs": true, "/static/style.css": true, "/v1/jobs": false, "/v1/sessions/s1/proxy/lab": false} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		if got := rec.Header().Get("Content-Encoding") == "gzip"; got != gz {
			t.Errorf("%s: compressed %v, want %v", path, got, gz)
		}
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "br, gzip;q=0.5", "*", "identity", "GZIP ; q=1.0", ";;,", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got := acceptsGzip(h)
		if got && !strings.Contains(strings.ToLower(h), "gzip") && !strings.Contains(h, "*") {
			t.Errorf("%q: gzip accepted where the header does not name it", h)
		}
	})
}
