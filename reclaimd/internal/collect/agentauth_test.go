package collect

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func idle(at time.Time) agent.Point {
	zero := 0.0
	return agent.Point{At: at, Util: &zero, MemActivity: &zero, JobIDs: []int64{}}
}

// An agent's answer is believed only when signed with the shared secret
// for this request's nonce, and only when no sample is older than the
// agent's start.
func TestAgentsVerify(t *testing.T) {
	secret := []byte("shared")
	started := t0
	before := t0.Add(-time.Minute)
	tests := map[string]struct {
		snap        agent.Snapshot
		agentSecret []byte // nil: the answer is not signed
		ours        func() ([]byte, error)
		wantRefused string // "": believed
		wantErr     string
	}{
		"signed": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true, StartedAt: &started,
			GPUs: []agent.GPUWindow{{Samples: []agent.Point{idle(t0), idle(t0.Add(10 * time.Second))}}}}, agentSecret: secret},
		"no samples, no start": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true, GPUs: []agent.GPUWindow{}}, agentSecret: secret},
		"unsigned": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true}, wantRefused: RefusedSignature,
			wantErr: "snapshot signature: none"},
		"another secret": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true}, agentSecret: []byte("other"), wantRefused: RefusedSignature,
			wantErr: "snapshot signature: wrong"},
		"no secret here": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true}, agentSecret: secret, ours: nil, wantRefused: RefusedSignature,
			wantErr: "no shared secret for the agents (agents.token_file)"},
		"our secret unusable": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true}, agentSecret: secret, wantRefused: RefusedSignature,
			ours: func() ([]byte, error) { return nil, errors.New("mode 0644") }, wantErr: "agents.token_file: mode 0644"},
		"history before the start": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true, StartedAt: &started,
			GPUs: []agent.GPUWindow{{Samples: []agent.Point{idle(before), idle(t0)}}}}, agentSecret: secret, wantRefused: RefusedHistory,
			wantErr: "a sample at 2026-03-01T11:59:00Z, before the agent's start at 2026-03-01T12:00:00Z"},
		"samples without a start": {snap: agent.Snapshot{Node: "gpu1", SourceOK: true,
			GPUs: []agent.GPUWindow{{Samples: []agent.Point{idle(t0)}}}}, agentSecret: secret, wantRefused: RefusedHistory,
			wantErr: "no started_at"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := json.Marshal(tc.snap)
				if tc.agentSecret != nil {
					w.Header().Set(agent.HeaderSignature, agent.Sign(tc.agentSecret, r.Header.Get(agent.HeaderNonce), body))
				}
				w.Write(body)
			}))
			defer srv.Close()
			ours := tc.ours
			if ours == nil && name != "no secret here" {
				ours = func() ([]byte, error) { return secret, nil }
			}
			a := &Agents{URL: func(string) string { return srv.URL }, Secret: ours}
			res, err := a.Collect(t.Context(), []string{"gpu1", "gpu2"}) // gpu2 answers too: Collect itself succeeds
			if err != nil && tc.wantRefused == "" {
				t.Fatal(err)
			}
			if got := res.Refused["gpu1"]; got != tc.wantRefused {
				t.Errorf("refused = %q, want %q (failed: %q)", got, tc.wantRefused, res.Failed["gpu1"])
			}
			if tc.wantRefused != "" && !strings.Contains(res.Failed["gpu1"], tc.wantErr) {
				t.Errorf("failed = %q, want %q", res.Failed["gpu1"], tc.wantErr)
			}
		})
	}
}

// Two requests carry two nonces: a signature cannot be used twice.
func TestAgentsNonceFresh(t *testing.T) {
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.Header.Get(agent.HeaderNonce)
		if len(n) != 32 || seen[n] {
			t.Errorf("nonce %q: not 32 hex digits, or seen before", n)
		}
		seen[n] = true
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	a := &Agents{URL: func(string) string { return srv.URL }, Secret: func() ([]byte, error) { return []byte("s"), nil }}
	for range 3 {
		_, _ = a.Collect(t.Context(), []string{"gpu1"})
	}
	if len(seen) != 3 {
		t.Errorf("%d nonces in 3 requests", len(seen))
	}
}

// TestAgentsReadToken: the controller presents each node's read token,
// derived from the shared secret (never the secret itself), to the agent
// of that node: a real agent's handler answers it, and one set up with
// another secret answers 401, which the controller reports with the
// agent's hint.
func TestAgentsReadToken(t *testing.T) {
	secret := []byte("shared")
	for name, tc := range map[string]struct {
		agentSecret []byte
		wantFailed  string // "": the snapshot is read
	}{
		"same secret":    {agentSecret: secret},
		"another secret": {agentSecret: []byte("other"), wantFailed: "agent answered HTTP 401"},
	} {
		t.Run(name, func(t *testing.T) {
			var auth []string
			ag := newReplayAgent(t, "gpu1", tc.agentSecret)
			h := ag.Handler()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth = append(auth, r.Header.Get("Authorization"))
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			a := &Agents{URL: func(string) string { return srv.URL }, Secret: func() ([]byte, error) { return secret, nil }}
			res, _ := a.Collect(t.Context(), []string{"gpu1"})
			if len(auth) != 1 || auth[0] != "Bearer "+string(agent.ReadToken(secret, "gpu1")) || strings.Contains(auth[0], string(secret)) {
				t.Errorf("Authorization sent = %q, want the read token of gpu1", auth)
			}
			if got := res.Failed["gpu1"]; tc.wantFailed == "" && got != "" || !strings.Contains(got, tc.wantFailed) {
				t.Errorf("failed = %q, want %q", got, tc.wantFailed)
			}
			if tc.wantFailed != "" && !strings.Contains(res.Failed["gpu1"], "agent.token_file") {
				t.Errorf("failed = %q: want the agent's hint", res.Failed["gpu1"])
			}
		})
	}
}

// newReplayAgent is a real agent of node over the source package's
// two-GPU replay, with one sample taken.
func newReplayAgent(t *testing.T, node string, secret []byte) *agent.Agent {
	t.Helper()
	rec, err := source.LoadRecording("../source/testdata/two-gpus.csv")
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Node: node, Source: source.NewReplay(rec, time.Now(), true), Window: time.Minute,
		Procs: agent.ProcFS{Root: t.TempDir()}, Logger: slog.New(slog.DiscardHandler),
		Secret: func() ([]byte, error) { return secret, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a
}
