package explain

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Read reads the Snapshot an explanation needs from slurmrestd: the
// associations, users, QOS, jobs, partitions, nodes and fair-share tree.
// The fair-share tree is optional: when slurmrestd does not give it (but
// for an auth failure, which is an error), Shares is nil and
// SharesUnavailable says why, and the reports say what is unavailable
// rather than guess.
func Read(ctx context.Context, c *slurmrest.Client, log *slog.Logger) (Snapshot, error) {
	var s Snapshot
	var err error
	if s.Associations, err = c.Associations(ctx, slurmrest.AssociationFilter{}); err != nil {
		return s, err
	}
	if s.Users, err = c.Users(ctx); err != nil {
		return s, err
	}
	if s.QOS, err = c.QOS(ctx); err != nil {
		return s, err
	}
	jobs, err := c.Jobs(ctx, time.Time{})
	if err != nil {
		return s, err
	}
	s.Jobs = jobs.Jobs
	if s.Partitions, err = c.Partitions(ctx); err != nil {
		return s, err
	}
	if s.Nodes, err = c.Nodes(ctx); err != nil {
		return s, err
	}
	if s.Shares, err = c.Shares(ctx); err != nil {
		var auth *slurmrest.AuthError
		if errors.As(err, &auth) {
			return s, err
		}
		log.Warn("fair-share tree unavailable", "error", err)
		s.Shares, s.SharesUnavailable = nil, err.Error()
	}
	return s, nil
}
