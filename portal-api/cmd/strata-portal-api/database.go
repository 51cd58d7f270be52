package main

import (
	"context"

	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// openDatabase opens the store the configuration names: its SQLite file,
// or its PostgreSQL database with the password in database_password_file
// (held to the rule of the portal's other secrets).
func openDatabase(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	return store.OpenDatabase(ctx, store.Database{Setting: cfg.Database, PasswordFile: cfg.DatabasePasswordFile, Rule: secretRule})
}
