package slurmrest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/strata-hpc/strata/internal/secretfile"
)

// TokenSource gives the JWT to send for a request made as user.
type TokenSource interface {
	Token(ctx context.Context, user string) (string, error)
}

// StaticToken is one fixed token.
type StaticToken string

// Token returns the token whatever the user.
func (s StaticToken) Token(context.Context, string) (string, error) { return string(s), nil }

// FileToken reads a token from a file and reads it again whenever the file
// changes, so a token rotated by cron reaches a running daemon. The token is
// sent for every user: acting for another user needs a token of root or of
// SlurmUser (slurmrestd then trusts X-SLURM-USER-NAME).
//
// FileToken is the command-line tools' reader (the daemons use
// SecretToken, which refuses an exposed file): a token file every user of
// the host may read or write is used, with a warning each time it is read
// anew, under secretfile's rule, so a tool run by hand still works on a
// host whose token was written with the default umask.
type FileToken struct {
	Path string
	// Logger gets the warning about an exposed file; nil: slog.Default().
	Logger *slog.Logger

	mu    sync.Mutex
	mtime time.Time
	size  int64
	token string
}

// Token returns the file's current token.
func (f *FileToken) Token(context.Context, string) (string, error) {
	st, err := os.Stat(f.Path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.token != "" && st.ModTime().Equal(f.mtime) && st.Size() == f.size {
		return f.token, nil
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimPrefix(strings.TrimSpace(string(b)), "SLURM_JWT=")
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty: write a token from `scontrol token` into it", f.Path)
	}
	var mode *secretfile.ModeError
	if _, err := (secretfile.Rule{}).Judge(f.Path, st); errors.As(err, &mode) {
		log := f.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("the slurmrestd token file is exposed; the daemons refuse such a file", "error", err)
	}
	f.token, f.mtime, f.size = tok, st.ModTime(), st.Size()
	return tok, nil
}

// KeySigner mints short-lived HS256 tokens for any user from the cluster's
// jwt_hs256.key, the way `scontrol token` does, so a service can act as the
// user it serves. Tokens are reused until a fifth of their lifetime is left.
type KeySigner struct {
	key      []byte
	lifetime time.Duration
	now      func() time.Time

	mu    sync.Mutex
	cache map[string]signed
}

type signed struct {
	token string
	exp   time.Time
}

// NewKeySigner reads the key file (AuthAltParameters=jwt_key=...).
func NewKeySigner(keyPath string, lifetime time.Duration) (*KeySigner, error) {
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("jwt key: %w", err)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("jwt key %s has %d bytes: too short to be the cluster's key", keyPath, len(key))
	}
	return newKeySigner(key, lifetime, time.Now), nil
}

func newKeySigner(key []byte, lifetime time.Duration, now func() time.Time) *KeySigner {
	if lifetime <= 0 {
		lifetime = 10 * time.Minute
	}
	return &KeySigner{key: key, lifetime: lifetime, now: now, cache: map[string]signed{}}
}

// Token returns a token for user, minting a new one when needed.
func (k *KeySigner) Token(_ context.Context, user string) (string, error) {
	if user == "" {
		return "", fmt.Errorf("mint token: no user name")
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.cache[user]; ok && s.exp.Sub(now) > k.lifetime/5 {
		return s.token, nil
	}
	exp := now.Add(k.lifetime)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iat": now.Unix(),
		"exp": exp.Unix(),
		"sun": user, // Slurm's claim for the user name
	}).SignedString(k.key)
	if err != nil {
		return "", fmt.Errorf("mint token for %s: %w", user, err)
	}
	k.cache[user] = signed{token: tok, exp: exp}
	return tok, nil
}
