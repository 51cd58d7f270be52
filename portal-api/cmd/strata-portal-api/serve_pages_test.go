package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// TestServePages: serve answers the pages under / and the API under /v1/
// from one listener, every answer with the pages' security headers.
func TestServePages(t *testing.T) {
	cfg := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
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
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var resp *http.Response
	for range 100 {
		if resp, err = c.Get("http://" + addr + "/signin"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<form method="post" action="/prefs"`) {
		t.Errorf("GET /signin: %s", resp.Status)
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
