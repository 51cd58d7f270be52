package main

import (
	"fmt"
	"log/slog"

	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/portal-api/internal/config"
)

// minCookieKey is the shortest key sessions.cookie_key_file may hold: an
// HMAC-SHA256 key of fewer bytes is weaker than its digest.
const minCookieKey = 32

// cookieKey reads sessions.cookie_key_file, held to the rule of every
// secret (the packaged layout is root:strata-portal-api 0640): nil when it
// is not set, and the portal signs with a random key of its own. It is
// read once: a new key ends every browser's cookie, as a restart would.
func cookieKey(log *slog.Logger, s config.Sessions) ([]byte, error) {
	if s.CookieKeyFile == "" {
		return nil, nil
	}
	f := &secretfile.File{Path: s.CookieKeyFile, What: "sessions.cookie_key_file", Rule: secretRule, Log: log}
	key, err := f.Get()
	if err != nil {
		return nil, fmt.Errorf("sessions.cookie_key_file: %w", err)
	}
	if len(key) < minCookieKey {
		return nil, fmt.Errorf("sessions.cookie_key_file %s: %d bytes, want %d or more: write a new key with head -c 48 /dev/urandom | base64 > %s",
			s.CookieKeyFile, len(key), minCookieKey, s.CookieKeyFile)
	}
	return key, nil
}

// checkCookieKey is cookieKey for check-config: the warning of a key its
// group may read.
func checkCookieKey(s config.Sessions) (warning string, err error) {
	warning, err = checkSecret("sessions.cookie_key_file", s.CookieKeyFile)
	if err != nil || s.CookieKeyFile == "" {
		return "", err
	}
	if _, err := cookieKey(nil, s); err != nil {
		return "", err
	}
	return warning, nil
}
