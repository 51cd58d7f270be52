package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// openDatabase opens the store the configuration names: its SQLite file,
// or its PostgreSQL database with the password in database_password_file
// (held to the rule of the portal's other secrets).
func openDatabase(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	return store.OpenDatabase(ctx, store.Database{Setting: cfg.Database, PasswordFile: cfg.DatabasePasswordFile, Rule: secretRule})
}

// leaseHolder names this process in the poll leases and as the portal
// instance that opens its audit records (store.Register): host, PID and a
// random part (a PID comes back after a restart, a host's name may be
// shared by containers).
func leaseHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// pollLeaseTTL is how long a poll lease lasts unless renewed: three poll
// intervals, so a slow poll does not lose it, and a portal that died is
// replaced within about four intervals.
func pollLeaseTTL(interval time.Duration) time.Duration { return 3 * interval }
