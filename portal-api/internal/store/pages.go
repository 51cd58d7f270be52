package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// The pages' sign-in state: page sessions (a browser signed in) and
// one-time sign-in links. Of both only the SHA-256 hash of the secret is
// kept, so the database alone signs no one in.
var pagesMigration = sqlite.Migration{Name: "page_sessions", SQL: `CREATE TABLE page_sessions (
		hash TEXT PRIMARY KEY,
		user TEXT NOT NULL,
		via TEXT NOT NULL,
		lang TEXT NOT NULL DEFAULT '',
		theme TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		seen_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	);
	CREATE INDEX page_sessions_expires ON page_sessions(expires_at);
	CREATE TABLE login_links (
		hash TEXT PRIMARY KEY,
		user TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		used_at INTEGER
	);`,
	Postgres: `CREATE TABLE page_sessions (
		hash TEXT PRIMARY KEY,
		"user" TEXT NOT NULL,
		via TEXT NOT NULL,
		lang TEXT NOT NULL DEFAULT '',
		theme TEXT NOT NULL DEFAULT '',
		created_at BIGINT NOT NULL,
		seen_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL
	);
	CREATE INDEX page_sessions_expires ON page_sessions(expires_at);
	CREATE TABLE login_links (
		hash TEXT PRIMARY KEY,
		"user" TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		expires_at BIGINT NOT NULL,
		used_at BIGINT
	);`}

// PageSession is a browser signed in to the pages.
type PageSession struct {
	User string
	// Via is how the user signed in (auth.ViaOIDC, auth.ViaProxy, "link").
	Via string
	// Lang and Theme are the user's choices on the pages ("" : the
	// browser's).
	Lang, Theme string
	Created     time.Time
	Seen        time.Time
	Expires     time.Time
}

// ErrPageSessionInvalid is returned for a page session that is unknown,
// ended, idle too long or past its absolute expiry.
var ErrPageSessionInvalid = errors.New("the page session is unknown, ended or expired")

// ErrLoginLinkInvalid is returned for a sign-in link that is unknown,
// used or expired; which of these is not said.
var ErrLoginLinkInvalid = errors.New("the sign-in link is unknown, used or expired")

func secret() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// CreatePageSession starts a page session for user that ends at the
// latest after absolute, and returns its secret (the cookie's value).
func (s *Store) CreatePageSession(ctx context.Context, user, via, lang string, absolute time.Duration) (string, PageSession, error) {
	if user == "" || absolute <= 0 {
		return "", PageSession{}, errors.New("create page session: a user and a positive lifetime are needed")
	}
	tok, err := secret()
	if err != nil {
		return "", PageSession{}, fmt.Errorf("create page session: %w", err)
	}
	now := s.now().UTC().Truncate(time.Second)
	ps := PageSession{User: user, Via: via, Lang: lang, Created: now, Seen: now, Expires: now.Add(absolute)}
	if _, err := s.exec(ctx, `INSERT INTO page_sessions(hash, "user", via, lang, created_at, seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		Hash(tok), user, via, lang, now.Unix(), now.Unix(), ps.Expires.Unix()); err != nil {
		return "", PageSession{}, fmt.Errorf("create page session: %w", err)
	}
	// Ended and expired sessions are swept as new ones start: the table
	// holds no more than the sessions of the last absolute lifetime.
	if _, err := s.exec(ctx, `DELETE FROM page_sessions WHERE expires_at <= ?`, now.Unix()); err != nil {
		return "", PageSession{}, fmt.Errorf("sweep page sessions: %w", err)
	}
	return tok, ps, nil
}

// TouchPageSession returns the page session of tok when it is valid:
// seen within idle and before its absolute expiry. It records the visit,
// which starts the idle time again.
func (s *Store) TouchPageSession(ctx context.Context, tok string, idle time.Duration) (PageSession, error) {
	if tok == "" {
		return PageSession{}, ErrPageSessionInvalid
	}
	var ps PageSession
	var created, seen, exp int64
	err := s.db.QueryRowContext(ctx, `SELECT "user", via, lang, theme, created_at, seen_at, expires_at FROM page_sessions WHERE hash = ?`, Hash(tok)).
		Scan(&ps.User, &ps.Via, &ps.Lang, &ps.Theme, &created, &seen, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return PageSession{}, ErrPageSessionInvalid
	}
	if err != nil {
		return PageSession{}, fmt.Errorf("look up page session: %w", err)
	}
	now := s.now().UTC().Truncate(time.Second)
	ps.Created, ps.Seen, ps.Expires = time.Unix(created, 0).UTC(), time.Unix(seen, 0).UTC(), time.Unix(exp, 0).UTC()
	if !now.Before(ps.Expires) || !now.Before(ps.Seen.Add(idle)) {
		_, _ = s.exec(ctx, `DELETE FROM page_sessions WHERE hash = ?`, Hash(tok))
		return PageSession{}, ErrPageSessionInvalid
	}
	// One write a minute at most per session: a page that refreshes in
	// place does not write on every refresh.
	if now.Sub(ps.Seen) >= time.Minute {
		if _, err := s.exec(ctx, `UPDATE page_sessions SET seen_at = ? WHERE hash = ?`, now.Unix(), Hash(tok)); err != nil {
			return PageSession{}, fmt.Errorf("touch page session: %w", err)
		}
		ps.Seen = now
	}
	return ps, nil
}

// SetPagePrefs keeps a page session's language and theme.
func (s *Store) SetPagePrefs(ctx context.Context, tok, lang, theme string) error {
	return s.update(ctx, "set page preferences", `UPDATE page_sessions SET lang = ?, theme = ? WHERE hash = ?`, lang, theme, Hash(tok))
}

// EndPageSession ends a page session (sign-out); ending one that is not
// there is no error.
func (s *Store) EndPageSession(ctx context.Context, tok string) error {
	if _, err := s.exec(ctx, `DELETE FROM page_sessions WHERE hash = ?`, Hash(tok)); err != nil {
		return fmt.Errorf("end page session: %w", err)
	}
	return nil
}

// CreateLoginLink makes a one-time sign-in secret for user, valid for
// ttl; only its hash is stored.
func (s *Store) CreateLoginLink(ctx context.Context, user string, ttl time.Duration) (string, time.Time, error) {
	if user == "" || ttl <= 0 {
		return "", time.Time{}, errors.New("create sign-in link: a user and a positive lifetime are needed")
	}
	tok, err := secret()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("create sign-in link: %w", err)
	}
	now := s.now().UTC().Truncate(time.Second)
	if _, err := s.exec(ctx, `INSERT INTO login_links(hash, "user", created_at, expires_at) VALUES (?, ?, ?, ?)`,
		Hash(tok), user, now.Unix(), now.Add(ttl).Unix()); err != nil {
		return "", time.Time{}, fmt.Errorf("create sign-in link: %w", err)
	}
	return tok, now.Add(ttl), nil
}

// UseLoginLink spends a sign-in secret and returns its user: it works
// once, before it expires.
func (s *Store) UseLoginLink(ctx context.Context, tok string) (string, error) {
	if tok == "" {
		return "", ErrLoginLinkInvalid
	}
	now := s.now().Unix()
	var user string
	// One statement: two browsers racing with the same link cannot both win.
	err := s.retry.Do(ctx, func() error {
		return s.db.QueryRowContext(ctx, `UPDATE login_links SET used_at = ? WHERE hash = ? AND used_at IS NULL AND expires_at > ? RETURNING "user"`,
			now, Hash(tok), now).Scan(&user)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrLoginLinkInvalid
	}
	if err != nil {
		return "", fmt.Errorf("use sign-in link: %w", err)
	}
	return user, nil
}
