package service

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestRateLimitWithoutCredentials: requests without a valid token are
// limited by their client's address (past the burst: 429), the address
// read by the trusted-proxy rule, so each client behind the proxy has its
// own limit and a direct client cannot pick another by a header; a valid
// token keeps its user's own limit.
func TestRateLimitWithoutCredentials(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tok, _, err := st.CreateToken(t.Context(), "mem", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix,
		Proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}, Header: "X-Remote-User"})
	s := New(Config{Auth: a, Store: st, RatePerSecond: 0.001, Burst: 3})
	get := func(remote, xff, bearer string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/me", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 3 {
		if code := get("192.0.2.7:1000", "", "strata_pat_guess"); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, code)
		}
	}
	if code := get("192.0.2.7:1001", "", "strata_pat_guess"); code != http.StatusTooManyRequests {
		t.Errorf("a fourth guess from the same address: %d, want 429", code)
	}
	if code := get("192.0.2.7:1002", "198.51.100.9", ""); code != http.StatusTooManyRequests {
		t.Errorf("a forged X-Forwarded-For from a direct client: %d, want 429", code)
	}
	if code := get("192.0.2.8:1000", "", ""); code != http.StatusUnauthorized {
		t.Errorf("another address: %d, want 401", code)
	}
	// Behind the proxy, each client has its own limit.
	for i := range 3 {
		if code := get("10.0.0.5:4000", "198.51.100.1", ""); code != http.StatusUnauthorized {
			t.Fatalf("client 1 behind the proxy, request %d: %d, want 401", i, code)
		}
	}
	if code := get("10.0.0.5:4000", "198.51.100.1", ""); code != http.StatusTooManyRequests {
		t.Errorf("client 1 behind the proxy past its burst: %d, want 429", code)
	}
	if code := get("10.0.0.5:4000", "198.51.100.2", ""); code != http.StatusUnauthorized {
		t.Errorf("client 2 behind the proxy: %d, want 401", code)
	}
	if code := get("192.0.2.7:1003", "", tok); code != http.StatusOK {
		t.Errorf("a valid token from a limited address: %d, want 200", code)
	}
}
