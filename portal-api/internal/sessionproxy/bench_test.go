package sessionproxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// BenchmarkRoundTrip: the proxy's overhead per request, against the same
// server reached directly, side by side in one run (the proxy's sub-
// benchmark includes reading the connection file, as the server will on
// each request).
func BenchmarkRoundTrip(b *testing.B) {
	body := []byte(`{"started":"2026-12-01T10:00:00Z","last_activity":"2026-12-01T10:05:00Z","connections":1,"kernels":1}`)
	bd := newBed(b, session.JupyterLab, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}), Config{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	run := func(b *testing.B, url string) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := client.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, bd.backend.URL+"/v1/sessions/s1/proxy/api/status") })
	b.Run("proxy", func(b *testing.B) { run(b, bd.url("api/status")) })
}
