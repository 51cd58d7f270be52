package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/reclaimclient"
)

// JobReclaim is reclaimd's record of a job the caller may read: where it
// stands in reclaimd's state machine and every decision about it; a job
// that has left the snapshot is found in slurmdbd (findAny).
func (s *Core) JobReclaim(ctx context.Context, who auth.Identity, clusterName string, id int64) (api.Reclaim, *Problem) {
	_, _, p := s.findAny(ctx, who, clusterName, id)
	if p != nil {
		return api.Reclaim{}, p
	}
	rcl := s.reclaimd[clusterName]
	if rcl == nil {
		return api.Reclaim{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q has no reclaimd", clusterName),
			"its admins give the cluster a reclaimd_url")
	}
	rec, err := rcl.JobReclaim(ctx, id)
	var se *reclaimclient.StatusError
	var ae *reclaimclient.AnswerError
	switch {
	case errors.As(err, &ae):
		s.log.Warn("reclaimd's answer unreadable", "cluster", clusterName, "job_id", id, "error", err)
		return api.Reclaim{}, problem(http.StatusBadGateway, api.Unavailable, "reclaimd's answer is not a reclaim record of this job", "")
	case errors.Is(err, reclaimclient.ErrNotFound):
		return api.Reclaim{}, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("reclaimd has no record of job %d: it never judged it idle", id), "")
	case errors.As(err, &se):
		s.log.Warn("reclaimd refused", "cluster", clusterName, "job_id", id, "status", se.Status)
		return api.Reclaim{}, problem(http.StatusBadGateway, api.Unavailable, fmt.Sprintf("reclaimd answered %d", se.Status), "try again shortly")
	case err != nil:
		s.log.Warn("reclaimd unreadable", "cluster", clusterName, "job_id", id, "error", err)
		return api.Reclaim{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("reclaimd of cluster %q does not answer", clusterName), "try again shortly")
	}
	var out api.Reclaim
	if err := convert(rec, &out); err != nil || out.JobId != id {
		return api.Reclaim{}, problem(http.StatusBadGateway, api.Unavailable, "reclaimd's answer is not a reclaim record of this job", "")
	}
	if out.Decisions == nil {
		out.Decisions = []map[string]any{}
	}
	return out, nil
}
