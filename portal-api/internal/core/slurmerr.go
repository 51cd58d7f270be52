package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// settleAudit records the result of an audited action on Slurm: refused
// when Slurm refused it (not done, and the caller may not or cannot do it
// now), failed when it failed otherwise, ok when it was done.
func (s *Core) settleAudit(ctx context.Context, aid int64, err error) {
	var ferr error
	if refusedBySlurm(err) {
		ferr = s.cfg.Store.Settle(ctx, aid, store.ResultRefused, err.Error())
	} else {
		ferr = s.cfg.Store.Finish(ctx, aid, err)
	}
	if ferr != nil {
		s.log.Error("audit result not written", "audit_id", aid, "error", ferr)
	}
}

// refuse records a write the portal refused before trying it (the caller
// may not do it, or may not see what it names), so the audit log holds
// the attempts too, and returns p.
func (s *Core) refuse(ctx context.Context, who auth.Identity, cluster, action, target string, p *Problem) *Problem {
	if _, err := s.cfg.Store.Refused(ctx, store.Audit{User: who.User, Via: who.Via, Cluster: cluster, Action: action, Target: target},
		p.Message); err != nil {
		s.log.Error("the audit record of a refused action was not written", "cluster", cluster, "action", action, "target", target,
			"user", who.User, "error", err)
	}
	return p
}

// refusedBySlurm: Slurm answered, and said no.
func refusedBySlurm(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *slurmrest.APIError
	return errors.Is(err, slurmrest.ErrRefused) || errors.Is(err, slurmrest.ErrPermission) ||
		errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500
}

// userText is what an error of slurmrest says to the caller: Slurm's own
// words, never slurmrestd's address nor the hints meant for the portal's
// operators (those stay in the log).
func userText(err error) string {
	var (
		refused  *slurmrest.RefusedError
		apiErr   *slurmrest.APIError
		authErr  *slurmrest.AuthError
		tooLarge *slurmrest.AnswerTooLargeError
	)
	switch {
	case errors.As(err, &refused):
		return refused.Reason()
	case errors.As(err, &authErr):
		return "slurmrestd did not accept the portal's credentials for your user (the portal's operators see why in its log)"
	case errors.As(err, &apiErr):
		msgs := make([]string, 0, len(apiErr.Errors))
		for _, e := range apiErr.Errors {
			msgs = append(msgs, e.String())
		}
		if len(msgs) == 0 {
			return fmt.Sprintf("slurmrestd answered HTTP %d", apiErr.Status)
		}
		return strings.Join(msgs, "; ")
	case errors.As(err, &tooLarge):
		return "slurmrestd's answer was larger than the portal reads (the portal's operators see which setting raises it in its log)"
	case errors.Is(err, slurmrest.ErrUnsupported):
		return "not supported by this cluster's Slurm"
	}
	return "the cluster's slurmrestd did not answer (the portal's operators see why in its log)"
}
