package core

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"errors"

	"github.com/strata-hpc/strata/internal/daemon"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/reclaimclient"
	"github.com/strata-hpc/strata/portal-api/internal/session"
	"github.com/strata-hpc/strata/portal-api/internal/sessionproxy"
)

// IdleUser is who the audit log names for what the idle loop does.
const IdleUser = "strata-portal-api"

type activityKey struct{}

// activityClient asks the sessions' servers for their activity, dialling
// only the address its request's context names: no proxy from the
// environment, no redirect followed, no connection kept.
func activityClient(tr *http.Transport) *http.Client {
	if tr == nil {
		tr = &http.Transport{}
	} else {
		tr = tr.Clone()
	}
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	tr.Proxy, tr.DisableKeepAlives = nil, true
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if want, _ := ctx.Value(activityKey{}).(string); addr != want {
			return nil, fmt.Errorf("session activity: refused to dial %s: not the session's server", addr)
		}
		return dial(ctx, network, addr)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// IdleLoop is the daemon loop that ends idle sessions without GPUs and
// records how every open session ended.
func (s *Core) IdleLoop() daemon.Loop {
	every := cmp.Or(s.cfg.IdleInterval, time.Minute)
	return daemon.Loop{Name: "sessions", Stall: 10*every + 5*time.Minute, Run: func(ctx context.Context) error {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			daemon.Beat(ctx)
			s.CheckSessions(ctx)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}}
}

// CheckSessions looks at every open session once: it records the end of
// a job that ended, asks a running session's server for its activity
// (JupyterLab's /api/status, code-server's /healthz; a terminal's input
// is recorded by the proxy as it passes), and cancels, as its owner, a
// session without GPUs idle past its idle limit, with the reason stored.
// A session with GPUs is left to reclaimd's rule for the class.
func (s *Core) CheckSessions(ctx context.Context) {
	recs, err := s.cfg.Store.OpenSessions(ctx)
	if err != nil {
		s.log.Error("open sessions not read", "error", err)
		return
	}
	open := map[[2]string]int{}
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		c, ok := s.byName[rec.Cluster]
		if !ok {
			continue
		}
		at := s.settle(ctx, sessionAt{rec: rec, c: c, job: sessionJob(c, rec)})
		j := at.job
		if at.rec.Ended.IsZero() {
			open[[2]string{rec.Cluster, sessionState(at.rec, j)}]++
		}
		if !at.rec.Ended.IsZero() || j == nil || !j.Running() || hasGPUs(j) || at.rec.IdleLimit <= 0 {
			continue
		}
		if last, ok := s.serverActivity(ctx, at); ok {
			if err := s.cfg.Store.SessionActivity(ctx, rec.ID, last); err != nil {
				s.log.Warn("session activity not recorded", "session_id", rec.ID, "error", err)
			}
			if last.After(at.rec.LastActivity) {
				at.rec.LastActivity = last
			}
		}
		idle := s.cfg.Now().Sub(lastActive(at.rec, j))
		if idle < at.rec.IdleLimit {
			continue
		}
		if s.endIdle(ctx, at, idle) {
			open[[2]string{rec.Cluster, sessionState(at.rec, j)}]--
		}
	}
	s.sessionsOpen.set(s.ClusterNames(), open)
}

// endIdle cancels an idle session's job as its owner, audited, and
// records why; it says whether the session ended.
func (s *Core) endIdle(ctx context.Context, at sessionAt, idle time.Duration) bool {
	reason := fmt.Sprintf("idle for %s, past the session's idle limit of %s: ended by the portal", idle.Truncate(time.Minute), at.rec.IdleLimit)
	if !at.rec.LastActivity.IsZero() {
		reason += fmt.Sprintf(" (last activity %s)", at.rec.LastActivity.UTC().Format(time.RFC3339))
	}
	ref := at.job.Ref()
	var failed error
	err := s.actAs(ctx, at, IdleUser, "idle", "cancel", "session "+at.rec.ID+": "+reason, asOwner,
		func(as *slurmrest.Client) error { return as.CancelRef(ctx, ref) }, func(_ int64, err error) { failed = err })
	if err == nil {
		err = failed
	}
	if err != nil {
		s.log.Warn("idle session not cancelled", "session_id", at.rec.ID, "job_id", ref, "error", err)
		return false
	}
	recorded := true
	if _, err := s.cfg.Store.EndSession(ctx, at.rec.ID, reason, s.cfg.Now()); err != nil {
		s.log.Error("session end not recorded", "session_id", at.rec.ID, "error", err)
		recorded = false
	}
	s.log.Info("idle session ended", "session_id", at.rec.ID, "cluster", at.rec.Cluster, "job_id", ref, "user", at.rec.User, "reason", reason)
	return recorded
}

// maxActivityBytes bounds a server's status answer.
const maxActivityBytes = 64 << 10

// serverActivity asks a running session's server when it was last
// active: JupyterLab's last_activity (of its API, kernels and terminals;
// its /api/status does not count itself), or now while one of its
// kernels is busy; code-server's lastHeartbeat (its /healthz does not
// count itself either).
// ttyd has no such API: the proxy records its input.
func (s *Core) serverActivity(ctx context.Context, at sessionAt) (time.Time, bool) {
	if at.rec.Server == string(session.TTYD) {
		return time.Time{}, false
	}
	t, err := s.resolve(at)
	if err != nil {
		s.log.Debug("session activity not asked", "session_id", at.rec.ID, "error", err)
		return time.Time{}, false
	}
	u := "http://" + t.Addr()
	req, err := http.NewRequestWithContext(context.WithValue(ctx, activityKey{}, t.Addr()), http.MethodGet, u, nil)
	if err != nil {
		return time.Time{}, false
	}
	switch t.Kind {
	case session.JupyterLab:
		req.URL.Path = sessionproxy.Prefix + at.rec.ID + "/proxy/api/status"
		req.Header.Set("Authorization", "token "+t.Secret)
	case session.CodeServer:
		req.URL.Path = "/healthz"
		req.AddCookie(&http.Cookie{Name: "code-server-session", Value: t.Secret})
	default:
		return time.Time{}, false
	}
	body, ok := s.askServer(req, at.rec.ID, t)
	if !ok {
		return time.Time{}, false
	}
	last, ok := parseActivity(t.Kind, body)
	if !ok {
		s.log.Info("session server's status has no activity", "session_id", at.rec.ID, "target", t)
		return time.Time{}, false
	}
	if t.Kind == session.JupyterLab {
		// A kernel busy with a long, silent cell is at work: JupyterLab
		// counts no activity for it. Asked so as not to count as activity.
		kreq := req.Clone(req.Context())
		kreq.URL.Path, kreq.URL.RawQuery = sessionproxy.Prefix+at.rec.ID+"/proxy/api/kernels", "no_track_activity=1"
		if kbody, ok := s.askServer(kreq, at.rec.ID, t); ok && kernelBusy(kbody) {
			last = s.cfg.Now().UTC()
		}
	}
	return last, true
}

// askServer sends req to a session's server and returns the body of a 200.
func (s *Core) askServer(req *http.Request, id string, t session.Target) ([]byte, bool) {
	resp, err := s.activity.Do(req)
	if err != nil {
		s.log.Info("session server did not answer", "session_id", id, "target", t, "path", req.URL.Path, "error", err)
		return nil, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxActivityBytes))
	if err != nil || resp.StatusCode != http.StatusOK {
		s.log.Info("session server's answer not read", "session_id", id, "target", t, "path", req.URL.Path, "status", resp.StatusCode)
		return nil, false
	}
	return body, true
}

// kernelBusy says whether JupyterLab's kernel list has a kernel at work.
func kernelBusy(body []byte) bool {
	var ks []struct {
		State string `json:"execution_state"`
	}
	if json.Unmarshal(body, &ks) != nil {
		return false
	}
	for _, k := range ks {
		if k.State == "busy" {
			return true
		}
	}
	return false
}

// parseActivity reads the last activity of a server's status answer.
func parseActivity(kind session.Kind, body []byte) (time.Time, bool) {
	switch kind {
	case session.JupyterLab:
		var st struct {
			LastActivity time.Time `json:"last_activity"`
		}
		if json.Unmarshal(body, &st) != nil || st.LastActivity.IsZero() {
			return time.Time{}, false
		}
		return st.LastActivity.UTC(), true
	case session.CodeServer:
		var st struct {
			LastHeartbeat int64 `json:"lastHeartbeat"`
		}
		if json.Unmarshal(body, &st) != nil || st.LastHeartbeat <= 0 {
			return time.Time{}, false
		}
		return time.UnixMilli(st.LastHeartbeat).UTC(), true
	}
	return time.Time{}, false
}

// reclaimAnswer is reclaimd's latest decision on a job, when it has one
// (ok), and whether reclaimd answered at all:
// false when it could not be reached or its answer was not a record or a
// 404 (it may have a decision the portal has not seen).
//
// next is reclaimd's next step if the job's GPUs stay idle, when it says
// one.
func (s *Core) reclaimAnswer(ctx context.Context, c Cluster, jobID int64) (_ api.SessionReclaim, next *api.SessionReclaimNext, ok, answered bool) {
	rcl := s.reclaimd[c.Poller.Name()]
	if rcl == nil {
		return api.SessionReclaim{}, nil, false, false
	}
	// A session's answer does not wait long for reclaimd.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rec, err := rcl.JobReclaim(ctx, jobID)
	var ae *reclaimclient.AnswerError
	var se *reclaimclient.StatusError
	switch {
	case errors.Is(err, reclaimclient.ErrNotFound):
		return api.SessionReclaim{}, nil, false, true // no record: reclaimd did nothing to the job
	case errors.As(err, &ae), errors.As(err, &se):
		return api.SessionReclaim{}, nil, false, false
	case err != nil:
		s.log.Warn("reclaimd unreachable", "cluster", c.Poller.Name(), "error", err)
		return api.SessionReclaim{}, nil, false, false
	}
	if u := rec.Upcoming; u != nil && u.Action != "" && !u.At.IsZero() {
		next = &api.SessionReclaimNext{Action: u.Action, At: u.At.UTC()}
	}
	if len(rec.Records) == 0 {
		return api.SessionReclaim{}, next, false, true
	}
	d := rec.Records[len(rec.Records)-1]
	out := api.SessionReclaim{Action: d.Kind, Reason: d.Reason}
	at := ""
	if !d.DecidedAt.IsZero() {
		at = d.DecidedAt.Format(time.RFC3339Nano)
	}
	for p, v := range map[**string]string{&out.Rule: d.Rule, &out.Outcome: d.Status, &out.At: at} {
		if v != "" {
			*p = ptr(v)
		}
	}
	return out, next, true, true
}
