package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/rbac"
	"github.com/strata-hpc/strata/portal-api/internal/session"
	"github.com/strata-hpc/strata/portal-api/internal/sessionproxy"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// Job states in which a session's job may still run.
var openStates = []string{"PENDING", "RUNNING", "SUSPENDED"}

// noSession is the problem of a session that is not the caller's, or
// does not exist: the same.
func noSession(id string) *Problem {
	return problem(http.StatusNotFound, api.SessionNotFound, fmt.Sprintf("no session %q", id), "GET /v1/sessions lists yours")
}

// sessionAt is a session with its cluster and its job in the cluster's
// snapshot now (nil: not in it).
type sessionAt struct {
	rec store.Session
	c   Cluster
	job *slurmrest.Job
}

// ownSession returns the caller's session id. Another user's answers
// exactly as one that does not exist: ErrNotFound.
func (s *Core) ownSession(ctx context.Context, who auth.Identity, id string) (sessionAt, error) {
	rec, err := s.cfg.Store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sessionAt{}, sessionproxy.ErrNotFound
	}
	if err != nil {
		return sessionAt{}, err
	}
	c, ok := s.byName[rec.Cluster]
	if !ok || rec.User != who.User {
		return sessionAt{}, sessionproxy.ErrNotFound
	}
	at := sessionAt{rec: rec, c: c, job: sessionJob(c, rec)}
	m := c.Tenants()
	target := rbac.Target{User: rec.User}
	if at.job != nil {
		target = owner(m, at.job)
	} else if o, ok := m.Lookup(rec.Account); ok {
		target.Tenant, target.Project = o.Tenant, o.Project
	}
	if !rbac.CanControl(m, who.User, target) {
		return sessionAt{}, sessionproxy.ErrNotFound
	}
	return at, nil
}

// sessionJob is the session's job in the cluster's snapshot, nil when it
// is not there (not yet polled, or gone): only a job of the session's
// user, so a job id Slurm gave again later is not taken for it.
func sessionJob(c Cluster, rec store.Session) *slurmrest.Job {
	snap := c.Poller.Snapshot()
	if snap == nil || rec.JobID == 0 {
		return nil
	}
	for i := range snap.Jobs {
		if j := &snap.Jobs[i]; j.ID == rec.JobID && j.User == rec.User {
			return j
		}
	}
	return nil
}

// owned answers the routes' lookup: the session, or the problem.
func (s *Core) owned(ctx context.Context, who auth.Identity, id string) (sessionAt, *Problem) {
	at, err := s.ownSession(ctx, who, id)
	if errors.Is(err, sessionproxy.ErrNotFound) {
		return at, noSession(id)
	}
	if err != nil {
		s.log.Error("session not read", "session_id", id, "error", err)
		return at, problem(http.StatusInternalServerError, api.Internal, "the session could not be read", "try again; tell the portal's admins if it persists")
	}
	return at, nil
}

// sessionDir is where session id of user keeps its connection file.
func sessionDir(c Cluster, user, id string) string {
	root := c.SessionRoot
	if root == "" {
		root = path.Join(cmp.Or(c.WorkDir, "/tmp"), ".strata", "sessions")
	}
	return path.Join(strings.ReplaceAll(root, "{user}", user), id)
}

// CreateSession starts a session: a template of type session through the
// one submission path, with the session's id and folder in the job's
// environment, recorded before its job is submitted.
func (s *Core) CreateSession(ctx context.Context, who auth.Identity, req api.SubmissionRequest) (api.Session, *Problem) {
	id, err := store.NewSessionID()
	if err != nil {
		return api.Session{}, problem(http.StatusInternalServerError, api.Internal, "no session id could be made", "try again")
	}
	c := s.byName[req.Cluster]
	rec := store.Session{ID: id, User: who.User, Cluster: req.Cluster, Template: req.Template, Dir: sessionDir(c, who.User, id)}
	if s.cfg.Templates != nil {
		if set := s.cfg.Templates(); set != nil {
			if t, ok := set.Get(req.Template); ok {
				rec.Server, rec.IdleLimit = string(t.Server), cmp.Or(t.IdleLimit.Std(), c.SessionIdleLimit)
			}
		}
	}
	recorded := false
	out, p := s.submit(ctx, who, req, submitOpts{want: templates.TypeSession,
		env: []string{"STRATA_SESSION_ID=" + id, "STRATA_SESSION_DIR=" + rec.Dir},
		before: func(account string) error {
			rec.Account = account
			if err := s.cfg.Store.CreateSession(ctx, rec); err != nil {
				return err
			}
			recorded = true
			return nil
		},
		after: func(jobID int64, err error) {
			if !recorded {
				return
			}
			if err != nil {
				if _, eerr := s.cfg.Store.EndSession(ctx, id, "Slurm refused the job: "+err.Error(), s.cfg.Now()); eerr != nil {
					s.log.Error("session end not recorded", "session_id", id, "error", eerr)
				}
				return
			}
			if err := s.cfg.Store.SetSessionJob(ctx, id, jobID); err != nil {
				s.log.Error("session job not recorded", "session_id", id, "job_id", jobID, "error", err)
			}
		}})
	if p != nil {
		return api.Session{}, p
	}
	s.log.Info("session started", "session_id", id, "cluster", req.Cluster, "template", req.Template, "user", who.User, "job_id", out.JobId)
	rec, err = s.cfg.Store.GetSession(ctx, id)
	if err != nil {
		s.log.Error("session not read back", "session_id", id, "error", err)
		return api.Session{}, problem(http.StatusInternalServerError, api.Internal, "the session was started but could not be read back", "GET /v1/sessions lists it")
	}
	return s.sessionOf(ctx, sessionAt{rec: rec, c: c}, false), nil
}

// Sessions lists the caller's sessions: those open, and those ended
// within Config.KeepEnded.
func (s *Core) Sessions(ctx context.Context, who auth.Identity) (api.SessionList, *Problem) {
	recs, err := s.cfg.Store.Sessions(ctx, who.User, s.cfg.Now().Add(-cmp.Or(s.cfg.KeepEnded, 24*time.Hour)))
	if err != nil {
		s.log.Error("sessions not read", "user", who.User, "error", err)
		return api.SessionList{}, problem(http.StatusInternalServerError, api.Internal, "the sessions could not be read", "try again; tell the portal's admins if it persists")
	}
	out := api.SessionList{Sessions: []api.Session{}}
	var stale []string
	var ats []sessionAt
	for _, rec := range recs {
		at, err := s.ownSession(ctx, who, rec.ID)
		if err != nil {
			continue // no longer the caller's to see (a project left, a cluster gone)
		}
		if at.c.Poller.Health().Stale && !slices.Contains(stale, rec.Cluster) {
			stale = append(stale, rec.Cluster)
		}
		out.Sessions = append(out.Sessions, s.sessionOf(ctx, at, false))
		ats = append(ats, at) // its job runs or not as settled: settle ends only a job that does not
	}
	s.reclaimNexts(ctx, out.Sessions, ats)
	if len(stale) > 0 {
		out.StaleClusters = &stale
	}
	return out, nil
}

// Session is one of the caller's sessions, with reclaimd's latest
// decision on a session with GPUs.
func (s *Core) Session(ctx context.Context, who auth.Identity, id string) (api.Session, *Problem) {
	at, p := s.owned(ctx, who, id)
	if p != nil {
		return api.Session{}, p
	}
	return s.sessionOf(ctx, at, true), nil
}

// hasGPUs says whether the session's job holds GPUs: such a session is
// reclaimd's to judge idle, by its GPUs' use.
func hasGPUs(j *slurmrest.Job) bool {
	if j == nil {
		return false
	}
	if len(j.GPUs) > 0 {
		return true
	}
	for _, t := range j.TRESAlloc {
		if (t.Type == "gres" && strings.HasPrefix(t.Name, "gpu")) && t.Count > 0 {
			return true
		}
	}
	return strings.Contains(j.TRESPerNode, "gpu")
}

// sessionOf is the API's view of a session. It records what it learns on
// the way: the end of a job that ended, the pin of a server that wrote its
// connection file. detail asks reclaimd too (one request).
func (s *Core) sessionOf(ctx context.Context, at sessionAt, detail bool) api.Session {
	at = s.settle(ctx, at)
	rec, j := at.rec, at.job
	out := api.Session{Id: rec.ID, Cluster: rec.Cluster, Template: rec.Template, Server: api.SessionServer(rec.Server), Gpus: []string{},
		Url: sessionproxy.Prefix + rec.ID + "/proxy/", CreatedAt: rec.Created, IdleJudge: api.Portal, EndedAt: nonZeroTime(rec.Ended)}
	if rec.Account != "" {
		out.Account = ptr(rec.Account)
	}
	if rec.JobID > 0 {
		out.JobId = ptr(rec.JobID)
	}
	if rec.EndReason != "" {
		out.EndReason = ptr(rec.EndReason)
	}
	out.State = sessionState(rec, j)
	gpus := hasGPUs(j) || strings.HasPrefix(rec.EndReason, reclaimdPrefix)
	if gpus {
		out.IdleJudge = api.Reclaimd
	}
	if j != nil {
		jv := s.jobOf(view{cluster: rec.Cluster, job: j})
		out.Gpus, out.TimeLimitSeconds, out.TimeLeftSeconds = jv.Gpus, jv.TimeLimitSeconds, jv.TimeLeftSeconds
		if len(j.Nodes) > 0 {
			out.Node = ptr(j.Nodes[0])
		}
		if jv.Reason != nil {
			out.Reason = jv.Reason
			if x := s.indexes.of(at.c); x != nil && detail {
				out.Reason = x.reason(j)
			}
		}
		out.Ready = j.Running() && rec.Host != "" && rec.Ended.IsZero()
	}
	if !gpus && rec.IdleLimit > 0 {
		out.IdleLimitSeconds = ptr(int64(rec.IdleLimit / time.Second))
		out.LastActivity = nonZeroTime(rec.LastActivity)
		if j != nil && j.Running() && rec.Ended.IsZero() {
			out.IdleSeconds = ptr(int64(s.cfg.Now().Sub(lastActive(rec, j)) / time.Second))
		}
	}
	if detail && gpus && at.c.ReclaimdURL != "" && rec.JobID > 0 {
		d, next, ok, _ := s.reclaimAnswer(ctx, at.c, rec.JobID)
		if ok {
			out.Reclaim = &d
		}
		if running(rec, j) {
			out.ReclaimNext = next
		}
	}
	return out
}

// running says whether a session's job runs, the session not ended.
func running(rec store.Session, j *slurmrest.Job) bool {
	return j != nil && j.Running() && rec.Ended.IsZero()
}

// reclaimNexts asks reclaimd, for each running session with GPUs of a
// list, what it does next if they stay idle: at once for all, each
// bounded as a session's answer is.
func (s *Core) reclaimNexts(ctx context.Context, list []api.Session, ats []sessionAt) {
	var wg sync.WaitGroup
	for i := range list {
		at := ats[i]
		if list[i].IdleJudge != api.Reclaimd || at.c.ReclaimdURL == "" || at.rec.JobID == 0 || !running(at.rec, at.job) {
			continue
		}
		wg.Go(func() {
			_, next, _, _ := s.reclaimAnswer(ctx, at.c, at.rec.JobID)
			list[i].ReclaimNext = next
		})
	}
	wg.Wait()
}

// sessionState is a session's state as the API and the metrics say it:
// its job's Slurm state, SUBMITTED until the snapshot shows the job, ENDED
// once it is gone from it.
func sessionState(rec store.Session, j *slurmrest.Job) string {
	switch {
	case j != nil:
		return j.State.Base()
	case !rec.Ended.IsZero():
		return "ENDED"
	default:
		return "SUBMITTED"
	}
}

// lastActive is when the session's server was last active as the portal
// knows it: its recorded activity, else the job's start.
func lastActive(rec store.Session, j *slurmrest.Job) time.Time {
	last := rec.LastActivity
	if j != nil && j.StartTime.After(last) {
		last = j.StartTime
	}
	return last
}

// reclaimdPrefix starts the end reason of a session reclaimd ended.
const reclaimdPrefix = "reclaimd: "

// settle records what the snapshot says of an open session: its job
// ended (why: reclaimd's reason when it ended it, asked once) or is gone;
// and, for a running job not pinned yet, its server's host and port from
// the first valid connection file.
func (s *Core) settle(ctx context.Context, at sessionAt) sessionAt {
	rec, j := at.rec, at.job
	if !rec.Ended.IsZero() || rec.JobID == 0 {
		return at
	}
	now := s.cfg.Now()
	reason := ""
	switch {
	case j == nil:
		snap := at.c.Poller.Snapshot()
		// A job just submitted shows after the next poll; one that
		// ended leaves the listing some minutes after its end.
		if snap == nil || !snap.At.After(rec.Created.Add(2*time.Minute)) || at.c.Poller.Health().Stale {
			return at
		}
		reason = "the session's job is no longer in the cluster"
	case !slices.Contains(openStates, j.State.Base()):
		reason = endReason(j)
		if hasGPUs(j) && at.c.ReclaimdURL != "" {
			d, _, ok, answered := s.reclaimAnswer(ctx, at.c, rec.JobID)
			switch {
			case ok && d.Action == "cancel":
				reason = reclaimdPrefix + d.Reason
			case !answered && j.State.Base() == "CANCELLED" && now.Sub(j.EndTime) < ReclaimdEndWait:
				// reclaimd may have cancelled it and not answer just now:
				// the end is settled at a later look, not with a wrong reason.
				return at
			}
		}
	case j.Running() && rec.Host == "":
		if t, err := s.resolve(at); err == nil {
			at.rec.Host, at.rec.Port = t.Host, t.Port
		}
		return at
	default:
		return at
	}
	if _, err := s.cfg.Store.EndSession(ctx, rec.ID, reason, now); err != nil {
		s.log.Error("session end not recorded", "session_id", rec.ID, "error", err)
		return at
	}
	if fresh, err := s.cfg.Store.GetSession(ctx, rec.ID); err == nil {
		at.rec = fresh
	}
	s.log.Info("session ended", "session_id", rec.ID, "cluster", rec.Cluster, "job_id", rec.JobID, "user", rec.User, "reason", at.rec.EndReason)
	return at
}

// ReclaimdEndWait is how long after a GPU session's job was cancelled the
// portal keeps asking reclaimd whether it was reclaimd that cancelled it,
// before it records the end as a plain cancel.
const ReclaimdEndWait = 10 * time.Minute

// endReason says why a job that is no longer running ended.
func endReason(j *slurmrest.Job) string {
	switch st := j.State.Base(); st {
	case "TIMEOUT":
		return "the session reached its time limit"
	case "CANCELLED":
		return "the session's job was cancelled in Slurm"
	case "COMPLETED":
		return "the session's server stopped"
	case "FAILED":
		return fmt.Sprintf("the session's job failed (exit code %d): see its output", j.ExitCode)
	case "PREEMPTED":
		return "the session's job was preempted"
	case "NODE_FAIL":
		return "the session's node failed"
	default:
		return "the session's job ended: " + st
	}
}

// resolve reads and checks the session's connection file for its
// running job, and pins the server's host and port the first time.
func (s *Core) resolve(at sessionAt) (session.Target, error) {
	rec, j := at.rec, at.job
	if j == nil {
		return session.Target{}, fmt.Errorf("%w (its job is not in the cluster's snapshot)", session.ErrNotRunning)
	}
	t, err := session.Resolve(rec.Dir, uint32(j.UserID), session.Job{State: j.State.Base(), Nodes: j.Nodes}, session.Pin{Host: rec.Host, Port: rec.Port})
	if err != nil {
		return t, err
	}
	if rec.Server != "" && string(t.Kind) != rec.Server {
		return session.Target{}, fmt.Errorf("connection file %w: kind %s, the session's template starts %s", session.ErrFormat, t.Kind, rec.Server)
	}
	if rec.Host == "" {
		if _, err := s.cfg.Store.PinSession(context.Background(), rec.ID, t.Host, t.Port); err != nil {
			return session.Target{}, err
		}
		s.log.Info("session server found", "session_id", rec.ID, "target", t)
	}
	return t, nil
}

// EndSession ends a session: its job is cancelled in Slurm as the
// caller, audited.
func (s *Core) EndSession(ctx context.Context, who auth.Identity, id string) (api.ActionResult, *Problem) {
	at, p := s.owned(ctx, who, id)
	if p != nil {
		return api.ActionResult{}, p
	}
	at = s.settle(ctx, at)
	if !at.rec.Ended.IsZero() || at.rec.JobID == 0 {
		return api.ActionResult{}, problem(http.StatusConflict, api.SessionNotRunning, fmt.Sprintf("session %s has ended", id), "GET /v1/sessions/{id} says why")
	}
	ref := slurmrest.RefOf(at.rec.JobID)
	if at.job != nil {
		ref = at.job.Ref()
	}
	var out api.ActionResult
	err := s.actAs(ctx, at, who.User, who.Via, "cancel", "session "+id, asOwner, func(as *slurmrest.Client) error { return as.CancelRef(ctx, ref) },
		func(aid int64, err error) {
			if err != nil {
				p = slurmProblem(err, fmt.Sprintf("Slurm did not cancel the session's job %d: %s", at.rec.JobID, userText(err)))
				return
			}
			if _, err := s.cfg.Store.EndSession(ctx, id, "ended by "+who.User+" through the portal", s.cfg.Now()); err != nil {
				s.log.Error("session end not recorded", "session_id", id, "error", err)
			}
			out = api.ActionResult{Cluster: at.rec.Cluster, Target: string(ref), Action: "cancel", AuditId: aid}
		})
	if err != nil {
		return api.ActionResult{}, actProblem(err)
	}
	return out, p
}

// errNotAudited: the audit record could not be written, so nothing was done.
var errNotAudited = errors.New("the action could not be recorded, so it was not taken")

// errNoCluster: the cluster's slurmrestd cannot be reached.
var errNoCluster = errors.New("the cluster cannot be reached")

func actProblem(err error) *Problem {
	if errors.Is(err, errNoCluster) {
		return problem(http.StatusServiceUnavailable, api.Unavailable, err.Error(), "try again shortly")
	}
	return problem(http.StatusInternalServerError, api.Internal, err.Error(), "try again; tell the portal's admins if it persists")
}

// actor says as whom a session action is made in Slurm.
type actor int

const (
	asOwner  actor = iota // the session's owner, with a token minted for them
	asPoller              // the cluster's poll user (an operator), for what Slurm allows only operators
)

// actAs carries out one action on a session's job in Slurm, as by says,
// for user (whom the audit record names): audited before (nothing is done without the record) and after; done
// gets the audit id and Slurm's answer.
func (s *Core) actAs(ctx context.Context, at sessionAt, user, via, action, detail string, by actor, act func(*slurmrest.Client) error, done func(int64, error)) error {
	client, err := at.c.Poller.Client(ctx)
	if err != nil {
		return errNoCluster
	}
	target := slurmrest.RefOf(at.rec.JobID)
	if at.job != nil {
		target = at.job.Ref()
	}
	aid, err := s.cfg.Store.Intent(ctx, store.Audit{User: user, Via: via, Cluster: at.rec.Cluster, Action: action, Target: string(target), Detail: detail})
	if err != nil {
		s.log.Error("audit record not written: action not taken", "cluster", at.rec.Cluster, "job_id", target, "action", action, "error", err)
		return errNotAudited
	}
	if by == asOwner {
		client = client.As(at.rec.User)
	}
	err = act(client)
	s.settleAudit(ctx, aid, err)
	s.log.Info("session action", "cluster", at.rec.Cluster, "session_id", at.rec.ID, "job_id", target, "action", action, "user", user, "via", via,
		"audit_id", aid, "ok", err == nil, "error", errString(err))
	if done != nil {
		done(aid, err)
	}
	return nil
}

// ExtendSession adds minutes to a session's job, up to its class's
// maximum time in the job policy, by a job update the portal makes as its
// poll user after checking it: Slurm refuses an owner who raises their
// own job's time limit. minutes outside 1 to 10080 is a bad request.
func (s *Core) ExtendSession(ctx context.Context, who auth.Identity, id string, minutes int) (api.SessionExtended, *Problem) {
	at, p := s.owned(ctx, who, id)
	if p != nil {
		return api.SessionExtended{}, p
	}
	if minutes < 1 || minutes > 10080 {
		return api.SessionExtended{}, BadExtension()
	}
	at = s.settle(ctx, at)
	j := at.job
	if !at.rec.Ended.IsZero() || j == nil || !slices.Contains(openStates, j.State.Base()) {
		return api.SessionExtended{}, problem(http.StatusConflict, api.SessionNotRunning, fmt.Sprintf("session %s is not running or pending", id),
			"a session just started can be extended after the next poll")
	}
	var policy *jobpolicy.Policy
	if at.c.Policy != nil {
		policy = at.c.Policy()
	}
	class := classOf(j)
	var pc jobpolicy.Class
	if policy != nil {
		pc = policy.Classes[class]
	}
	if pc.MaxTime <= 0 || pc.MaxTime == jobpolicy.Unlimited {
		return api.SessionExtended{}, problem(http.StatusServiceUnavailable, api.Unavailable, fmt.Sprintf("the maximum time of class %q is not known on cluster %q", class, at.rec.Cluster),
			"its admins give the cluster a job_policy_file whose class has a max_time")
	}
	maxTime := time.Duration(pc.MaxTime) * time.Minute
	if j.TimeLimit >= maxTime {
		return api.SessionExtended{}, problem(http.StatusForbidden, api.Forbidden, fmt.Sprintf("the session has its class's maximum time, %s", maxTime),
			"start a new session when this one ends")
	}
	limit := j.TimeLimit + time.Duration(minutes)*time.Minute
	capped := limit > maxTime
	limit = min(limit, maxTime)
	// Slurm lets only its operators raise a job's time limit, so the update
	// is made as the poll user (an operator) once the portal has checked it
	// against the class's maximum; the audit record names the caller.
	var out api.SessionExtended
	err := s.actAs(ctx, at, who.User, who.Via, "extend", fmt.Sprintf("session %s time_limit=%s", id, limit), asPoller,
		func(as *slurmrest.Client) error {
			return as.UpdateRef(ctx, slurmrest.RefOf(j.ID), slurmrest.JobUpdate{TimeLimit: &limit})
		},
		func(aid int64, err error) {
			if err != nil {
				p = slurmProblem(err, fmt.Sprintf("Slurm did not extend the session's job %d: %s", j.ID, userText(err)))
				return
			}
			out = api.SessionExtended{Cluster: at.rec.Cluster, Target: string(j.Ref()), Action: "extend", AuditId: aid,
				TimeLimitSeconds: int64(limit / time.Second), MaxTimeSeconds: ptr(int64(maxTime / time.Second)), Capped: capped}
		})
	if err != nil {
		return api.SessionExtended{}, actProblem(err)
	}
	return out, p
}

// BadExtension is the problem of an extension of other than 1 to 10080
// minutes (or a body that is not one).
func BadExtension() *Problem {
	return problem(http.StatusBadRequest, api.BadRequest, "give the minutes to add, 1 to 10080", `send {"minutes": 60}`)
}

// SessionOwned is the caller's session id, for the session proxy's
// cookie: its record, or the problem (another user's is not found).
func (s *Core) SessionOwned(ctx context.Context, who auth.Identity, id string) (store.Session, *Problem) {
	at, p := s.owned(ctx, who, id)
	return at.rec, p
}

// SessionTarget is the proxy's lookup: the caller's own session (any
// other is sessionproxy.ErrNotFound), its job running in the cluster's
// snapshot now, and the connection file checked against it and the pin.
func (s *Core) SessionTarget(ctx context.Context, who auth.Identity, id string) (session.Target, error) {
	at, err := s.ownSession(ctx, who, id)
	if err != nil {
		return session.Target{}, err
	}
	if !at.rec.Ended.IsZero() {
		return session.Target{}, fmt.Errorf("%w (the session ended: %s)", session.ErrNotRunning, at.rec.EndReason)
	}
	return s.resolve(at)
}

// TerminalInput records input to a session's terminal now, at most once
// every inputEvery: ttyd has no activity of its own to ask.
func (s *Core) TerminalInput(id string) {
	now := s.cfg.Now()
	s.inputMu.Lock()
	last, seen := s.input[id]
	if seen && now.Sub(last) < inputEvery {
		s.inputMu.Unlock()
		return
	}
	if len(s.input) > 10000 {
		s.input = map[string]time.Time{}
	}
	s.input[id] = now
	s.inputMu.Unlock()
	if err := s.cfg.Store.SessionActivity(context.Background(), id, now); err != nil {
		s.log.Warn("session activity not recorded", "session_id", id, "error", err)
	}
}

// inputEvery is how often terminal input is written down: the idle limit
// is counted in minutes and hours, keystrokes come by the second.
const inputEvery = 30 * time.Second
