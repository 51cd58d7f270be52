package web

import (
	"compress/gzip"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// minCompress is the smallest answer worth compressing: below it, gzip's
// own header and the work cost more than they save.
const minCompress = 1024

// compressible are the media types Compress compresses: the pages, their
// fragments, the stylesheet and script, the chart's SVG and JSON. Images
// in formats of their own are compressed already.
var compressible = map[string]bool{
	"text/html": true, "text/css": true, "text/plain": true, "text/javascript": true,
	"application/javascript": true, "application/json": true, "image/svg+xml": true,
}

var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
	return zw
}}

// Compress answers with gzip a client that accepts it (Accept-Encoding),
// for text answers of minCompress bytes or more: the list behind an
// operator's count is 460 KB as HTML and 34 KB gzipped. An answer that
// already has an encoding, a range request, HEAD and an answer with no
// body (204, 304) pass as they are. Each answer says Vary:
// Accept-Encoding, so a cache keeps both forms apart; an ETag becomes
// weak, since the bytes sent differ from the plain answer's.
func Compress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if r.Method == http.MethodHead || r.Header.Get("Range") != "" || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &compressWriter{ResponseWriter: w}
		defer cw.close()
		next.ServeHTTP(cw, r)
	})
}

// acceptsGzip reads an Accept-Encoding header: gzip (or *) listed with a
// weight above zero.
func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}

// compressWriter holds an answer's first bytes until there are
// minCompress of them (or the answer ends, or is flushed), then decides
// whether to compress it from its headers.
type compressWriter struct {
	http.ResponseWriter
	status  int
	buf     []byte
	decided bool
	zw      *gzip.Writer
}

// decide starts the answer: compressed if it is worth it (whole says
// whether buf is all of it), then what was held.
func (c *compressWriter) decide(whole bool) error {
	c.decided = true
	h := c.Header()
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	ct := h.Get("Content-Type")
	if ct == "" && len(c.buf) > 0 {
		ct = http.DetectContentType(c.buf)
		h.Set("Content-Type", ct)
	}
	mt, _, _ := mime.ParseMediaType(ct)
	small := whole && len(c.buf) < minCompress
	if n, err := strconv.Atoi(h.Get("Content-Length")); err == nil && n < minCompress {
		small = true
	}
	if compressible[mt] && !small && h.Get("Content-Encoding") == "" && status != http.StatusNoContent && status != http.StatusNotModified {
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
			h.Set("ETag", "W/"+et)
		}
		c.zw = gzipWriters.Get().(*gzip.Writer)
		c.zw.Reset(c.ResponseWriter)
	}
	if c.status != 0 {
		c.ResponseWriter.WriteHeader(c.status)
	}
	buf := c.buf
	c.buf = nil
	if len(buf) == 0 {
		return nil
	}
	_, err := c.write(buf)
	return err
}

func (c *compressWriter) write(p []byte) (int, error) {
	if c.zw != nil {
		return c.zw.Write(p)
	}
	return c.ResponseWriter.Write(p)
}

func (c *compressWriter) WriteHeader(status int) {
	if status < 200 { // informational: the answer is still to come
		c.ResponseWriter.WriteHeader(status)
		return
	}
	if c.status == 0 && !c.decided {
		c.status = status
	}
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if c.decided {
		return c.write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= minCompress {
		if err := c.decide(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush sends what is held and compressed so far, for a handler that
// streams.
func (c *compressWriter) Flush() {
	if !c.decided {
		_ = c.decide(false)
	}
	if c.zw != nil {
		_ = c.zw.Flush()
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *compressWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// close sends what is held (a small answer, plain) and ends the gzip
// stream.
func (c *compressWriter) close() {
	if !c.decided {
		_ = c.decide(true)
	}
	if c.zw != nil {
		_ = c.zw.Close()
		c.zw.Reset(nil)
		gzipWriters.Put(c.zw)
		c.zw = nil
	}
}
