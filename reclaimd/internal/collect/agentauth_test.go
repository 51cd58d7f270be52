package collect

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
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
