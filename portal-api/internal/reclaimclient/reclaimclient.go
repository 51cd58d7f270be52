// Package reclaimclient is the portal's client of one cluster's reclaimd
// API: a job's reclaim record and recovery attempts, the decisions and
// failures since a time, and the nodes' health, each answer read into
// reclaimd's API contract (internal/reclaimapi), bounded in size.
//
// It keeps nothing: the portal's core decides how often reclaimd is asked
// (once per poll interval for the overview and for a job's attempts), and
// the requests that such reads make are counted in
// strata_portal_reclaimd_requests_total, which must not grow with the
// portal's own requests.
package reclaimclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// Bounds of reclaimd's answers.
const (
	// MaxJobBytes bounds reclaimd's answer about one job.
	MaxJobBytes = 4 << 20
	// MaxListBytes bounds a list of decisions or failures, or the nodes'
	// health (a week of decisions and failures: 10,000 each at most).
	MaxListBytes = 32 << 20
	// Limit is the most decisions and failures reclaimd gives in one
	// answer (its own cap).
	Limit = 10000
)

// ErrNotFound is reclaimd's 404: no record of the job, no failed run, or
// node health off.
var ErrNotFound = errors.New("reclaimd has no such record")

// StatusError is an answer other than 200 and 404.
type StatusError struct {
	Path   string
	Status int
	// Hint says what to do, where the status tells (a 401).
	Hint string
}

func (e *StatusError) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("GET %s: reclaimd answered %d: %s", e.Path, e.Status, e.Hint)
	}
	return fmt.Sprintf("GET %s: reclaimd answered %d", e.Path, e.Status)
}

// AnswerError is an answer that could not be read as the contract says:
// too large, not its JSON, or about another job.
type AnswerError struct {
	Path string
	Err  error
}

func (e *AnswerError) Error() string { return fmt.Sprintf("GET %s: %v", e.Path, e.Err) }

func (e *AnswerError) Unwrap() error { return e.Err }

// Config of a client.
type Config struct {
	// Cluster names the cluster in the request counter.
	Cluster string
	// URL is reclaimd's API, such as http://127.0.0.1:9811.
	URL string
	// Token gives the bearer token reclaimd's API wants (the content of
	// its api.token_file; the portal's reclaimd_token_file, a
	// secretfile.File's Get), sent with every request: reclaimd answers
	// 401 without it. nil sends none.
	Token func() ([]byte, error)
	// HTTP sends the requests; nil: a client with a 10 s timeout.
	HTTP *http.Client
	// Requests counts the counted reads by cluster and result (ok,
	// error); nil: not counted.
	Requests *prometheus.CounterVec
}

// Client asks one reclaimd.
type Client struct{ cfg Config }

// New makes a client.
func New(cfg Config) *Client {
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{cfg: cfg}
}

// NewRequests is the counter of the portal's requests to each cluster's
// reclaimd, registered with reg.
func NewRequests(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_portal_reclaimd_requests_total",
		Help: "Requests to reclaimd by cluster and result (ok, error): at most one read a poll interval for the overview, one a job for attempts."},
		[]string{"cluster", "result"})
	reg.MustRegister(c)
	return c
}

// get reads path: its status and body (at most max bytes); counted says
// whether the request counts in Requests.
func (c *Client) get(ctx context.Context, path string, max int64, counted bool) (code int, body []byte, err error) {
	if counted && c.cfg.Requests != nil {
		defer func() {
			result := "ok"
			if err != nil || code >= 500 {
				result = "error"
			}
			c.cfg.Requests.WithLabelValues(c.cfg.Cluster, result).Inc()
		}()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if c.cfg.Token != nil {
		token, err := c.cfg.Token()
		if err != nil {
			return 0, nil, fmt.Errorf("reclaimd_token_file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(body)) > max {
		return 0, nil, &AnswerError{Path: path, Err: fmt.Errorf("answer over %d bytes", max)}
	}
	return resp.StatusCode, body, nil
}

// read reads path into v: ErrNotFound on a 404, a *StatusError on
// another answer than 200.
func (c *Client) read(ctx context.Context, path string, max int64, counted bool, v any) error {
	code, body, err := c.get(ctx, path, max, counted)
	var ae *AnswerError
	switch {
	case errors.As(err, &ae):
		return err
	case err != nil:
		return fmt.Errorf("GET %s: %w", path, err)
	case code == http.StatusNotFound:
		return ErrNotFound
	case code == http.StatusUnauthorized:
		return &StatusError{Path: path, Status: code, Hint: "reclaimd refused the portal's token: give the cluster a reclaimd_token_file " +
			"holding the content of reclaimd's api.token_file"}
	case code != http.StatusOK:
		return &StatusError{Path: path, Status: code}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &AnswerError{Path: path, Err: err}
	}
	return nil
}

func jobPath(id int64, what string) string {
	return "/" + reclaimapi.APIVersion + "/jobs/" + strconv.FormatInt(id, 10) + "/" + what
}

// JobReclaim is reclaimd's record of job id (not counted: one request
// per reader's request, as the route it serves). ErrNotFound: reclaimd
// never judged the job.
func (c *Client) JobReclaim(ctx context.Context, id int64) (*reclaimapi.JobReclaim, error) {
	var out reclaimapi.JobReclaim
	path := jobPath(id, "reclaim")
	if err := c.read(ctx, path, MaxJobBytes, false, &out); err != nil {
		return nil, err
	}
	if out.JobID != id {
		return nil, &AnswerError{Path: path, Err: fmt.Errorf("the record of job %d, not of this job", out.JobID)}
	}
	return &out, nil
}

// Attempts is reclaimd's record of job id's failed runs (counted).
// ErrNotFound: reclaimd saw no failed run of the job.
func (c *Client) Attempts(ctx context.Context, id int64) (*reclaimapi.Attempts, error) {
	var out reclaimapi.Attempts
	path := jobPath(id, "attempts")
	if err := c.read(ctx, path, MaxJobBytes, true, &out); err != nil {
		return nil, err
	}
	if out.JobID != id {
		return nil, &AnswerError{Path: path, Err: fmt.Errorf("the attempts of job %d, not of this job", out.JobID)}
	}
	return &out, nil
}

func since(t time.Time, limit int) string {
	return "?since=" + url.QueryEscape(t.UTC().Format(time.RFC3339)) + "&limit=" + strconv.Itoa(limit)
}

// Decisions are reclaimd's decisions since t (whole seconds), oldest
// first, limit at most (counted).
func (c *Client) Decisions(ctx context.Context, t time.Time, limit int) ([]reclaimapi.Record, error) {
	var out reclaimapi.Decisions
	err := c.read(ctx, reclaimapi.PathDecisions+since(t, limit), MaxListBytes, true, &out)
	return out.Decisions, err
}

// Failures are reclaimd's classified failures since t (whole seconds),
// oldest first, limit at most (counted).
func (c *Client) Failures(ctx context.Context, t time.Time, limit int) ([]reclaimapi.Failure, error) {
	var out reclaimapi.Failures
	err := c.read(ctx, reclaimapi.PathFailures+since(t, limit), MaxListBytes, true, &out)
	return out.Failures, err
}

// NodesHealth is reclaimd's health of every node (counted); ErrNotFound:
// reclaimd's node health is off.
func (c *Client) NodesHealth(ctx context.Context) ([]reclaimapi.NodeHealth, error) {
	var out reclaimapi.NodesHealth
	err := c.read(ctx, reclaimapi.PathNodesHealth, MaxListBytes, true, &out)
	return out.Nodes, err
}

// Worth is reclaimd's reclaims carried out since t (whole seconds), oldest
// first, limit at most, each with its bound and what was observed of it
// (counted). ErrNotFound: a reclaimd that does not serve it yet.
func (c *Client) Worth(ctx context.Context, t time.Time, limit int) ([]reclaimapi.ReclaimWorth, error) {
	var out reclaimapi.Worth
	err := c.read(ctx, reclaimapi.PathWorth+since(t, limit), MaxListBytes, true, &out)
	return out.Reclaims, err
}
