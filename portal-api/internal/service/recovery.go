package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// What the overview reads of reclaimd, and how.
const (
	// defaultReclaimdTimeout bounds one read of reclaimd's API
	// (Config.ReclaimdTimeout).
	defaultReclaimdTimeout = 5 * time.Second
	// maxRecoveryBytes bounds each of reclaimd's answers the overview
	// reads (a week of decisions and failures: 10,000 each at most).
	maxRecoveryBytes = 32 << 20
	// reclaimdLimit is the most decisions and failures reclaimd gives in
	// one answer (its own cap).
	reclaimdLimit = 10000
	// maxAttemptEntries bounds the cache of jobs' attempts per cluster.
	maxAttemptEntries = 4096
)

// The overview's windows.
var (
	day  = 24 * time.Hour
	week = 7 * day
)

// reclaimRecord is what the overview reads of one of reclaimd's decision
// records (GET /v1/decisions).
type reclaimRecord struct {
	ID       int64      `json:"id"`
	JobID    int64      `json:"job_id"`
	Account  string     `json:"account"`
	Kind     string     `json:"action"`
	Status   string     `json:"outcome"`
	GPUs     []struct{} `json:"gpus"`
	Evidence struct {
		// JobEnd is when the job's time limit would have ended the run.
		JobEnd time.Time `json:"JobEnd"`
	} `json:"evidence"`
	DecidedAt time.Time  `json:"decided_at"`
	DoneAt    *time.Time `json:"done_at"`
}

// failureRecord is what the overview reads of one of reclaimd's
// classified failures (GET /v1/failures).
type failureRecord struct {
	ID           int64     `json:"id"`
	JobID        int64     `json:"job_id"`
	Account      string    `json:"account"`
	Class        string    `json:"class"`
	Action       string    `json:"action"`
	FailedAt     time.Time `json:"failed_at"`
	ClassifiedAt time.Time `json:"classified_at"`
}

// nodeHealth is what the overview reads of one node of GET
// /v1/nodes/health.
type nodeHealth struct {
	Node            string     `json:"node"`
	State           []string   `json:"state"`
	DrainedByStrata bool       `json:"drained_by_strata"`
	StrataReason    string     `json:"strata_reason"`
	DrainedAt       *time.Time `json:"drained_at"`
}

// reclaimdRead is one read of a cluster's reclaimd: its last week, or why
// it could not be read.
type reclaimdRead struct {
	at       time.Time
	err      error
	records  []reclaimRecord
	failures []failureRecord
	// nodes is nil when reclaimd's node health is off.
	nodes []nodeHealth
}

// attemptsRead is reclaimd's answer about one job's attempts.
type attemptsRead struct {
	at     time.Time
	status int // reclaimd's: 200 or 404
	out    api.Attempts
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

// newReclaimdRequests counts the portal's requests to each cluster's
// reclaimd, which must not grow with the portal's own.
func newReclaimdRequests(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_portal_reclaimd_requests_total",
		Help: "Requests to reclaimd by cluster and result (ok, error): at most one read a poll interval for the overview, one a job for attempts."},
		[]string{"cluster", "result"})
	reg.MustRegister(c)
	return c
}

// readContext bounds one read of reclaimd (all the requests it makes) by
// the timeout, and does not end with the request that asked, so that a
// caller gone away does not leave an error in the cache.
func (s *Server) readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(s.cfg.ReclaimdTimeout, defaultReclaimdTimeout))
}

// reclaimdGet reads one of a cluster's reclaimd's routes: its status and
// body (at most max bytes).
func (s *Server) reclaimdGet(ctx context.Context, cluster, base, path string, max int64) (code int, body []byte, err error) {
	defer func() {
		result := "ok"
		if err != nil || code >= 500 {
			result = "error"
		}
		s.reclaimdRequests.WithLabelValues(cluster, result).Inc()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(body)) > max {
		return 0, nil, fmt.Errorf("%s: answer over %d bytes", path, max)
	}
	return resp.StatusCode, body, nil
}

// recovery returns the cluster's last read of reclaimd, reading it again
// when it is a poll interval old.
func (s *Server) recovery(ctx context.Context, c Cluster) *reclaimdRead {
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
	rd.err = s.readReclaimd(rctx, c.Poller.Name(), c.ReclaimdURL, now, rd)
	if rd.err != nil {
		s.log.Warn("reclaimd unreadable: the overview shows no recovery", "cluster", c.Poller.Name(), "error", rd.err)
	}
	rc.last = rd
	return rd
}

// readReclaimd reads the last week's decisions and failures and the
// nodes' health into rd.
func (s *Server) readReclaimd(ctx context.Context, cluster, base string, now time.Time, rd *reclaimdRead) error {
	get := func(path string, v any, notFound *bool) error {
		code, body, err := s.reclaimdGet(ctx, cluster, base, path, maxRecoveryBytes)
		switch {
		case err != nil:
			return fmt.Errorf("GET %s: %w", path, err)
		case code == http.StatusNotFound && notFound != nil:
			*notFound = true
			return nil
		case code != http.StatusOK:
			return fmt.Errorf("GET %s: reclaimd answered %d", path, code)
		}
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		return nil
	}
	from := now.Add(-week)
	records, err := pages(from, reclaimdLimit, func(since string) ([]reclaimRecord, error) {
		var out struct {
			Decisions []reclaimRecord `json:"decisions"`
		}
		err := get("/v1/decisions?since="+since+"&limit="+strconv.Itoa(reclaimdLimit), &out, nil)
		return out.Decisions, err
	}, func(r reclaimRecord) (int64, time.Time) { return r.ID, r.DecidedAt })
	if err != nil {
		return err
	}
	failures, err := pages(from, reclaimdLimit, func(since string) ([]failureRecord, error) {
		var out struct {
			Failures []failureRecord `json:"failures"`
		}
		err := get("/v1/failures?since="+since+"&limit="+strconv.Itoa(reclaimdLimit), &out, nil)
		return out.Failures, err
	}, func(f failureRecord) (int64, time.Time) { return f.ID, f.ClassifiedAt })
	if err != nil {
		return err
	}
	var health struct {
		Nodes []nodeHealth `json:"nodes"`
	}
	healthOff := false
	if err := get("/v1/nodes/health", &health, &healthOff); err != nil {
		return err
	}
	rd.records, rd.failures = records, failures
	if !healthOff {
		rd.nodes = health.Nodes
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
func pages[T any](from time.Time, limit int, get func(since string) ([]T, error), key func(T) (int64, time.Time)) ([]T, error) {
	var out []T
	seen := map[int64]bool{}
	since := from.UTC().Truncate(time.Second)
	for range maxPages {
		items, err := get(url.QueryEscape(since.Format(time.RFC3339)))
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
	failed   map[int64]bool
	requeued map[int64]bool
	classes  map[string]int
}

func newWindow() *window {
	return &window{failed: map[int64]bool{}, requeued: map[int64]bool{}, classes: map[string]int{}}
}

func (w *window) api() api.RecoveryWindow {
	out := api.RecoveryWindow{ReclaimActions: w.actions, GpuHoursReclaimed: math.Round(w.gpuHours*10) / 10,
		JobsFailed: len(w.failed), JobsRequeued: len(w.requeued), FailureClasses: []api.ClassCount{}}
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

// reclaims reports whether a record is a reclaim carried out: an idle job
// requeued or cancelled.
func (r *reclaimRecord) reclaims() bool {
	return r.JobID > 0 && r.Status == "done" && (r.Kind == "requeue" || r.Kind == "requeue-hold" || r.Kind == "cancel")
}

// notFailures are the classes of runs that ended on purpose.
var notFailures = map[string]bool{"cancelled": true, "reclaimed": true}

// recoveryOverview fills the overview's recovery section of a cluster,
// and each tenant's, from the cluster's last read of reclaimd: only what
// the caller oversees (admin: the whole cluster; else the tenants in
// mine), counted by the account's tenant in the portal's own tenant map.
func (s *Server) recoveryOverview(ctx context.Context, c Cluster, m *tenantmap.Map, admin bool, mine map[string]bool, co *api.ClusterOverview) {
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
		if !r.reclaims() {
			continue
		}
		at := r.DecidedAt
		if r.DoneAt != nil {
			at = *r.DoneAt
		}
		hours := 0.0
		if !r.Evidence.JobEnd.IsZero() && r.Evidence.JobEnd.After(at) {
			hours = float64(len(r.GPUs)) * r.Evidence.JobEnd.Sub(at).Hours()
		}
		add(r.Account, at, func(w *window) { w.actions++; w.gpuHours += hours })
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

// GetJobAttempts gives reclaimd's record of a job's failed runs and
// their retries, for a job the caller may read; reclaimd is asked about
// a job at most once per poll interval.
func (s *Server) GetJobAttempts(w http.ResponseWriter, r *http.Request, clusterName api.ClusterName, id api.JobID) {
	_, c, ok := s.find(w, r, clusterName, id)
	if !ok {
		return
	}
	if c.ReclaimdURL == "" {
		writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("cluster %q has no reclaimd", clusterName),
			"its admins give the cluster a reclaimd_url")
		return
	}
	rc := s.recoveryCache[clusterName]
	rc.mu.Lock()
	now := s.cfg.Now()
	got, cached := rc.attempts[id]
	if !cached || now.Sub(got.at) >= c.Poller.Interval() || now.Before(got.at) {
		rctx, cancel := s.readContext(r.Context())
		var err error
		got, err = s.readAttempts(rctx, clusterName, c.ReclaimdURL, id, now)
		cancel()
		if err != nil {
			rc.mu.Unlock()
			s.log.Warn("reclaimd unreadable", "cluster", clusterName, "job_id", id, "error", err)
			writeError(w, http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("reclaimd of cluster %q does not answer", clusterName), "try again shortly")
			return
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
	}
	rc.mu.Unlock()
	if got.status == http.StatusNotFound {
		writeError(w, http.StatusNotFound, api.NotFound, fmt.Sprintf("reclaimd saw no failed run of job %d", id),
			"a job that never ended other than COMPLETED has no attempts")
		return
	}
	writeJSON(w, http.StatusOK, got.out)
}

// readAttempts asks reclaimd about one job's attempts.
func (s *Server) readAttempts(ctx context.Context, cluster, base string, id int64, now time.Time) (attemptsRead, error) {
	path := "/v1/jobs/" + strconv.FormatInt(id, 10) + "/attempts"
	code, body, err := s.reclaimdGet(ctx, cluster, base, path, maxReclaimBytes)
	switch {
	case err != nil:
		return attemptsRead{}, err
	case code == http.StatusNotFound:
		return attemptsRead{at: now, status: code}, nil
	case code != http.StatusOK:
		return attemptsRead{}, fmt.Errorf("GET %s: reclaimd answered %d", path, code)
	}
	var out api.Attempts
	if err := json.Unmarshal(body, &out); err != nil {
		return attemptsRead{}, fmt.Errorf("GET %s: %w", path, err)
	}
	if out.JobId != id {
		return attemptsRead{}, fmt.Errorf("GET %s: the attempts of job %d, not of this job", path, out.JobId)
	}
	if out.Attempts == nil {
		out.Attempts = []map[string]any{}
	}
	return attemptsRead{at: now, status: code, out: out}, nil
}
