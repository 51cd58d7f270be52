package core

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"errors"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
	"github.com/strata-hpc/strata/portal-api/internal/reclaimclient"
)

// What the overview keeps of reclaimd.
const (
	// reclaimdLimit is the most decisions and failures reclaimd gives in
	// one answer (its own cap).
	reclaimdLimit = reclaimclient.Limit
	// maxAttemptEntries bounds the cache of jobs' attempts per cluster.
	maxAttemptEntries = 4096
)

// The overview's windows.
var (
	day  = 24 * time.Hour
	week = 7 * day
)

// What the overview reads of reclaimd: its API contract.
type (
	reclaimRecord = reclaimapi.Record
	failureRecord = reclaimapi.Failure
	nodeHealth    = reclaimapi.NodeHealth
)

// reclaimdRead is one read of a cluster's reclaimd: its last week, or why
// it could not be read.
type reclaimdRead struct {
	at       time.Time
	err      error
	records  []reclaimRecord
	failures []failureRecord
	// nodes is nil when reclaimd's node health is off.
	nodes []nodeHealth
	// worth is each reclaim's bound and observed worth; nil from a
	// reclaimd that does not serve it.
	worth []reclaimapi.ReclaimWorth
}

// attemptsRead is reclaimd's answer about one job's attempts.
type attemptsRead struct {
	at     time.Time
	status int // reclaimd's: 200 or 404
	out    *reclaimapi.Attempts
}

// recoveryCache holds what the portal last read of a cluster's reclaimd,
// so that reclaimd is asked at most once per poll interval however many
// requests the portal serves.
type recoveryCache struct {
	mu       sync.Mutex // held across a read: concurrent requests wait for it
	last     *reclaimdRead
	attempts map[int64]attemptsRead
}

// recoveryCaches are the caches by cluster name, made at New.
type recoveryCaches map[string]*recoveryCache

func newRecoveryCaches(cs []Cluster) recoveryCaches {
	out := recoveryCaches{}
	for _, c := range cs {
		out[c.Poller.Name()] = &recoveryCache{attempts: map[int64]attemptsRead{}}
	}
	return out
}

// readContext bounds one read of reclaimd (all the requests it makes) by
// the timeout, and does not end with the request that asked, so that a
// caller gone away does not leave an error in the cache.
func (s *Core) readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.reclaimdTimeout())
}

// recovery returns the cluster's last read of reclaimd, reading it again
// when it is a poll interval old.
func (s *Core) recovery(ctx context.Context, c Cluster) *reclaimdRead {
	rc := s.recoveryCache[c.Poller.Name()]
	rc.mu.Lock()
	defer rc.mu.Unlock()
	now := s.cfg.Now()
	if rc.last != nil && now.Sub(rc.last.at) < c.Poller.Interval() && !now.Before(rc.last.at) {
		return rc.last
	}
	rd := &reclaimdRead{at: now}
	rctx, cancel := s.readContext(ctx)
	defer cancel()
	rd.err = s.readReclaimd(rctx, s.reclaimd[c.Poller.Name()], now, rd)
	if rd.err != nil {
		s.log.Warn("reclaimd unreadable: the overview shows no recovery", "cluster", c.Poller.Name(), "error", rd.err)
	}
	rc.last = rd
	return rd
}

// readReclaimd reads the last week's decisions and failures and the
// nodes' health into rd.
func (s *Core) readReclaimd(ctx context.Context, rc *reclaimclient.Client, now time.Time, rd *reclaimdRead) error {
	from := now.Add(-week)
	records, err := pages(from, reclaimdLimit, func(since time.Time) ([]reclaimRecord, error) {
		return rc.Decisions(ctx, since, reclaimdLimit)
	}, func(r reclaimRecord) (int64, time.Time) { return r.ID, r.DecidedAt })
	if err != nil {
		return err
	}
	failures, err := pages(from, reclaimdLimit, func(since time.Time) ([]failureRecord, error) {
		return rc.Failures(ctx, since, reclaimdLimit)
	}, func(f failureRecord) (int64, time.Time) { return f.ID, f.ClassifiedAt })
	if err != nil {
		return err
	}
	worth, err := pages(from, reclaimdLimit, func(since time.Time) ([]reclaimapi.ReclaimWorth, error) {
		return rc.Worth(ctx, since, reclaimdLimit)
	}, func(w reclaimapi.ReclaimWorth) (int64, time.Time) { return w.RecordID, w.At })
	if err != nil && !errors.Is(err, reclaimclient.ErrNotFound) {
		return err
	}
	if err == nil && worth == nil {
		worth = []reclaimapi.ReclaimWorth{}
	}
	health, err := rc.NodesHealth(ctx)
	healthOff := errors.Is(err, reclaimclient.ErrNotFound)
	if err != nil && !healthOff {
		return err
	}
	rd.records, rd.failures, rd.worth = records, failures, worth
	if !healthOff {
		rd.nodes = health
		if rd.nodes == nil {
			rd.nodes = []nodeHealth{}
		}
	}
	return nil
}

// maxPages bounds how many answers of reclaimdLimit items one read of
// reclaimd's decisions or failures takes.
const maxPages = 10

// pages reads a list reclaimd gives oldest first, limit at a time, from `from` on: each next answer from the second of the last item
// (since= has whole seconds), the items already read left out by their
// id. It stops at a short answer, at one that brings nothing new, or
// after maxPages.
func pages[T any](from time.Time, limit int, get func(since time.Time) ([]T, error), key func(T) (int64, time.Time)) ([]T, error) {
	var out []T
	seen := map[int64]bool{}
	since := from.UTC().Truncate(time.Second)
	for range maxPages {
		items, err := get(since)
		if err != nil {
			return nil, err
		}
		added := 0
		for _, it := range items {
			id, at := key(it)
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, it)
			added++
			if at.After(since) {
				since = at.UTC().Truncate(time.Second)
			}
		}
		if len(items) < limit || added == 0 {
			break
		}
	}
	return out, nil
}

// window adds up what reclaimd did over [since, now].
type window struct {
	actions  int
	gpuHours float64
	// observed and gain are the observed GPU-hours and the start gain
	// (hours) of the reclaims; worth is false when reclaimd does not
	// give them.
	observed, gain float64
	worth          bool
	failed         map[int64]bool
	requeued       map[int64]bool
	classes        map[string]int
}

func newWindow() *window {
	return &window{failed: map[int64]bool{}, requeued: map[int64]bool{}, classes: map[string]int{}}
}

func (w *window) api() api.RecoveryWindow {
	out := api.RecoveryWindow{ReclaimActions: w.actions, GpuHoursReclaimed: math.Round(w.gpuHours*10) / 10,
		JobsFailed: len(w.failed), JobsRequeued: len(w.requeued), FailureClasses: []api.ClassCount{}}
	if w.worth {
		out.GpuHoursObserved = ptr(math.Round(w.observed*10) / 10)
		out.StartGainHours = ptr(math.Round(w.gain*10) / 10)
	}
	for c, n := range w.classes {
		out.FailureClasses = append(out.FailureClasses, api.ClassCount{Class: c, Count: n})
	}
	slices.SortFunc(out.FailureClasses, func(a, b api.ClassCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Class, b.Class))
	})
	return out
}

// windows are the 24-hour and 7-day windows of one tenant (or of all).
type windows struct{ day, week *window }

func newWindows() *windows { return &windows{newWindow(), newWindow()} }

func (ws *windows) api() api.RecoveryWindows {
	return api.RecoveryWindows{Last24h: ws.day.api(), Last7d: ws.week.api()}
}

// notFailures are the classes of runs that ended on purpose.
var notFailures = map[string]bool{"cancelled": true, "reclaimed": true}

// recoveryOverview fills the overview's recovery section of a cluster,
// and each tenant's, from the cluster's last read of reclaimd: only what
// the caller oversees (admin: the whole cluster; else the tenants in
// mine), counted by the account's tenant in the portal's own tenant map.
func (s *Core) recoveryOverview(ctx context.Context, c Cluster, m *tenantmap.Map, admin bool, mine map[string]bool, co *api.ClusterOverview) {
	if c.ReclaimdURL == "" {
		co.Recovery = &api.RecoveryOverview{Unavailable: ptr("the cluster has no reclaimd: its admins give it a reclaimd_url")}
		return
	}
	rd := s.recovery(ctx, c)
	if rd.err != nil {
		co.Recovery = &api.RecoveryOverview{AsOf: ptr(rd.at), Unavailable: ptr("reclaimd does not answer: try again shortly; the rest of the overview is current")}
		return
	}
	recoveryOf(rd, m, admin, mine, s.cfg.Now(), co)
}

// recoveryOf counts a read of reclaimd into co and its tenants as of now:
// what the caller oversees alone (see recoveryOverview).
func recoveryOf(rd *reclaimdRead, m *tenantmap.Map, admin bool, mine map[string]bool, now time.Time, co *api.ClusterOverview) {
	tenantOf := func(account string) (string, bool) {
		t := "account:" + account
		if o, ok := m.Lookup(account); ok {
			t = o.Tenant
		}
		return t, admin || mine[t]
	}
	all, by := newWindows(), map[string]*windows{}
	worth := rd.worth != nil
	newWindows := func() *windows {
		ws := newWindows()
		ws.day.worth, ws.week.worth = worth, worth
		return ws
	}
	all.day.worth, all.week.worth = worth, worth
	add := func(account string, at time.Time, f func(*window)) {
		t, ok := tenantOf(account)
		if !ok || at.Before(now.Add(-week)) {
			return
		}
		ws := by[t]
		if ws == nil {
			ws = newWindows()
			by[t] = ws
		}
		for _, w := range []*windows{all, ws} {
			f(w.week)
			if !at.Before(now.Add(-day)) {
				f(w.day)
			}
		}
	}
	for i := range rd.records {
		r := &rd.records[i]
		if !r.Reclaims() {
			continue
		}
		at := r.DecidedAt
		if r.DoneAt != nil {
			at = *r.DoneAt
		}
		hours := 0.0
		// A record whose evidence does not read frees no hours it can say.
		if ev, err := r.ParseEvidence(); err == nil && !ev.JobEnd.IsZero() && ev.JobEnd.After(at) {
			hours = float64(len(r.GPUs)) * ev.JobEnd.Sub(at).Hours()
		}
		add(r.Account, at, func(w *window) { w.actions++; w.gpuHours += hours })
	}
	for _, rw := range rd.worth {
		gain := map[int64]float64{}
		for _, h := range rw.HandedTo {
			gain[h.JobID] = max(gain[h.JobID], h.StartGainSeconds)
		}
		hours := 0.0
		for _, g := range gain {
			hours += g / 3600
		}
		add(rw.Account, rw.At, func(w *window) { w.observed += rw.ObservedGPUSeconds / 3600; w.gain += hours })
	}
	for _, f := range rd.failures {
		if notFailures[f.Class] {
			continue
		}
		add(f.Account, f.FailedAt, func(w *window) {
			w.failed[f.JobID] = true
			w.classes[f.Class]++
			if f.Action == "retry" {
				w.requeued[f.JobID] = true
			}
		})
	}
	d, wk := all.day.api(), all.week.api()
	co.Recovery = &api.RecoveryOverview{Available: true, AsOf: ptr(rd.at), Last24h: &d, Last7d: &wk}
	if admin && rd.nodes != nil {
		drained := []api.DrainedNode{}
		for _, n := range rd.nodes {
			if n.DrainedByStrata {
				drained = append(drained, api.DrainedNode{Name: n.Node, Reason: n.StrataReason, DrainedAt: n.DrainedAt, State: ptr(nonNil(n.State))})
			}
		}
		co.Recovery.NodesDrained = &drained
	}
	seen := map[string]bool{}
	for i := range co.Tenants {
		to := &co.Tenants[i]
		seen[to.Tenant] = true
		ws := by[to.Tenant]
		if ws == nil {
			ws = newWindows()
		}
		to.Recovery = ptr(ws.api())
	}
	for t, ws := range by {
		if seen[t] || t == "" || strings.HasPrefix(t, "account:") {
			continue // accounts outside the policy are in the cluster's counts alone
		}
		co.Tenants = append(co.Tenants, api.TenantOverview{Tenant: t, TopReasons: []api.ReasonCount{}, Recovery: ptr(ws.api())})
	}
	slices.SortFunc(co.Tenants, func(a, b api.TenantOverview) int { return cmp.Compare(a.Tenant, b.Tenant) })
}

// JobAttempts is reclaimd's record of a job's failed runs and their
// retries, for a job the caller may read; reclaimd is asked about a job
// at most once per poll interval.
//
// A finished job that has left the snapshot (past slurmctld's MinJobAge)
// keeps its attempts: slurmdbd's record of the job names its owner
// (findAny); where slurmdbd has none, reclaimd's record names the job's account and user,
// and the caller reads it only when rbac lets them read that job, with the
// same 404 as a job that does not exist otherwise.
func (s *Core) JobAttempts(ctx context.Context, who auth.Identity, clusterName string, id int64) (api.Attempts, *Problem) {
	_, c, p := s.findAny(ctx, who, clusterName, id)
	gone := false
	if p != nil {
		cl, ok := s.byName[clusterName]
		if !ok || inSnapshot(cl, id) || len(rbac.Grants(cl.Tenants(), who.User)) == 0 {
			return api.Attempts{}, p // not the caller's, or no cluster: reclaimd is not asked
		}
		c, gone = cl, true
	}
	notFound := p
	rcl := s.reclaimd[clusterName]
	if rcl == nil {
		if gone {
			return api.Attempts{}, notFound
		}
		return api.Attempts{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q has no reclaimd", clusterName),
			"its admins give the cluster a reclaimd_url")
	}
	got, p := s.attempts(ctx, c, rcl, id)
	if p != nil {
		return api.Attempts{}, p
	}
	if gone && (got.status == http.StatusNotFound || !mayReadAttempts(c.Tenants(), who.User, got.out)) {
		return api.Attempts{}, notFound
	}
	if got.status == http.StatusNotFound {
		return api.Attempts{}, problem(http.StatusNotFound, api.NotFound, fmt.Sprintf("reclaimd saw no failed run of job %d", id),
			"a job that never ended other than COMPLETED has no attempts")
	}
	var out api.Attempts
	if err := convert(got.out, &out); err != nil {
		return api.Attempts{}, problem(http.StatusBadGateway, api.Unavailable, "reclaimd's answer is not the attempts of this job", "")
	}
	if out.Attempts == nil {
		out.Attempts = []map[string]any{}
	}
	return out, nil
}

// inSnapshot reports whether the cluster's snapshot holds job id (of
// whoever it is).
func inSnapshot(c Cluster, id int64) bool {
	snap := c.Poller.Snapshot()
	return snap != nil && slices.ContainsFunc(snap.Jobs, func(j slurmrest.Job) bool { return j.ID == id })
}

// mayReadAttempts reports whether user may read the job of every attempt
// reclaimd recorded: its owner is the attempt's user, account and the
// account's tenant and project in m (an account outside the policy, as for
// a job: its own tenant, which only a cluster admin reads). None is no.
func mayReadAttempts(m *tenantmap.Map, user string, a *reclaimapi.Attempts) bool {
	if a == nil || len(a.Attempts) == 0 {
		return false
	}
	for _, at := range a.Attempts {
		t := rbac.Target{User: at.User, Tenant: "account:" + at.Account}
		if o, ok := m.Lookup(at.Account); ok {
			t.Tenant, t.Project = o.Tenant, o.Project
		}
		if at.Account == "" || !rbac.Allowed(m, user, rbac.ReadJobs, t) {
			return false
		}
	}
	return true
}

// attempts is reclaimd's answer about a job's attempts, from the cache
// when it is younger than the cluster's poll interval.
func (s *Core) attempts(ctx context.Context, c Cluster, rcl *reclaimclient.Client, id int64) (attemptsRead, *Problem) {
	clusterName := c.Poller.Name()
	rc := s.recoveryCache[clusterName]
	rc.mu.Lock()
	defer rc.mu.Unlock()
	now := s.cfg.Now()
	got, cached := rc.attempts[id]
	if cached && now.Sub(got.at) < c.Poller.Interval() && !now.Before(got.at) {
		return got, nil
	}
	rctx, cancel := s.readContext(ctx)
	defer cancel()
	out, err := rcl.Attempts(rctx, id)
	switch {
	case errors.Is(err, reclaimclient.ErrNotFound):
		got = attemptsRead{at: now, status: http.StatusNotFound}
	case err != nil:
		s.log.Warn("reclaimd unreadable", "cluster", clusterName, "job_id", id, "error", err)
		return attemptsRead{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("reclaimd of cluster %q does not answer", clusterName), "try again shortly")
	default:
		got = attemptsRead{at: now, status: http.StatusOK, out: out}
	}
	if len(rc.attempts) >= maxAttemptEntries {
		for k, v := range rc.attempts {
			if now.Sub(v.at) >= c.Poller.Interval() {
				delete(rc.attempts, k)
			}
		}
		if len(rc.attempts) >= maxAttemptEntries {
			clear(rc.attempts)
		}
	}
	rc.attempts[id] = got
	return got, nil
}

// convert reads a contract value into the API's type of the same JSON.
func convert(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}
