package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/reclaimd/internal/config"
)

// secretRule is reclaimd's rule for its secrets: its own group
// (root:strata-reclaimd 0640, as packaged) may read them.
var secretRule = secretfile.Rule{Groups: []string{"strata-reclaimd"}}

// secret is one secret file of the configuration and the verbs that need it.
type secret struct{ key, path, neededBy string }

// With source: prometheus there are no agents, and no agents' secret.
func secrets(cfg config.Config) []secret {
	out := []secret{{"slurm.token_file", cfg.Slurm.TokenFile, "reclaimd run"}, {"api.token_file", cfg.API.TokenFile, "reclaimd run"}}
	if cfg.DatabaseIsPostgres() && cfg.DatabasePasswordFile != "" {
		out = append(out, secret{"database_password_file", cfg.DatabasePasswordFile, "reclaimd run"})
	}
	switch {
	case cfg.Source != "agents":
	case cfg.Agent.TokenFile == cfg.Agents.TokenFile:
		out = append(out, secret{"agents.token_file", cfg.Agents.TokenFile, "reclaimd run and reclaimd agent"})
	default:
		out = append(out, secret{"agents.token_file", cfg.Agents.TokenFile, "reclaimd run"},
			secret{"agent.token_file", cfg.Agent.TokenFile, "reclaimd agent"})
	}
	return out
}

// checkSecrets applies secretRule to every secret file of the
// configuration, for check-config, with the messages run and agent give
// (an empty file included): one others can read is a problem, one
// another group can read a warning, and a missing one a warning too,
// since the controller and the agents share one configuration and each
// host has only its own secrets.
func checkSecrets(cfg config.Config) (warnings, problems []string) {
	for _, s := range secrets(cfg) {
		w, err := secretRule.Verify(s.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			warnings = append(warnings, fmt.Sprintf("%s: %s does not exist: %s needs it", s.key, s.path, s.neededBy))
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", s.key, err))
		case w != "":
			warnings = append(warnings, s.key+": "+w)
		}
	}
	return warnings, problems
}

// openSecret reads a secret a verb needs before it starts: missing or open
// to others, the verb does not start; readable by another group, a warning.
func openSecret(key, path string, log *slog.Logger) (*secretfile.File, error) {
	f := &secretfile.File{Path: path, What: key, Rule: secretRule, Log: log}
	if _, err := f.Get(); err != nil {
		return nil, err
	}
	return f, nil
}
