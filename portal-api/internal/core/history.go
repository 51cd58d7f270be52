package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/dcgmprom"
	"github.com/strata-hpc/strata/internal/hostlist"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
)

// Bounds of a history request.
const (
	historyDefault = 7 * 24 * time.Hour
	historyMax     = 31 * 24 * time.Hour
	maxHistoryJobs = 1000
)

// JobHistory lists the jobs that ended in a window, from each cluster's
// slurmdbd, that the caller may read, latest end first. slurmdbd is asked
// only for the accounts the caller may read (every account for a cluster
// admin), and each job it gives is checked by rbac.Allowed as a live
// job is.
func (s *Core) JobHistory(ctx context.Context, who auth.Identity, p api.ListJobHistoryParams) (api.JobHistory, *Problem) {
	to := s.cfg.Now()
	if p.To != nil {
		to = *p.To
	}
	from := to.Add(-historyDefault)
	if p.From != nil {
		from = *p.From
	}
	if !from.Before(to) || to.Sub(from) > historyMax {
		return api.JobHistory{}, problem(http.StatusBadRequest, api.BadRequest,
			fmt.Sprintf("the window from %s to %s is not a window of at most 31 days", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339)),
			"give from before to, at most 31 days apart")
	}
	only, project := deref(p.Cluster), deref(p.Project)
	if only != "" {
		if _, ok := s.byName[only]; !ok {
			return api.JobHistory{}, noCluster(only)
		}
	}
	out := api.JobHistory{From: from.UTC(), To: to.UTC(), Jobs: []api.FinishedJob{}}
	var unavailable []string
	for _, c := range s.clusters {
		name := c.Poller.Name()
		if only != "" && name != only {
			continue
		}
		jobs, err := s.history(ctx, c, who.User, project, from, to)
		if err != nil {
			s.log.Warn("slurmdbd history unreadable", "cluster", name, "error", err)
			unavailable = append(unavailable, name)
			continue
		}
		out.Jobs = append(out.Jobs, jobs...)
	}
	slices.SortFunc(out.Jobs, func(a, b api.FinishedJob) int {
		return cmp.Or(b.EndTime.Compare(a.EndTime), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(b.Id, a.Id))
	})
	if len(out.Jobs) > maxHistoryJobs {
		out.Jobs, out.Truncated = out.Jobs[:maxHistoryJobs], ptr(true)
	}
	if unavailable != nil {
		out.UnavailableClusters = &unavailable
	}
	return out, nil
}

// readableAccounts are the accounts of m whose jobs user may read; all is
// true for a cluster admin, who reads every account's (those outside the
// policy too). With project set, only that project's accounts.
func readableAccounts(m *tenantmap.Map, user, project string) (accounts []string, all bool) {
	grants := rbac.Grants(m, user)
	if len(grants) == 0 || m == nil {
		return nil, false
	}
	all = rbac.AllowedBy(grants, user, rbac.ReadJobs, owner(m, &slurmrest.Job{}))
	for _, t := range m.Tenants {
		if project == "" && (all || rbac.AllowedBy(grants, user, rbac.ReadJobs, rbac.Target{Tenant: t.Name})) {
			accounts = append(accounts, t.Account)
		}
		for _, p := range t.Projects {
			if (project == "" || p.Name == project) && (all || rbac.AllowedBy(grants, user, rbac.ReadJobs, rbac.Target{Tenant: t.Name, Project: p.Name})) {
				accounts = append(accounts, p.Account)
			}
		}
	}
	return accounts, all && project == ""
}

// history is one cluster's finished jobs of the window that user may read.
func (s *Core) history(ctx context.Context, c Cluster, user, project string, from, to time.Time) ([]api.FinishedJob, error) {
	m := c.Tenants()
	accounts, all := readableAccounts(m, user, project)
	if len(accounts) == 0 && !all {
		return nil, nil // nothing the caller may read: slurmdbd is not asked
	}
	cl, err := c.Poller.Client(ctx)
	if err != nil {
		return nil, err
	}
	f := slurmrest.HistoryFilter{From: from, To: to}
	if !all {
		f.Accounts = accounts
	}
	got, err := cl.History(ctx, f)
	if err != nil {
		return nil, err
	}
	grants := rbac.Grants(m, user)
	name := c.Poller.Name()
	var out []api.FinishedJob
	for _, fj := range got {
		if !fj.Ended() || fj.EndTime.Before(from) || fj.EndTime.After(to) {
			continue
		}
		j := liveOf(fj)
		o := owner(m, &j)
		if !rbac.AllowedBy(grants, user, rbac.ReadJobs, o) || project != "" && o.Project != project {
			continue
		}
		out = append(out, finishedOf(name, fj, o))
	}
	if c.Prometheus != nil && len(out) > 0 {
		s.meanUtil(ctx, c, out, from, to)
	}
	return out, nil
}

func finishedOf(cluster string, fj slurmrest.FinishedJob, o rbac.Target) api.FinishedJob {
	out := api.FinishedJob{Cluster: cluster, Id: fj.ID, Name: fj.Name, User: fj.User, Account: fj.Account,
		Tenant: o.Tenant, Project: o.Project, Partition: fj.Partition, State: fj.State.Base(),
		ExitCode: ptr(fj.ExitCode), SubmitTime: nonZeroTime(fj.SubmitTime), StartTime: nonZeroTime(fj.StartTime),
		EndTime: fj.EndTime.UTC(), ElapsedSeconds: int64(fj.Elapsed / time.Second), Gpus: fj.GPUs(),
		GpuHours: math.Round(fj.GPUHours()*1000) / 1000}
	if strings.HasPrefix(out.Tenant, "account:") {
		out.Tenant = ""
	}
	if fj.QOS != "" {
		out.Qos = ptr(fj.QOS)
	}
	if fj.ArrayJobID > 0 {
		out.ArrayJobId = ptr(fj.ArrayJobID)
		if fj.ArrayTaskID >= 0 {
			out.ArrayTaskId = ptr(fj.ArrayTaskID)
		}
	}
	return out
}

// meanUtil sets each job's mean GPU utilisation over its run where the
// cluster's Prometheus has it: dcgm-exporter's HPC job mapping labels a
// GPU's series with the job on it (dcgmprom.JobLabel), so the mean over
// the window of the series labelled with a job is the mean over its run.
// One query for all the jobs; a failure leaves the means out.
func (s *Core) meanUtil(ctx context.Context, c Cluster, jobs []api.FinishedJob, from, to time.Time) {
	p := c.Prometheus
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		if j.Gpus > 0 {
			ids = append(ids, strconv.FormatInt(j.Id, 10))
		}
	}
	if len(ids) == 0 {
		return
	}
	q := fmt.Sprintf("avg by (%s) (avg_over_time(%s{%s=~%s}[%s]))", dcgmprom.JobLabel, p.utilMetric(), dcgmprom.JobLabel,
		strconv.Quote(strings.Join(ids, "|")), promDuration(to.Sub(from)))
	series, err := s.ask(ctx, p, q, time.Time{}, to, 0)
	if err != nil {
		s.log.Warn("prometheus query failed", "cluster", c.Poller.Name(), "error", err)
		return
	}
	mean := map[int64]float64{}
	for _, ps := range series {
		id, err := strconv.ParseInt(ps.labels[dcgmprom.JobLabel], 10, 64)
		if err != nil || len(ps.points) == 0 || math.IsNaN(ps.points[0].Util) {
			continue
		}
		mean[id] = ps.points[0].Util
	}
	for i := range jobs {
		if u, ok := mean[jobs[i].Id]; ok && jobs[i].Gpus > 0 {
			jobs[i].MeanUtil = ptr(math.Round(u*10) / 10)
		}
	}
}

// liveOf is a finished job in the snapshot's shape, for what reads a job
// (its owner, its page) the same way whether slurmctld or slurmdbd gave it.
func liveOf(fj slurmrest.FinishedJob) slurmrest.Job {
	j := slurmrest.Job{ID: fj.ID, Name: fj.Name, User: fj.User, Account: fj.Account, Partition: fj.Partition, QOS: fj.QOS,
		State: fj.State, StateReason: fj.StateReason, SubmitTime: fj.SubmitTime, StartTime: fj.StartTime, EndTime: fj.EndTime,
		ExitCode: fj.ExitCode, ExitSignal: fj.ExitSignal, NodeList: fj.NodeList, WorkDir: fj.WorkDir,
		ArrayJobID: fj.ArrayJobID, ArrayTaskID: fj.ArrayTaskID, HetJobID: fj.HetJobID, HetJobOffset: fj.HetJobOffset}
	if nodes, err := hostlist.Expand(fj.NodeList); err == nil && fj.NodeList != "" {
		j.Nodes = nodes
	}
	return j
}

// findAny is find, and for a job no longer in the cluster's snapshot
// (past slurmctld's MinJobAge), slurmdbd's record of it: the caller reads
// it when rbac lets them read that job, with the same problem as a job
// that does not exist otherwise.
func (s *Core) findAny(ctx context.Context, who auth.Identity, clusterName string, id int64) (view, Cluster, *Problem) {
	v, c, p := s.find(who, clusterName, id)
	if p == nil {
		return v, c, nil
	}
	cl, ok := s.byName[clusterName]
	if !ok || inSnapshot(cl, id) {
		return v, c, p
	}
	m := cl.Tenants()
	if len(rbac.Grants(m, who.User)) == 0 {
		return v, c, p // no role on the cluster: slurmdbd is not asked
	}
	rctx, cancel := s.readContext(ctx)
	defer cancel()
	client, err := cl.Poller.Client(rctx)
	if err != nil {
		return v, c, p
	}
	fj, err := client.FinishedJob(rctx, id)
	if err != nil {
		if !errors.Is(err, slurmrest.ErrNotFound) {
			s.log.Warn("slurmdbd unreadable", "cluster", clusterName, "job_id", id, "error", err)
		}
		return v, c, p
	}
	if !fj.Ended() {
		return v, c, p
	}
	j := liveOf(fj)
	o := owner(m, &j)
	if !rbac.Allowed(m, who.User, rbac.ReadJobs, o) {
		return v, c, p
	}
	return view{cluster: clusterName, job: &j, owner: o, class: classOf(&j), finished: &fj}, cl, nil
}
