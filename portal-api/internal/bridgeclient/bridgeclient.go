// Package bridgeclient is the portal's client of strata-bridge's JSON API
// (bridge/README.md, "The JSON API"): the deployments of one cluster's
// bridge, and deploy, rollback and delete, each request with the bearer
// token the bridge's api.token_file holds.
//
// The requests and answers are the bridge's API contract
// (internal/bridgeapi), decoded leniently (a field the bridge adds later
// is ignored), since the bridge and the portal are upgraded apart. The list is kept for a few seconds
// (Config.ListTTL), so that the bridge's load follows the portal's
// clusters and not its readers; an action through the client forgets it.
package bridgeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/bridgeapi"
)

// The bridge's answers are its API contract (internal/bridgeapi), which
// the bridge serves from: no copy of its types here.
type (
	// Deployment is one of the bridge's deployments with its current
	// version (Current, nil when none is in force), as GET
	// /v1/deployments lists it; JobID() is the job it serves.
	Deployment = bridgeapi.DeploymentSummary
	// Version is one stored version of a deployment (a job's model).
	Version = bridgeapi.VersionDetail
	// ObjectRef names one Kubernetes object.
	ObjectRef = bridgeapi.ObjectRef
	// Applied is what a deploy or rollback did to one object.
	Applied = bridgeapi.Applied
	// Result is the bridge's answer to a deploy or a rollback.
	Result = bridgeapi.Result
	// DeleteResult is the bridge's answer to a delete.
	DeleteResult = bridgeapi.DeleteResult
)

// Error is an answer of the bridge other than 200: its status and its
// error body ({"error", "check", "reason", "fix"}).
type Error struct {
	Status                  int
	Msg, Check, Reason, Fix string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("the bridge answered %d", e.Status)
	}
	return fmt.Sprintf("the bridge answered %d: %s", e.Status, e.Msg)
}

// Refused reports whether the bridge refused the request by one of its
// checks (422): the caller's to change.
func (e *Error) Refused() bool { return e.Status == http.StatusUnprocessableEntity }

// Config of a client.
type Config struct {
	// URL is the bridge's API, such as http://127.0.0.1:9464.
	URL string
	// Token gives the bearer token (a secretfile.File's Get, so a
	// rotated file takes effect at once).
	Token func() ([]byte, error)
	// HTTP sends the requests; nil: a client with a 10 s timeout. A
	// deploy waits for its rollout: give it a timeout longer than the
	// bridge's kubernetes.rollout_timeout.
	HTTP *http.Client
	// ListTTL is how long a list is kept; 0: 5 s, negative: never kept.
	ListTTL time.Duration
	// Now is the clock of the list's age; nil: time.Now.
	Now func() time.Time
}

// Client talks to one bridge.
type Client struct {
	cfg Config

	mu   sync.Mutex
	list []Deployment
	at   time.Time
	gen  uint64 // bumped by every action, so a list read across one is not kept
}

// New makes a client.
func New(cfg Config) *Client {
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.ListTTL == 0 {
		cfg.ListTTL = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg}
}

// Deployments lists every deployment of the bridge, from the list kept
// when it is recent enough. The slice is shared: do not change it.
func (c *Client) Deployments(ctx context.Context) ([]Deployment, error) {
	c.mu.Lock()
	if c.list != nil && c.cfg.ListTTL > 0 && c.cfg.Now().Sub(c.at) < c.cfg.ListTTL {
		l := c.list
		c.mu.Unlock()
		return l, nil
	}
	gen := c.gen
	c.mu.Unlock()
	var out bridgeapi.DeploymentList
	if err := c.do(ctx, http.MethodGet, "/v1/deployments", nil, &out); err != nil {
		return nil, err
	}
	if out.Deployments == nil {
		out.Deployments = []Deployment{}
	}
	c.mu.Lock()
	if gen == c.gen {
		c.list, c.at = out.Deployments, c.cfg.Now()
	}
	c.mu.Unlock()
	return out.Deployments, nil
}

// Deployment is one deployment with every stored version and its
// events: GET /v1/deployments/{name}, never kept.
func (c *Client) Deployment(ctx context.Context, name string) (*bridgeapi.DeploymentDetail, error) {
	var out bridgeapi.DeploymentDetail
	if err := c.do(ctx, http.MethodGet, "/v1/deployments/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Forget drops the kept list, so the next Deployments asks the bridge.
func (c *Client) Forget() {
	c.mu.Lock()
	c.list, c.gen = nil, c.gen+1
	c.mu.Unlock()
}

// Deploy serves job's model: POST /v1/deploy. name serves a job that did
// not ask to be served under that name.
func (c *Client) Deploy(ctx context.Context, job int64, name string, dryRun bool) (*Result, error) {
	body := bridgeapi.DeployRequest{Job: job, Name: name, DryRun: dryRun}
	var out Result
	defer c.forgetUnless(dryRun)
	if err := c.do(ctx, http.MethodPost, "/v1/deploy", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rollback puts an earlier version of name back: to is "job-<id>", or ""
// for the previous version that rolled out.
func (c *Client) Rollback(ctx context.Context, name, to string, dryRun bool) (*Result, error) {
	body := bridgeapi.RollbackRequest{To: to, DryRun: dryRun}
	var out Result
	defer c.forgetUnless(dryRun)
	if err := c.do(ctx, http.MethodPost, "/v1/deployments/"+url.PathEscape(name)+"/rollback", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete removes name's objects from Kubernetes.
func (c *Client) Delete(ctx context.Context, name string, dryRun bool) (*DeleteResult, error) {
	path := "/v1/deployments/" + url.PathEscape(name)
	if dryRun {
		path += "?dry_run=" + strconv.FormatBool(dryRun)
	}
	var out DeleteResult
	defer c.forgetUnless(dryRun)
	if err := c.do(ctx, http.MethodDelete, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) forgetUnless(dryRun bool) {
	if !dryRun {
		c.Forget()
	}
}

// maxAnswer bounds an answer: a list of deployments or one result.
const maxAnswer = 16 << 20

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	if c.cfg.Token == nil {
		return errors.New("bridge: no token configured")
	}
	token, err := c.cfg.Token()
	if err != nil {
		return fmt.Errorf("bridge token: %w", err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("bridge request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.URL+path, rd)
	if err != nil {
		return fmt.Errorf("bridge request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("bridge %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }() // read in full below
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("bridge %s %s: %w", method, path, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("bridge %s %s: answer larger than %d bytes", method, path, maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		var body bridgeapi.Error
		_ = json.Unmarshal(data, &body) // a body that is not the bridge's error keeps the status alone
		return &Error{Status: resp.StatusCode, Msg: body.Error, Check: body.Check, Reason: body.Reason, Fix: body.Fix}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("bridge %s %s: %w", method, path, err)
	}
	return nil
}
