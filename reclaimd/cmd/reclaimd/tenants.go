package main

import (
	"log/slog"

	"github.com/strata-hpc/strata/internal/tenantmap"
)

// reloadTenants reloads the tenant map on SIGHUP, beside the rules; a bad
// file keeps the map in force.
func reloadTenants(src *tenantmap.Source, log *slog.Logger) {
	m, err := src.Reload()
	if err != nil {
		log.Error("tenant map reload failed: keeping the map in force", "file", src.Path(), "error", err)
		return
	}
	log.Info("tenant map reloaded", "file", src.Path(), "tenants", len(m.Tenants))
}
