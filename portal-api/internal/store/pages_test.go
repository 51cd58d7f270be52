package store

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPageSessions: a page session is found by its secret only, ends
// after its idle time, its absolute lifetime, or sign-out, and keeps the
// user's language and theme.
func TestPageSessions(t *testing.T) { eachDB(t, testPageSessions) }

func testPageSessions(t *testing.T, b *backend) {
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	ctx := t.Context()
	tok, ps, err := s.CreatePageSession(ctx, "alice", "link", "ko", 8*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ps.User != "alice" || !ps.Expires.Equal(now.Add(8*time.Hour)) {
		t.Fatalf("session %+v", ps)
	}
	got, err := s.TouchPageSession(ctx, tok, time.Hour)
	if err != nil || got.User != "alice" || got.Lang != "ko" {
		t.Fatalf("touch: %+v, %v", got, err)
	}
	if err := s.SetPagePrefs(ctx, tok, "en", "dark"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.TouchPageSession(ctx, tok, time.Hour); got.Lang != "en" || got.Theme != "dark" {
		t.Errorf("prefs not kept: %+v", got)
	}
	if _, err := s.TouchPageSession(ctx, tok+"x", time.Hour); !errors.Is(err, ErrPageSessionInvalid) {
		t.Errorf("a wrong secret: %v", err)
	}
	// Visits keep it alive past one idle time...
	for range 3 {
		now = now.Add(50 * time.Minute)
		if _, err := s.TouchPageSession(ctx, tok, time.Hour); err != nil {
			t.Fatalf("visited within the idle time: %v", err)
		}
	}
	// ...but not past the idle time without one.
	now = now.Add(61 * time.Minute)
	if _, err := s.TouchPageSession(ctx, tok, time.Hour); !errors.Is(err, ErrPageSessionInvalid) {
		t.Errorf("idle past its limit: %v", err)
	}
	// Absolute expiry, however busy.
	tok2, _, _ := s.CreatePageSession(ctx, "alice", "link", "", 2*time.Hour)
	for range 4 {
		now = now.Add(30 * time.Minute)
		_, err = s.TouchPageSession(ctx, tok2, time.Hour)
	}
	if !errors.Is(err, ErrPageSessionInvalid) {
		t.Errorf("past its absolute expiry: %v", err)
	}
	// Sign-out ends it on the server.
	tok3, _, _ := s.CreatePageSession(ctx, "bob", "proxy", "", time.Hour)
	if err := s.EndPageSession(ctx, tok3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TouchPageSession(ctx, tok3, time.Hour); !errors.Is(err, ErrPageSessionInvalid) {
		t.Errorf("after sign-out: %v", err)
	}
	assertNotStored(t, b, tok, tok2, tok3)
}

// TestLoginLinks: a sign-in link works once, before it expires, and only
// its hash is stored.
func TestLoginLinks(t *testing.T) { eachDB(t, testLoginLinks) }

func testLoginLinks(t *testing.T, b *backend) {
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	ctx := t.Context()
	tok, exp, err := s.CreateLoginLink(ctx, "alice", 10*time.Minute)
	if err != nil || !exp.Equal(now.Add(10*time.Minute)) {
		t.Fatal(exp, err)
	}
	// Two browsers race with the same link: one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 4 {
		wg.Go(func() {
			if u, err := s.UseLoginLink(ctx, tok); err == nil && u == "alice" {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d browsers signed in with one link, want 1", wins)
	}
	late, _, _ := s.CreateLoginLink(ctx, "bob", 10*time.Minute)
	now = now.Add(10 * time.Minute)
	if _, err := s.UseLoginLink(ctx, late); !errors.Is(err, ErrLoginLinkInvalid) {
		t.Errorf("an expired link: %v", err)
	}
	if _, err := s.UseLoginLink(ctx, "made-up"); !errors.Is(err, ErrLoginLinkInvalid) {
		t.Errorf("an unknown link: %v", err)
	}
	assertNotStored(t, b, tok, late)
}

func assertNotStored(t *testing.T, b *backend, secrets ...string) {
	t.Helper()
	s, err := b.reopen(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{`SELECT hash || "user" FROM page_sessions`, `SELECT hash || "user" FROM login_links`} {
		rows, err := s.db.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v string
			_ = rows.Scan(&v)
			for _, sec := range secrets {
				if strings.Contains(v, sec) {
					t.Errorf("a secret is stored in clear: %q", v)
				}
			}
		}
		rows.Close()
	}
}
