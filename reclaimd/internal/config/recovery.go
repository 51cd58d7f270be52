package config

import (
	"path/filepath"

	"github.com/strata-hpc/strata/reclaimd/internal/failure"
)

// Recovery configures how the controller reads what a failed job left;
// what is retried is the rules file's (recovery, rendered from the
// policy's classes).
type Recovery struct {
	// LogRoot is where the jobs' stderr paths are read beneath, as each
	// job's user ("": stderr is not read, and no failure is classed
	// nccl). "/" where this host mounts the jobs' file systems at the
	// paths the nodes do.
	LogRoot string `yaml:"log_root"`
	// StderrLines is how many lines of stderr's end are matched and sent
	// with notices.
	StderrLines int `yaml:"stderr_lines"`
	// NCCLSignatures are regular expressions (RE2, case-insensitive) a
	// stderr line matches to make a failure nccl (empty: the built-in
	// list: NCCL watchdog timeouts, NCCL error, unhandled cuda error).
	NCCLSignatures []string `yaml:"nccl_signatures"`
}

// defaultRecovery is Recovery's defaults.
func defaultRecovery() Recovery { return Recovery{StderrLines: 20} }

// validateRecovery adds Recovery's problems.
func (c Config) validateRecovery(bad func(path, hint, format string, args ...any)) {
	r := c.Recovery
	if r.LogRoot != "" && !filepath.IsAbs(r.LogRoot) {
		bad("recovery.log_root", "give an absolute folder, such as /, or leave it empty to read no stderr", "%q is not absolute", r.LogRoot)
	}
	if r.StderrLines < 1 || r.StderrLines > 1000 {
		bad("recovery.stderr_lines", "give 1 to 1000 (20 is usual)", "%d is out of range", r.StderrLines)
	}
	if _, err := failure.NewMatcher(r.NCCLSignatures); err != nil {
		bad("recovery.nccl_signatures", "fix the regular expression (RE2 syntax), or leave the list empty for the built-in one", "%v", err)
	}
}

// Matcher returns the configured nccl signature matcher (checked by
// Validate).
func (r Recovery) Matcher() *failure.Matcher {
	m, err := failure.NewMatcher(r.NCCLSignatures)
	if err != nil {
		return nil // the defaults
	}
	return m
}
