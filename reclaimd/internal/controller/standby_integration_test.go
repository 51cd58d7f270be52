//go:build integration

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/pgtest"
	"github.com/strata-hpc/strata/internal/proctest"
	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// Two controllers of one cluster, each its own process (this test binary
// run again: TestMain), share one PostgreSQL database on the bed and one
// slurmrestd (the replayed one of the harness, which records every
// request), one node agent and one notice webhook. The clock is the
// harness's, read by both over HTTP, so the ladder's steps come when the
// test moves it.

// TestMain runs a controller process when the test binary is started as
// one (childEnv set), and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := runChild(); err != nil {
			fmt.Fprintln(os.Stderr, "controller process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const childEnv = "STRATA_TEST_RECLAIMD_CONTROLLER"

// childConfig is what a controller process is given (JSON in childEnv).
type childConfig struct {
	Holder       string        `json:"holder"`
	TTL          time.Duration `json:"ttl"`
	SlurmURL     string        `json:"slurm_url"`
	AgentURL     string        `json:"agent_url"`
	ClockURL     string        `json:"clock_url"`
	HookURL      string        `json:"hook_url"`
	PGURL        string        `json:"pg_url"`
	PGPassword   string        `json:"pg_password_file"`
	Rules        string        `json:"rules"`
	Tenants      string        `json:"tenants"`
	CycleEvery   time.Duration `json:"cycle_every"`
	ScontrolPath string        `json:"scontrol"`
}

// runChild is one controller process, as reclaimd run keeps it on
// PostgreSQL: the lease kept, the controller run under each term.
func runChild() error {
	var c childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &c); err != nil {
		return err
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := store.OpenDatabase(ctx, store.Database{Setting: c.PGURL, PasswordFile: c.PGPassword})
	if err != nil {
		return err
	}
	client, err := slurmrest.New(ctx, slurmrest.Config{URL: c.SlurmURL, User: "root", Tokens: slurmrest.StaticToken("replay-token"),
		Requeuer: slurmrest.ScontrolRequeuer{Path: c.ScontrolPath}, HTTPClient: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		return err
	}
	rules, err := reclaimrules.Parse([]byte(c.Rules))
	if err != nil {
		return err
	}
	tm, err := tenantmap.Parse([]byte(c.Tenants))
	if err != nil {
		return err
	}
	clock := func() time.Time {
		resp, err := http.Get(c.ClockURL)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		t, err := time.Parse(time.RFC3339Nano, string(b))
		if err != nil {
			panic(err)
		}
		return t
	}
	l := &lease.Lease{DB: st.DB(), Name: "reclaimd", Holder: c.Holder, TTL: c.TTL, Log: log}
	return l.Keep(ctx, func(ctx context.Context, term lease.Term) error {
		ctl, err := controller.New(controller.Config{Slurm: client, Store: st, Rules: func() reclaimrules.Rules { return rules },
			Collector: &collect.Agents{URL: func(string) string { return c.AgentURL }, Secret: agentSecret},
			Notifier:  notify.Webhook{URL: c.HookURL}, Tenants: func() *tenantmap.Map { return tm }, SignalBatchOnly: true,
			Now: clock, Log: log, Term: term, Lease: l.State, APIToken: apiTokenFunc})
		if err != nil {
			return err
		}
		return ctl.Run(ctx, c.CycleEvery)
	}, nil)
}

// standby is the harness with two controller processes on PostgreSQL.
type standby struct {
	*bed
	pg  pgtest.DB
	st  *store.Store // the test's own connection, to read what they did
	cfg childConfig
}

type child struct {
	cmd  *exec.Cmd
	logs *syncBuffer
}

func newStandby(t *testing.T, ttl time.Duration) *standby {
	b := newBed(t, "26.05", requeueRules, 0)
	s := &standby{bed: b, pg: pgtest.New(t)}
	var err error
	// The schema is made before the controllers start.
	if s.st, err = store.OpenDatabase(t.Context(), store.Database{Setting: s.pg.URL, PasswordFile: s.pg.PasswordFile}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.st.Close() })
	clock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, b.clock().Format(time.RFC3339Nano))
	}))
	t.Cleanup(clock.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n controller.Notice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			t.Errorf("notice: %v", err)
		}
		b.mu.Lock()
		b.notices = append(b.notices, n)
		b.mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	s.cfg = childConfig{TTL: ttl, SlurmURL: b.srv.URL, AgentURL: b.agentURL(jobNode), ClockURL: clock.URL, HookURL: hook.URL,
		PGURL: s.pg.URL, PGPassword: s.pg.PasswordFile, Rules: requeueRules, CycleEvery: 200 * time.Millisecond, ScontrolPath: "false",
		Tenants: `{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": "testbed", "admins": [],
		"tenants": [{"name": "research", "account": "testbed", "admins": [], "projects": []}]}`}
	return s
}

// start runs a controller process named holder.
func (s *standby) start(holder string) *child {
	s.t.Helper()
	c := s.cfg
	c.Holder = holder
	env, err := json.Marshal(c)
	if err != nil {
		s.t.Fatal(err)
	}
	ch := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), logs: &syncBuffer{}}
	ch.cmd.Env = append(os.Environ(), childEnv+"="+string(env))
	ch.cmd.Stdout, ch.cmd.Stderr = ch.logs, ch.logs
	if err := ch.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = ch.cmd.Process.Signal(syscall.SIGCONT)
		_ = ch.cmd.Process.Kill()
		_ = ch.cmd.Wait()
		if s.t.Failed() {
			s.t.Logf("controller %s's log:\n%s", holder, ch.logs.String())
		}
	})
	return ch
}

// holder is the controller that holds the lease now ("" when none) and
// its generation, as the database says.
func (s *standby) holder() (string, int64) {
	s.t.Helper()
	var h string
	var g int64
	err := s.st.DB().QueryRowContext(s.t.Context(), `SELECT holder, generation FROM leases WHERE name = 'reclaimd' AND expires_at > now()`).Scan(&h, &g)
	if err != nil {
		return "", 0
	}
	return h, g
}

func (s *standby) waitHolder(want string, within time.Duration) time.Duration {
	s.t.Helper()
	start := time.Now()
	for {
		if h, _ := s.holder(); h == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			h, g := s.holder()
			s.t.Fatalf("the lease is held by %q (generation %d) after %v; want %q", h, g, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcomes lists the job's records as "kind:outcome".
func (s *standby) outcomes() []string {
	s.t.Helper()
	recs, err := s.st.Job(s.t.Context(), jobID)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind+":"+r.Status)
	}
	return out
}

// step moves the clock 10 s on, lets the agent sample, and gives the
// controllers a few cycles (200 ms each) at the new time.
func (s *standby) step() {
	s.t.Helper()
	s.setClock(s.clock().Add(10 * time.Second))
	s.sample()
	time.Sleep(700 * time.Millisecond)
}

// stepUntil steps until the job's records are want, or fails after n steps.
func (s *standby) stepUntil(want []string, n int) {
	s.t.Helper()
	for range n {
		if cmp.Equal(want, s.outcomes()) {
			return
		}
		s.step()
	}
	if diff := cmp.Diff(want, s.outcomes()); diff != "" {
		s.t.Fatalf("records after %d steps (-want +got):\n%s", n, diff)
	}
}

func actionsLogged(c *child) int { return strings.Count(c.logs.String(), `msg="reclaim action"`) }

// TestStandbyFinishesTheLadderOfAKilledController: of two controllers,
// one acts (the warning); kill -9 of it between the warning and the
// signal; the standby takes the lease within the TTL and a try, and
// finishes the ladder from the store: the signal and the requeue once
// each, no second warning, the records one history.
func TestStandbyFinishesTheLadderOfAKilledController(t *testing.T) {
	ttl := 2 * time.Second
	s := newStandby(t, ttl)
	a := s.start("a")
	s.waitHolder("a", 10*time.Second)
	b := s.start("b")
	time.Sleep(ttl) // b tries, and stands by
	s.stepUntil([]string{"warn:done"}, 8)
	if h, g := s.holder(); h != "a" || g != 1 {
		t.Fatalf("holder %q generation %d; want a, 1", h, g)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	// The lease ends TTL after a's last renewal; b tries every TTL/3.
	took := s.waitHolder("b", ttl+ttl/3+2*time.Second)
	if took > ttl+ttl/3+500*time.Millisecond {
		t.Errorf("b took over %v after a was killed; want within %v", took, ttl+ttl/3)
	}
	if _, g := s.holder(); g != 2 {
		t.Errorf("generation after the take-over %d; want 2", g)
	}
	s.stepUntil([]string{"warn:done", "signal:done", "requeue:done"}, 8)
	for range 3 {
		s.step()
	}
	if diff := cmp.Diff([]string{"warn:done", "signal:done", "requeue:done"}, s.outcomes()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mark", "mark", "signal signal=SIGUSR1&flags=BATCH_JOB", "mark", "requeue "}, s.verbs()); diff != "" {
		t.Errorf("requests that change the job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"warn", "signal", "requeue"}, s.noticesSent()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if na, nb := actionsLogged(a), actionsLogged(b); na != 1 || nb != 2 {
		t.Errorf("actions logged: a %d, b %d; want 1 (the warning) and 2", na, nb)
	}
}

// TestPausedControllerMakesNoCall: the acting controller is stopped
// (SIGSTOP) in the middle of an action, after it decided the signal and
// while it records its intent; the standby takes the lease over and
// finishes the ladder; the paused one, continued (SIGCONT), makes no call
// and writes nothing. It is stopped at a known point: the test holds the
// records table locked, so its intent waits, and stops it once it does.
func TestPausedControllerMakesNoCall(t *testing.T) {
	ttl := 2 * time.Second
	s := newStandby(t, ttl)
	ctx := t.Context()
	a := s.start("a")
	s.waitHolder("a", 10*time.Second)
	b := s.start("b")
	time.Sleep(ttl)
	s.stepUntil([]string{"warn:done"}, 8)

	tx, err := s.st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE records IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	s.setClock(s.clock().Add(10 * time.Second)) // the signal is due
	s.sample()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := s.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO records%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's intent never waited on the records table\n%s", a.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	proctest.Pause(t, a.cmd.Process, 10*time.Second)
	before := len(s.srv.Requests())
	if err := tx.Commit(); err != nil { // a's insert goes through, its transaction waits for a
		t.Fatal(err)
	}
	s.waitHolder("b", ttl+ttl/3+2*time.Second)
	// The signal a was stopped in is not sent by b either: its state
	// was saved, its intent never committed. An action is made at most
	// once; this one, none.
	s.stepUntil([]string{"warn:done", "requeue:done"}, 8)
	afterB := len(s.srv.Requests())
	if diff := cmp.Diff([]string{"mark", "mark", "requeue "}, s.verbs()); diff != "" {
		t.Errorf("requests that change the job (-want +got):\n%s", diff)
	}
	if afterB <= before {
		t.Fatalf("b made no request")
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl)
	for range 2 {
		s.step()
	}
	if diff := cmp.Diff([]string{"mark", "mark", "requeue "}, s.verbs()); diff != "" {
		t.Errorf("requests that change the job after a continued (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"warn:done", "requeue:done"}, s.outcomes()); diff != "" {
		t.Errorf("records after a continued (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"warn", "requeue"}, s.noticesSent()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if na, nb := actionsLogged(a), actionsLogged(b); na != 1 || nb != 1 {
		t.Errorf("actions logged: a %d, b %d; want 1 (the warning) and 1 (the requeue)", na, nb)
	}
	if h, _ := s.holder(); h != "b" {
		t.Errorf("holder after a continued: %q", h)
	}
}
