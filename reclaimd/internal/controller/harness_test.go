package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// The captured job (internal/slurmrest/testdata/replay, job.json): job 1
// of alice, account testbed, on gpu1 with GPUs 0 and 1, 10 minutes to run.
const (
	jobID   = 1
	jobNode = "gpu1"
)

// Rules the tests run under: a job idle for a minute is warned, signalled
// 10 s later and requeued (or cancelled) 10 s after that.
const (
	requeueRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules",
	  "rules": [{"name": "test", "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
	    "warn": "10s", "signal": {"name": "USR1", "wait": "10s", "mode": "batch"}, "action": "requeue"}]}`
	cancelRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules",
	  "rules": [{"name": "idle-cancel", "idle": {"window": "1m"}, "warn": "10s", "action": "cancel"}]}`
	dryRunRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "dry_run": true,
	  "rules": [{"name": "idle-cancel", "idle": {"window": "1m"}, "warn": "10s", "action": "cancel"}]}`
)

// bed is one reclaimd controller over the network edges it has in
// production: slurmrestd (replayed from the captured records), a node
// agent (the real agent over a replayed GPU recording, served by
// httptest), the real SQLite store, and a notice webhook.
type bed struct {
	t       *testing.T
	release string
	srv     *slurmresttest.Server
	slurm   *slurmrest.Client
	dbPath  string
	st      *store.Store
	ctl     *controller.Controller
	metrics *controller.Metrics
	rules   reclaimrules.Rules
	agent   *agent.Agent
	tenants *tenantmap.Map // account testbed is tenant research's
	// agentURL gives the agent's URL by node.
	agentURL func(node string) string
	start    time.Time // the captured job's start
	job      slurmresttest.Record

	mu      sync.Mutex
	now     time.Time
	notices []controller.Notice

	// health is the node health the controllers get (nil: off).
	health *controller.Health
	// recovery configures the controller's recovery (newController).
	recovery controller.Recovery

	refuse   atomic.Bool // slurmrestd refuses connections
	scontrol string      // calls of the fake scontrol, the requeue fallback of Slurm 24.11
	logs     syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newBed starts everything but the controller's cycles. The agent's GPUs
// report util (0: idle) for the minute before the job's start plus
// 70 s, which is where the clock stands.
func newBed(t *testing.T, release, rules string, util int) *bed {
	t.Helper()
	ctx := t.Context()
	b := &bed{t: t, release: release, srv: slurmresttest.NewServer(t, slurmresttest.Dir(release))}
	tm, err := tenantmap.Parse([]byte(`{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": "testbed", "admins": [],
		"tenants": [{"name": "research", "account": "testbed", "admins": [], "projects": []}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b.tenants = tm

	// Slurm 24.11 has no REST requeue: the client runs scontrol, whose
	// exec edge is a script that logs its arguments.
	dir := t.TempDir()
	scontrol := filepath.Join(dir, "scontrol")
	b.scontrol = filepath.Join(dir, "calls")
	if err := os.WriteFile(scontrol, []byte("#!/bin/sh\necho \"$*\" >>"+b.scontrol+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A refused connection is a real one: dialled to a port nobody
	// listens on.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	var d net.Dialer
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if b.refuse.Load() {
			addr = refused
		}
		return d.DialContext(ctx, network, addr)
	}}
	b.slurm, err = slurmrest.New(ctx, slurmrest.Config{URL: b.srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token"),
		Requeuer: slurmrest.ScontrolRequeuer{Path: scontrol}, HTTPClient: &http.Client{Transport: tr, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	b.pinRecords()
	j, err := b.slurm.Job(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	b.start = j.StartTime
	b.now = b.start.Add(70 * time.Second)

	if b.rules, err = reclaimrules.Parse([]byte(rules)); err != nil {
		t.Fatal(err)
	}
	b.dbPath = filepath.Join(t.TempDir(), "reclaimd.db")
	b.openStore()
	b.startAgent(util)
	b.metrics = controller.NewMetrics()
	b.ctl = b.newController()
	return b
}

// pinRecords answers the requests a reclaim cycle makes that the capture
// made otherwise.
func (b *bed) pinRecords() {
	t, srv := b.t, b.srv
	parser := b.slurm.Info().Parser
	// The job as captured, for every re-read (later captures may hold the
	// job after a requeue under the same request).
	b.job = b.record("job")
	srv.Handle(http.MethodGet, b.jobPath(), slurmresttest.Reply(b.job))
	// Later cycles ask for the jobs changed since the first answer's
	// last_update: none, as slurmrestd says in jobs-unchanged.
	var list struct {
		LastUpdate struct {
			Number int64 `json:"number"`
		} `json:"last_update"`
	}
	if err := json.Unmarshal(b.record("jobs").Response, &list); err != nil {
		t.Fatal(err)
	}
	unchanged := b.record("jobs-unchanged")
	unchanged.Query = fmt.Sprintf("update_time=%d", list.LastUpdate.Number)
	srv.Add(unchanged)
	// slurmrestd takes a signal by either name; the capture sent USR1, the
	// rules name it SIGUSR1.
	sig := b.record("signal")
	sig.Query = strings.Replace(sig.Query, "signal=USR1", "signal=SIGUSR1", 1)
	srv.Add(sig)
	// A requeue with hold is answered as the captured one without; only
	// the query differs.
	if rq, ok := srv.Record("requeue"); ok {
		rq.Query = "Hold=true"
		srv.Add(rq)
	}
	// Every action first marks the job (POST /job/{id}). Records captured
	// before that exchange was have none; its answer is the envelope of
	// cancel's, the only part the client reads.
	upd, ok := srv.Record("update")
	if !ok {
		upd = b.record("cancel")
		upd.Name, upd.Method = "update", http.MethodPost
	}
	srv.Handle(http.MethodPost, "/slurm/"+parser+"/job/1", slurmresttest.Reply(upd))
}

func (b *bed) record(name string) slurmresttest.Record {
	b.t.Helper()
	r, ok := b.srv.Record(name)
	if !ok {
		b.t.Fatalf("slurm-%s has no %s.json record", b.release, name)
	}
	return r
}

func (b *bed) jobPath() string { return "/slurm/" + b.slurm.Info().Parser + "/job/1" }

func (b *bed) requeuePath() string { return b.jobPath() + "/requeue" }

// jobAs serves re-reads of the job as changed by edit, a function of the
// captured job's JSON (for the job as Slurm shows it after an action that
// went through before a crash).
func (b *bed) jobAs(edit func(job map[string]any)) {
	b.t.Helper()
	var resp map[string]any
	if err := json.Unmarshal(b.job.Response, &resp); err != nil {
		b.t.Fatal(err)
	}
	edit(resp["jobs"].([]any)[0].(map[string]any))
	rec := b.job
	var err error
	if rec.Response, err = json.Marshal(resp); err != nil {
		b.t.Fatal(err)
	}
	b.srv.Handle(http.MethodGet, b.jobPath(), slurmresttest.Reply(rec))
}

func (b *bed) openStore() {
	b.t.Helper()
	st, err := store.Open(b.t.Context(), b.dbPath)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { st.Close() })
	b.st = st
}

// restart is a crash and a restart of reclaimd: the store is opened
// afresh and a new controller made.
func (b *bed) restart() {
	b.t.Helper()
	if err := b.st.Close(); err != nil {
		b.t.Fatal(err)
	}
	b.openStore()
	b.ctl = b.newController()
}

func (b *bed) newController() *controller.Controller {
	b.t.Helper()
	return b.newControllerOver(&collect.Agents{URL: b.agentURL, Secret: agentSecret})
}

// newControllerOver is newController with another metrics source.
func (b *bed) newControllerOver(col controller.Collector) *controller.Controller {
	b.t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n controller.Notice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			b.t.Errorf("notice: %v", err)
		}
		b.mu.Lock()
		b.notices = append(b.notices, n)
		b.mu.Unlock()
	}))
	b.t.Cleanup(hook.Close)
	ctl, err := controller.New(controller.Config{Slurm: b.slurm, Store: b.st, Rules: func() reclaimrules.Rules { return b.rules },
		Collector: col, Notifier: notify.Webhook{URL: hook.URL},
		Tenants: func() *tenantmap.Map { return b.tenants }, SignalBatchOnly: true, Metrics: b.metrics, Now: b.clock, Health: b.health, Recovery: b.recovery, APIToken: apiTokenFunc,
		Log: slog.New(slog.NewTextHandler(&b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		b.t.Fatal(err)
	}
	return ctl
}

// startAgent runs the node agent of gpu1 over a recording in which every
// GPU shows util, its window filled up to the clock.
func (b *bed) startAgent(util int) {
	b.startAgentRows(func(int) (int, string) { return util, "" })
}

// startAgentRows runs (or replaces) the node agent of gpu1 over a
// recording whose 8 GPUs show, from the job's start to the clock, the util
// and the jobs (of the processes: the recording's jobs column) that row
// gives each.
func (b *bed) startAgentRows(row func(gpu int) (util int, jobs string)) {
	b.t.Helper()
	b.startAgentProcs(func(g int) (int, string, string) {
		util, jobs := row(g)
		return util, "", jobs
	})
}

// startAgentProcs is startAgentRows with each GPU's process ids too,
// which the agent looks up in a /proc of its own that has none of them:
// processes it cannot tie to a job.
func (b *bed) startAgentProcs(row func(gpu int) (util int, pids, jobs string)) {
	b.t.Helper()
	var csv strings.Builder
	csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib,pids,jobs\n")
	for off := 0; off <= 10; off += 10 {
		for g := range 8 {
			util, pids, jobs := row(g)
			fmt.Fprintf(&csv, "%d,%d,%d,%d,2048,%s,%s\n", off, g, util, util/2, pids, jobs)
		}
	}
	rec, err := source.ParseRecording(jobNode, strings.NewReader(csv.String()))
	if err != nil {
		b.t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Node: jobNode, Source: source.NewReplay(rec, time.Time{}, true), Interval: 10 * time.Second,
		Window: 5 * time.Minute, Now: b.clock, Procs: agent.ProcFS{Root: b.t.TempDir()},
		Logger: slog.New(slog.DiscardHandler), Secret: agentSecret})
	if err != nil {
		b.t.Fatal(err)
	}
	b.agent = a
	srv := httptest.NewServer(a.Handler())
	b.t.Cleanup(srv.Close)
	b.agentURL = func(node string) string {
		if node != jobNode {
			return "http://127.0.0.1:1" // no agent there
		}
		return srv.URL
	}
	now := b.clock()
	for at := b.start; !at.After(now); at = at.Add(10 * time.Second) {
		b.setClock(at)
		b.sample()
	}
}

// agentSecret is the secret the test agents and the controller share.
func agentSecret() ([]byte, error) { return []byte("shared agent secret for tests"), nil }

func (b *bed) clock() time.Time { b.mu.Lock(); defer b.mu.Unlock(); return b.now }

func (b *bed) setClock(t time.Time) { b.mu.Lock(); b.now = t; b.mu.Unlock() }

func (b *bed) sample() {
	b.t.Helper()
	if err := b.agent.SampleOnce(b.t.Context()); err != nil {
		b.t.Fatalf("agent sample: %v", err)
	}
}

// tick moves the clock 10 s on, the agent samples, and a cycle runs.
func (b *bed) tick() (decide.Decision, error) {
	b.t.Helper()
	b.setClock(b.clock().Add(10 * time.Second))
	b.sample()
	return b.ctl.Cycle(b.t.Context())
}

// mustTick is tick for a cycle that must succeed; it returns the kinds of
// its actions.
func (b *bed) mustTick() []string {
	b.t.Helper()
	d, err := b.tick()
	if err != nil {
		b.t.Fatalf("cycle at +%s: %v\nlog:\n%s", b.clock().Sub(b.start), err, b.logs.String())
	}
	return kinds(d)
}

func kinds(d decide.Decision) []string {
	var out []string
	for _, a := range d.Actions {
		out = append(out, string(a.Kind))
	}
	return out
}

// outcomes lists the job's records as "kind:outcome".
func (b *bed) outcomes(id int64) []string {
	b.t.Helper()
	recs, err := b.st.Job(b.t.Context(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind+":"+r.Status)
	}
	return out
}

// actions are the requests that change the job: marks, signals, cancels,
// REST requeues and scontrol requeues.
func (b *bed) actions() []string {
	b.t.Helper()
	var out []string
	for _, r := range b.srv.Requests() {
		switch {
		case r.Method == http.MethodPost && r.Path == b.jobPath():
			var body struct {
				AdminComment string `json:"admin_comment"`
			}
			_ = json.Unmarshal(r.Body, &body)
			out = append(out, "mark "+body.AdminComment)
		case r.Method == http.MethodDelete && r.Query == "":
			out = append(out, "cancel")
		case r.Method == http.MethodDelete:
			out = append(out, "signal "+r.Query)
		case r.Path == b.requeuePath():
			out = append(out, "requeue "+r.Query)
		}
	}
	calls, err := os.ReadFile(b.scontrol)
	if err != nil && !os.IsNotExist(err) {
		b.t.Fatal(err)
	}
	for _, c := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		if c != "" {
			out = append(out, "scontrol "+c)
		}
	}
	return out
}

// verbs is actions without the marks' text.
func (b *bed) verbs() []string {
	var out []string
	for _, a := range b.actions() {
		if strings.HasPrefix(a, "mark ") {
			a = "mark"
		}
		out = append(out, a)
	}
	return out
}

// intent records an open intent as a crash between the intent and the
// outcome leaves it, for the captured job's run unless jobStart is set.
func (b *bed) intent(id int64, kind string, jobStart time.Time) int64 {
	b.t.Helper()
	if jobStart.IsZero() {
		jobStart = b.start
	}
	ev := decide.Evidence{JobStart: jobStart, TotalGPUs: 2, IdleGPUs: 2, GPUs: []decide.GPUEvidence{
		{GPU: decide.GPUKey{Node: jobNode, Index: 0}, Idle: true}, {GPU: decide.GPUKey{Node: jobNode, Index: 1}, Idle: true}}}
	raw, err := json.Marshal(ev)
	if err != nil {
		b.t.Fatal(err)
	}
	rid, err := b.st.Intent(b.t.Context(), store.Record{JobID: id, Tenant: "research", Account: "testbed", User: "alice",
		Kind: kind, Rule: b.rules.Rules[0].Name, Reason: "crash test", Evidence: raw, DecidedAt: b.clock()})
	if err != nil {
		b.t.Fatal(err)
	}
	return rid
}

func (b *bed) pending() int {
	b.t.Helper()
	p, err := b.st.Pending(b.t.Context())
	if err != nil {
		b.t.Fatal(err)
	}
	return len(p)
}

func (b *bed) noticesSent() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, n := range b.notices {
		out = append(out, n.Action)
	}
	return out
}

// failWith answers method and path with an HTTP error as slurmrestd
// gives one.
func failWith(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"errors": [{"description": "injected failure", "error_number": 9000, "error": "Unspecified error"}], "warnings": []}`)
	})
}

// apiToken is the API's bearer token in the tests (api.token_file).
var apiToken = []byte("test-api-token")

func apiTokenFunc() ([]byte, error) { return apiToken, nil }

// withToken presents the API token on every request, as the portal does.
func withToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+string(apiToken))
		h.ServeHTTP(w, r)
	})
}
