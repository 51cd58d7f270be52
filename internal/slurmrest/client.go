package slurmrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Config says how to reach slurmrestd.
type Config struct {
	// URL of slurmrestd, e.g. http://127.0.0.1:6820.
	URL string
	// User is the name sent as X-SLURM-USER-NAME when a call does not act
	// for someone else (see Client.As).
	User string
	// Tokens gives the JWT for each request.
	Tokens TokenSource
	// Parser forces a data parser ("v0.0.42"); empty picks the newest the
	// server offers.
	Parser string
	// Requeuer requeues jobs on parsers without a REST requeue (v0.0.42).
	// Nil makes Requeue return ErrUnsupported there.
	Requeuer Requeuer
	// HTTPClient defaults to a client with a 30 s timeout.
	HTTPClient *http.Client
	// MaxAnswerBytes caps one answer of slurmrestd: a larger one fails
	// with an *AnswerTooLargeError. 0 is DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
	// MaxAnswerSetting names what raises the cap, for that error: the
	// daemon's configuration key ("slurm.max_answer_mib in reclaimd's
	// configuration"). Empty names this field.
	MaxAnswerSetting string
	Logger           *slog.Logger
}

// Client is a slurmrestd client bound to one data parser and one identity.
type Client struct {
	cfg  Config
	info ServerInfo
	be   backend
	user string
	log  *slog.Logger
}

// backend is what each parser's adapter implements.
type backend interface {
	ping(ctx context.Context) ([]Ping, error)
	jobs(ctx context.Context, since time.Time) (JobList, error)
	job(ctx context.Context, id int64) (Job, error)
	submit(ctx context.Context, spec JobSpec) (SubmitResult, error)
	update(ctx context.Context, ref JobRef, u JobUpdate) error
	signal(ctx context.Context, ref JobRef, sig string, batchOnly bool) error
	cancel(ctx context.Context, ref JobRef) error
	requeue(ctx context.Context, ref JobRef, hold bool) error // ErrUnsupported when the parser has none
	nodes(ctx context.Context) ([]Node, error)
	updateNode(ctx context.Context, name string, state []string, reason string) error
	partitions(ctx context.Context) ([]Partition, error)
	shares(ctx context.Context) ([]Share, error)
	accounts(ctx context.Context, withCoordinators bool) ([]Account, error)
	createAccount(ctx context.Context, cluster string, a AccountSpec) error
	deleteAccount(ctx context.Context, name string) error
	associations(ctx context.Context, f AssociationFilter) ([]Association, error)
	setAssociations(ctx context.Context, a []Association) error
	deleteAssociation(ctx context.Context, cluster, account, user string) error
	users(ctx context.Context) ([]User, error)
	addUser(ctx context.Context, cluster string, u UserSpec) error
	deleteUser(ctx context.Context, name string) error
	setDefaultAccount(ctx context.Context, user, account string) error
	qos(ctx context.Context) ([]QOS, error)
	setQOS(ctx context.Context, q QOS) error
	deleteQOS(ctx context.Context, name string) error

	// List writes: one request each (see lists.go).
	setQOSList(ctx context.Context, q []QOS) error
	setAccounts(ctx context.Context, a []AccountSpec) error
	addAccountAssociations(ctx context.Context, cluster, parent string, accounts []string) error
	addUsers(ctx context.Context, names []string) error
	setDefaultAccounts(ctx context.Context, u []User) error

	// setCoordinators makes users exactly the direct coordinators of
	// account a (see coord.go).
	setCoordinators(ctx context.Context, a Account, users []string) error

	// slurmdbd's record of jobs (see history.go).
	history(ctx context.Context, q historyQuery) ([]FinishedJob, error)
	finishedJob(ctx context.Context, id int64) (FinishedJob, error)
}

// AssociationFilter narrows Associations; empty fields match everything.
type AssociationFilter struct {
	Account string
	User    string
	// Accounts matches any of these accounts (and Account, when set too).
	Accounts []string
}

// account is the account query: a comma-separated list.
func (f AssociationFilter) account() string {
	if len(f.Accounts) == 0 {
		return f.Account
	}
	all := f.Accounts
	if f.Account != "" {
		all = append([]string{f.Account}, all...)
	}
	return strings.Join(all, ",")
}

type userKey struct{}

// noChangeSince (2100-01-01) asks for jobs changed after a time no job has
// reached: the cheapest authenticated question slurmctld answers.
const noChangeSince = "4102444800"

// New connects to slurmrestd, picks the newest parser it offers (or
// cfg.Parser) and logs the choice.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("slurmrest: no URL")
	}
	if cfg.Tokens == nil {
		return nil, errors.New("slurmrest: no token source")
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.MaxAnswerBytes < 0 {
		return nil, fmt.Errorf("slurmrest: the answer cap is %d bytes: give a positive size, or 0 for the default", cfg.MaxAnswerBytes)
	}
	if cfg.MaxAnswerBytes == 0 {
		cfg.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if cfg.MaxAnswerSetting == "" {
		cfg.MaxAnswerSetting = "slurmrest.Config.MaxAnswerBytes"
	}
	cfg.HTTPClient = withCap(withOnce(cfg.HTTPClient), cfg.MaxAnswerBytes, cfg.MaxAnswerSetting)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	c := &Client{cfg: cfg, user: cfg.User, log: cfg.Logger}
	candidates := Parsers
	if cfg.Parser != "" {
		if !isSupported(cfg.Parser) {
			return nil, fmt.Errorf("slurmrest: parser %s is not supported (supported: %s)", cfg.Parser, strings.Join(Parsers, ", "))
		}
		candidates = []string{cfg.Parser}
	}
	for _, p := range candidates {
		meta, err := c.probe(ctx, p)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c.info.Offered = append(c.info.Offered, p)
		if c.be == nil {
			c.info.Parser, c.info.Release, c.info.Cluster = p, meta.Slurm.Release, meta.Slurm.Cluster
			if c.be, err = c.newBackend(p); err != nil {
				return nil, err
			}
		}
	}
	if c.be == nil {
		return nil, fmt.Errorf("slurmrest: %s offers none of the data parsers %s: is it Slurm 24.11 or later?",
			cfg.URL, strings.Join(candidates, ", "))
	}
	c.log.Info("slurmrestd parser selected", "url", cfg.URL, "parser", c.info.Parser,
		"slurm_release", c.info.Release, "offered", strings.Join(c.info.Offered, ","))
	return c, nil
}

func isSupported(p string) bool {
	for _, s := range Parsers {
		if s == p {
			return true
		}
	}
	return false
}

type openapiMeta struct {
	Slurm struct {
		Release string `json:"release"`
		Cluster string `json:"cluster"`
	} `json:"slurm"`
}

// probe pings one parser's endpoint: 404 means the server does not load it.
// Probing the ping costs a few hundred bytes where /openapi/v3 is 1.8 MB.
func (c *Client) probe(ctx context.Context, parser string) (openapiMeta, error) {
	var meta openapiMeta
	op := "probe parser " + parser
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL+"/slurm/"+parser+"/ping/", nil)
	if err != nil {
		return meta, err
	}
	if err := c.authorize(ctx, req); err != nil {
		return meta, err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return meta, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return meta, fmt.Errorf("%s: %w", op, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return meta, ErrNotFound
	}
	if err := checkResponse(op, c.user, resp.StatusCode, body); err != nil {
		return meta, err
	}
	var wrap struct {
		Meta  openapiMeta `json:"meta"`
		Pings []struct {
			Responding bool   `json:"responding"`
			Status     string `json:"status"`
		} `json:"pings"`
	}
	if err := json.Unmarshal(body, &wrap); err != nil {
		return meta, fmt.Errorf("%s: decode: %w", op, err)
	}
	for _, p := range wrap.Pings {
		if p.Responding {
			return wrap.Meta, nil
		}
	}
	// slurmrestd answers a ping made with a bad token with 200 and
	// responding=false, as it does when slurmctld is down. A conditional jobs
	// query that matches nothing tells the two apart at no cost.
	if err := c.get(ctx, op, "/slurm/"+parser+"/jobs/?update_time="+noChangeSince); err != nil {
		return meta, err
	}
	return meta, fmt.Errorf("%s: slurmrestd answers but no slurmctld responds to its ping", op)
}

// get makes a raw GET and checks the answer.
func (c *Client) get(ctx context.Context, op, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL+path, nil)
	if err != nil {
		return err
	}
	if err := c.authorize(ctx, req); err != nil {
		return err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, c.user, resp.StatusCode, body)
}

// newBackend builds the parser's adapter (see parsers.gen.go).
func (c *Client) newBackend(parser string) (backend, error) {
	if newAdapter, ok := adapters[parser]; ok {
		return newAdapter(c)
	}
	return nil, fmt.Errorf("slurmrest: no adapter for parser %s", parser)
}

// authorize sets the identity headers of a request.
func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	user := c.user
	if u, ok := ctx.Value(userKey{}).(string); ok && u != "" {
		user = u
	}
	tok, err := c.cfg.Tokens.Token(ctx, user)
	if err != nil {
		return fmt.Errorf("token for %s: %w", user, err)
	}
	req.Header.Set("X-SLURM-USER-NAME", user)
	req.Header.Set("X-SLURM-USER-TOKEN", tok)
	return nil
}

// editor is the generated clients' request editor.
func (c *Client) editor(ctx context.Context, req *http.Request) error { return c.authorize(ctx, req) }

func (c *Client) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, userKey{}, c.user)
}

// Info says which server and parser the client talks to.
func (c *Client) Info() ServerInfo { return c.info }

// User is the identity calls are made as.
func (c *Client) User() string { return c.user }

// As returns a client that makes its calls as user: with a root or SlurmUser
// token slurmrestd trusts the name; with a KeySigner the token is minted for
// user.
func (c *Client) As(user string) *Client {
	cp := *c
	cp.user = user
	return &cp
}

// Ping pings the controllers. It returns an *AuthError when slurmrestd
// answers but does not accept the token, and an error when no controller
// responds.
func (c *Client) Ping(ctx context.Context) ([]Ping, error) {
	pings, err := c.be.ping(c.ctx(ctx))
	if err != nil {
		return nil, err
	}
	for _, p := range pings {
		if p.Responding {
			return pings, nil
		}
	}
	status := ""
	if len(pings) > 0 {
		status = pings[0].Status
	}
	if strings.Contains(strings.ToLower(status), "authentication") {
		return pings, &AuthError{Op: "ping", User: c.user, Status: http.StatusOK, Detail: status}
	}
	// v0.0.42 says only "DOWN" for a bad token too: ask a question that
	// fails with the real reason.
	if err := c.get(c.ctx(ctx), "ping", "/slurm/"+c.info.Parser+"/jobs/?update_time="+noChangeSince); err != nil {
		return pings, err
	}
	return pings, fmt.Errorf("ping: no slurmctld responds (status %q)", status)
}

// Jobs lists jobs. With a non-zero since it is conditional: when nothing
// changed since then the answer is Unchanged and costs slurmctld almost
// nothing. Pass the previous answer's Updated as since.
func (c *Client) Jobs(ctx context.Context, since time.Time) (JobList, error) {
	return c.be.jobs(c.ctx(ctx), since)
}

// Job returns one job; errors.Is(err, ErrNotFound) when Slurm has no such job.
func (c *Client) Job(ctx context.Context, id int64) (Job, error) { return c.be.job(c.ctx(ctx), id) }

// Submit submits a batch job as user.
func (c *Client) Submit(ctx context.Context, user string, spec JobSpec) (SubmitResult, error) {
	if spec.Script == "" {
		return SubmitResult{}, errors.New("submit: empty script")
	}
	cc := c.As(user)
	res, err := cc.be.submit(cc.ctx(ctx), spec)
	if err == nil {
		c.log.Info("job submitted", "job_id", res.JobID, "user", user, "account", spec.Account, "partition", spec.Partition)
	}
	return res, err
}

// Update changes a job, named by its ID (see UpdateRef).
func (c *Client) Update(ctx context.Context, id int64, u JobUpdate) error {
	return c.UpdateRef(ctx, RefOf(id), u)
}

// UpdateRef changes what ref names. Give a record's own ID (RefOf(j.ID)),
// which reaches that record alone, be it an array task (a record that runs
// holds no pending tasks, so even the array's own record is then one
// task) or a heterogeneous component: slurmrestd refuses an array task's
// ref ("4242_7": "Submit job update against Array Job's JobID") and reads
// a component's ("4300+1") as its leader's, 4300.
func (c *Client) UpdateRef(ctx context.Context, ref JobRef, u JobUpdate) error {
	return c.updateRef(c.ctx(ctx), ref, u)
}

func (c *Client) updateRef(ctx context.Context, ref JobRef, u JobUpdate) error {
	return c.be.update(ctx, ref, u)
}

// Signal sends sig ("USR1", "SIGTERM", "15") to the job's processes, or
// only to its batch shell when batchOnly is set. The job is named by its
// ID (see [RefOf]); SignalRef reaches one array task or heterogeneous
// component alone.
func (c *Client) Signal(ctx context.Context, id int64, sig string, batchOnly bool) error {
	return c.SignalRef(ctx, RefOf(id), sig, batchOnly)
}

// SignalRef is Signal of what ref names ([Job.Ref]).
func (c *Client) SignalRef(ctx context.Context, ref JobRef, sig string, batchOnly bool) error {
	if sig == "" {
		return errors.New("signal: no signal given")
	}
	err := c.be.signal(c.ctx(ctx), ref, sig, batchOnly)
	if err == nil {
		c.log.Info("job signalled", "job_id", string(ref), "signal", sig, "batch_only", batchOnly)
	}
	return err
}

// Cancel cancels a job by its ID: for a job array's record the whole
// array, for a heterogeneous job's leader the whole heterogeneous job
// (see CancelRef).
func (c *Client) Cancel(ctx context.Context, id int64) error { return c.CancelRef(ctx, RefOf(id)) }

// CancelRef cancels what ref names ([Job.Ref]): one array task, or one
// heterogeneous component, alone.
func (c *Client) CancelRef(ctx context.Context, ref JobRef) error {
	err := c.be.cancel(c.ctx(ctx), ref)
	if err == nil {
		c.log.Info("job cancelled", "job_id", string(ref))
	}
	return err
}

// RequeueOptions tune Requeue.
type RequeueOptions struct {
	// Hold keeps the requeued job held until someone releases it.
	Hold bool
	// Reason is logged with the requeue.
	Reason string
}

// Requeue puts a running job back in the queue, named by its ID (see
// RequeueRef).
func (c *Client) Requeue(ctx context.Context, id int64, opt RequeueOptions) error {
	return c.RequeueRef(ctx, RefOf(id), opt)
}

// RequeueRef puts what ref names back in the queue: one array task alone
// ("4242_7"). Slurm requeues only whole heterogeneous jobs: a component
// ("4300+1") is refused with ErrNotFound ("Invalid job id"). On parser
// v0.0.45 it uses REST (/job/{id}/requeue); on older parsers it uses the
// Requeuer (`scontrol requeue` authenticated by SLURM_JWT). A job submitted
// with --no-requeue is first made requeueable (an array task cannot be by
// its task ref: make it requeueable with UpdateRef of its own ID first).
// Every path is logged.
func (c *Client) RequeueRef(ctx context.Context, ref JobRef, opt RequeueOptions) error {
	ctx = c.ctx(ctx)
	do := func() (string, error) {
		err := c.be.requeue(once(ctx), ref, opt.Hold)
		if !errors.Is(err, ErrUnsupported) {
			return "rest", err
		}
		if c.cfg.Requeuer == nil {
			return "none", fmt.Errorf("requeue job %s: parser %s has no REST requeue and no fallback is configured: %w",
				ref, c.info.Parser, ErrUnsupported)
		}
		tok, terr := c.cfg.Tokens.Token(ctx, c.user)
		if terr != nil {
			return "scontrol", terr
		}
		return "scontrol", c.cfg.Requeuer.Requeue(ctx, ref, opt.Hold, tok)
	}
	path, err := do()
	if errors.Is(err, ErrRequeueDisabled) && strings.ContainsAny(string(ref), "_+") {
		// An update by this ref would miss the task, or reach the leader.
		return fmt.Errorf("requeue job %s: it is not requeueable, and an array task or het component is made requeueable only by its own job id (UpdateRef): %w", ref, err)
	}
	if errors.Is(err, ErrRequeueDisabled) {
		c.log.Info("job not requeueable: setting requeue=true first", "job_id", string(ref))
		if uerr := c.updateRef(ctx, ref, JobUpdate{Requeue: ptr(true)}); uerr != nil {
			return fmt.Errorf("requeue job %s: make it requeueable: %w", ref, uerr)
		}
		path, err = do()
	}
	if err != nil {
		c.log.Warn("job requeue failed", "job_id", string(ref), "path", path, "hold", opt.Hold, "error", err)
		return err
	}
	c.log.Info("job requeued", "job_id", string(ref), "path", path, "hold", opt.Hold, "parser", c.info.Parser, "reason", opt.Reason)
	return nil
}

// Nodes lists the nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) { return c.be.nodes(c.ctx(ctx)) }

// The node states UpdateNode sets most: DRAIN takes a node out of
// scheduling and lets its running jobs finish (it needs a reason);
// RESUME puts a drained node back.
const (
	NodeDrain  = "DRAIN"
	NodeResume = "RESUME"
)

// UpdateNode sets the state of a node, with a reason where the state
// takes one (DRAIN, DOWN, FAIL): POST /node/{name}, as `scontrol update
// nodename=NAME state=STATE reason=REASON` does.
func (c *Client) UpdateNode(ctx context.Context, name, state, reason string) error {
	switch {
	case name == "" || strings.ContainsAny(name, "/?#%, \t\n"):
		return fmt.Errorf("update node %q: not a node name", name)
	case state == "" || strings.ToUpper(state) != state:
		return fmt.Errorf("update node %s: state %q: want a Slurm node state in capitals, such as DRAIN or RESUME", name, state)
	case (state == NodeDrain || state == "DOWN" || state == "FAIL") && reason == "":
		return fmt.Errorf("update node %s to %s: Slurm needs a reason", name, state)
	}
	return c.be.updateNode(c.ctx(ctx), name, []string{state}, reason)
}

// Partitions lists the partitions.
func (c *Client) Partitions(ctx context.Context) ([]Partition, error) {
	return c.be.partitions(c.ctx(ctx))
}

// Shares returns the fair-share tree.
func (c *Client) Shares(ctx context.Context) ([]Share, error) { return c.be.shares(c.ctx(ctx)) }

// Accounts lists the accounts.
func (c *Client) Accounts(ctx context.Context) ([]Account, error) {
	return c.be.accounts(c.ctx(ctx), false)
}

// AccountsWithCoordinators lists the accounts with their direct
// coordinators (Accounts leaves Coordinators empty).
func (c *Client) AccountsWithCoordinators(ctx context.Context) ([]Account, error) {
	return c.be.accounts(c.ctx(ctx), true)
}

// CreateAccount creates an account with its association on cluster in one
// request (an association posted before its account would be an orphan).
// It returns ErrExists when the account exists.
func (c *Client) CreateAccount(ctx context.Context, cluster string, a AccountSpec) error {
	return c.be.createAccount(c.ctx(ctx), cluster, a)
}

// DeleteAccount removes an account. Slurm removes the associations below
// it but not child accounts' records: delete leaves first.
func (c *Client) DeleteAccount(ctx context.Context, name string) error {
	return c.be.deleteAccount(c.ctx(ctx), name)
}

// Associations lists associations.
func (c *Client) Associations(ctx context.Context, f AssociationFilter) ([]Association, error) {
	return c.be.associations(c.ctx(ctx), f)
}

// SetAssociations modifies existing associations (or adds user associations
// under existing accounts), all in one request. Fields left zero are not
// sent; but slurmdbd clears the TRES limits (GrpTRES, GrpTRESMins,
// MaxTRESPerJob) of an existing association that a write leaves out, so
// send every limit the association should keep.
func (c *Client) SetAssociations(ctx context.Context, a []Association) error {
	for _, x := range a {
		if x.Account == "" || x.Cluster == "" {
			return fmt.Errorf("set association: account and cluster are required (got %q on %q)", x.Account, x.Cluster)
		}
	}
	return c.be.setAssociations(c.ctx(ctx), a)
}

// DeleteAssociation removes one association (user "" is the account's own).
func (c *Client) DeleteAssociation(ctx context.Context, cluster, account, user string) error {
	return c.be.deleteAssociation(c.ctx(ctx), cluster, account, user)
}

// Users lists the users.
func (c *Client) Users(ctx context.Context) ([]User, error) { return c.be.users(c.ctx(ctx)) }

// AddUser adds a user with associations under existing accounts.
func (c *Client) AddUser(ctx context.Context, cluster string, u UserSpec) error {
	if len(u.Accounts) == 0 {
		return fmt.Errorf("add user %s: no accounts", u.Name)
	}
	return c.be.addUser(c.ctx(ctx), cluster, u)
}

// SetDefaultAccount changes a user's default account (which must be one
// of their associations).
func (c *Client) SetDefaultAccount(ctx context.Context, user, account string) error {
	return c.be.setDefaultAccount(c.ctx(ctx), user, account)
}

// DeleteUser removes a user and all their associations.
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	return c.be.deleteUser(c.ctx(ctx), name)
}

// QOS lists the QOS.
func (c *Client) QOS(ctx context.Context) ([]QOS, error) { return c.be.qos(c.ctx(ctx)) }

// SetQOS creates or updates a QOS (slurmdbd treats the post as an upsert).
func (c *Client) SetQOS(ctx context.Context, q QOS) error { return c.be.setQOS(c.ctx(ctx), q) }

// DeleteQOS removes a QOS.
func (c *Client) DeleteQOS(ctx context.Context, name string) error {
	return c.be.deleteQOS(c.ctx(ctx), name)
}

// result checks a generated response: status, error body, and a decoded
// success body.
func result[T any](op, user string, status int, body []byte, ok *T) (*T, error) {
	if err := checkResponse(op, user, status, body); err != nil {
		return nil, err
	}
	if ok == nil {
		return nil, fmt.Errorf("%s: HTTP %d with a body that does not decode", op, status)
	}
	return ok, nil
}
