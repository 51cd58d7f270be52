package web

import (
	"context"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/core"
)

// CoreSource is the portal's core as the pages' Source: every call goes
// to the core with the page session's identity, so the pages see and do
// exactly what the API would let the same caller.
func CoreSource(c *core.Core) Source { return coreSource{c: c} }

type coreSource struct{ c *core.Core }

// maxJobs is the most jobs My jobs lists (the core's page limit).
const maxJobs = 1000

// errOf turns the core's problem into an error, keeping a nil problem
// nil (a nil *Problem in an error interface is not a nil error).
func errOf(p *core.Problem) error {
	if p == nil {
		return nil
	}
	return p
}

func (s coreSource) Me(ctx context.Context, id auth.Identity) (api.Me, error) {
	return s.c.Me(ctx, id), nil
}

func (s coreSource) Jobs(ctx context.Context, id auth.Identity) (api.JobPage, error) {
	user, limit := id.User, maxJobs
	page, p := s.c.Jobs(ctx, id, api.ListJobsParams{User: &user, Limit: &limit})
	return page, errOf(p)
}

func (s coreSource) Job(ctx context.Context, id auth.Identity, cluster string, job int64) (api.Job, error) {
	j, p := s.c.Job(ctx, id, cluster, job)
	return j, errOf(p)
}

func (s coreSource) JobGPU(ctx context.Context, id auth.Identity, cluster string, job int64) (api.JobGpuUse, error) {
	u, p := s.c.JobGPU(ctx, id, cluster, job)
	return u, errOf(p)
}

func (s coreSource) JobOutput(ctx context.Context, id auth.Identity, cluster string, job int64) (api.JobOutput, error) {
	o, p := s.c.JobOutput(ctx, id, cluster, job)
	return o, errOf(p)
}

func (s coreSource) JobReclaim(ctx context.Context, id auth.Identity, cluster string, job int64) (api.Reclaim, error) {
	r, p := s.c.JobReclaim(ctx, id, cluster, job)
	return r, errOf(p)
}

func (s coreSource) Queue(ctx context.Context, id auth.Identity) (api.Queue, error) {
	q, p := s.c.Queue(ctx, id, api.GetQueueParams{})
	return q, errOf(p)
}

func (s coreSource) Control(ctx context.Context, id auth.Identity, cluster string, job int64, action api.JobAction) error {
	_, p := s.c.ControlJob(ctx, id, cluster, job, action)
	return errOf(p)
}

func (s coreSource) Overview(ctx context.Context, id auth.Identity) (api.Overview, error) {
	o, p := s.c.Overview(ctx, id)
	return o, errOf(p)
}

func (s coreSource) Projects(ctx context.Context, id auth.Identity) (api.ProjectList, error) {
	l, p := s.c.Projects(ctx, id, "")
	return l, errOf(p)
}
