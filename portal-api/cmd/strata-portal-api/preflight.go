package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// preflight checks every file the configuration names (each cluster's
// tenant map, jwt key, job policy, bridge and reclaimd tokens; the job
// templates; the cookie key), all at once and with the messages serve
// would give. check-config and serve both call it first, after
// config.Load, so that the two can never disagree: what check-config
// passes, serve does not refuse for a file, and the other way round.
// Warnings are what serve logs and starts anyway with (a secret its
// group may read).
func preflight(cfg *config.Config) (warnings []string, err error) {
	var errs []error
	for _, cl := range cfg.Clusters {
		fail := func(err error) { errs = append(errs, fmt.Errorf("cluster %s: %w", cl.Name, err)) }
		warn := func(w string) {
			if w != "" {
				warnings = append(warnings, "cluster "+cl.Name+": "+w)
			}
		}
		if _, err := loadTenants(cl); err != nil {
			fail(err)
		}
		if err := checkKey(nil, cl.JWTKeyFile); err != nil {
			fail(err)
		}
		for _, s := range []struct{ key, path string }{{"bridge_token_file", cl.BridgeTokenFile}, {"reclaimd_token_file", cl.ReclaimdTokenFile}} {
			if w, err := checkSecret(s.key, s.path); err != nil {
				fail(err)
			} else {
				warn(w)
			}
		}
		if cl.JobPolicyFile != "" {
			if _, err := jobpolicy.Load(cl.JobPolicyFile); err != nil {
				fail(err)
			}
		}
	}
	if cfg.DatabaseIsPostgres() {
		if w, err := checkSecret("database_password_file", cfg.DatabasePasswordFile); err != nil {
			errs = append(errs, err)
		} else if w != "" {
			warnings = append(warnings, w)
		}
	}
	if _, err := templates.Load(cfg.TemplatesDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if w, err := checkCookieKey(cfg.Sessions); err != nil {
		errs = append(errs, err)
	} else if w != "" {
		warnings = append(warnings, w)
	}
	if _, err := sessionOrigin(nil, cfg.Sessions); err != nil {
		errs = append(errs, err)
	} else if cfg.Sessions.Origin == "" {
		warnings = append(warnings, noOriginWarning)
	}
	return warnings, errors.Join(errs...)
}
