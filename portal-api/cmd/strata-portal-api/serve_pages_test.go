package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// TestServePages: serve answers the pages under / and the API under /v1/
// from one listener, every answer with the pages' security headers.
func TestServePages(t *testing.T) {
	addr, c, status, body := startServe(t, setup(t))
	if status != http.StatusOK || !strings.Contains(body, `<form method="post" action="/prefs"`) {
		t.Errorf("GET /signin: %d", status)
	}
	for _, p := range []string{"/signin", "/", "/static/style.css", "/v1/openapi.yaml", "/v1/me", "/healthz", "/metrics"} {
		resp, err := c.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Security-Policy"); got != web.CSP {
			t.Errorf("%s: CSP %q", p, got)
		}
		if p == "/v1/me" && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/v1/me without a token: %s, want the API's 401", resp.Status)
		}
	}
}

// startServe runs serve on the config at cfg, on a free loopback port, until
// the test ends, and returns its address, a client that follows no redirect
// and the status and body of its first answer to GET /signin.
func startServe(t *testing.T, cfg string) (addr string, c *http.Client, status int, body string) {
	t.Helper()
	parseMu.Lock() // until serve answers
	defer parseMu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append(b, []byte("listen: "+addr+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"strata-portal-api", "--config", cfg, "serve"}, io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	c = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 100 {
		resp, err := c.Get("http://" + addr + "/signin")
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			return addr, c, resp.StatusCode, string(b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("serve did not answer GET /signin in 10 s")
	return "", nil, 0, ""
}

// TestServeSessionMaxConnections: sessions.max_connections reaches the
// session proxy: its cap metric (which StrataPortalSessionProxyAtCap's
// description names) says the configured value, and the default when the
// file leaves it out.
func TestServeSessionMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       int
	}{
		{"default", "", config.DefaultSessionMaxConnections},
		{"set", "  max_connections: 7\n", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := setup(t)
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			withCap := strings.Replace(string(b), "sessions:\n", "sessions:\n"+tc.yaml, 1)
			if err := os.WriteFile(cfg, []byte(withCap), 0o644); err != nil {
				t.Fatal(err)
			}
			addr, c, _, _ := startServe(t, cfg)
			resp, err := c.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("\nstrata_portal_session_proxy_max_connections %d\n", tc.want)
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics has no %q", strings.TrimSpace(want))
			}
		})
	}
}
