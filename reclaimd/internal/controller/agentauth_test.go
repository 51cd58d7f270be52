package controller_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
)

// TestImpostorAgent: a process that answers on an agent's port with "all
// idle" drives nothing, however it forges the answer; each refused
// snapshot is counted by reason and logged. The real agent, signing with
// the shared secret, gets the idle job warned and cancelled.
func TestImpostorAgent(t *testing.T) {
	// sign answers the request's nonce with secret over body.
	sign := func(secret string) func(r *http.Request, body []byte) string {
		return func(r *http.Request, body []byte) string {
			return agent.Sign([]byte(secret), r.Header.Get(agent.HeaderNonce), body)
		}
	}
	secret, _ := agentSecret()
	tests := map[string]struct {
		edit       func(s *agent.Snapshot) // the real agent's idle snapshot, changed
		sign       func(r *http.Request, body []byte) string
		wantReason string // "": believed
	}{
		"the real agent": {sign: sign(string(secret))},
		"unsigned":       {wantReason: collect.RefusedSignature},
		"a wrong secret": {sign: sign("guessed"), wantReason: collect.RefusedSignature},
		// What the real agent signed for a request of the impostor's own
		// (its own nonce), sent again to the controller.
		"a signature for another nonce (a replay)": {wantReason: collect.RefusedSignature,
			sign: func(_ *http.Request, body []byte) string {
				return agent.Sign(secret, strings.Repeat("ab", 16), body)
			}},
		"a body changed after signing": {wantReason: collect.RefusedSignature,
			sign: func(r *http.Request, body []byte) string {
				return agent.Sign(secret, r.Header.Get(agent.HeaderNonce), append([]byte(" "), body...))
			}},
		"invented history before the agent's start": {sign: sign(string(secret)), wantReason: collect.RefusedHistory,
			edit: func(s *agent.Snapshot) {
				started := s.GPUs[0].Samples[len(s.GPUs[0].Samples)-1].At // the agent "started" at its newest sample
				s.StartedAt = &started
			}},
		"no start time": {sign: sign(string(secret)), wantReason: collect.RefusedHistory,
			edit: func(s *agent.Snapshot) { s.StartedAt = nil }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBed(t, "26.05", cancelRules, 0) // the real agent: every GPU idle
			impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s := b.agent.Snapshot()
				if tc.edit != nil {
					tc.edit(&s)
				}
				body, err := json.Marshal(s)
				if err != nil {
					t.Error(err)
				}
				if tc.sign != nil {
					w.Header().Set(agent.HeaderSignature, tc.sign(r, body))
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			}))
			defer impostor.Close()
			b.agentURL = func(string) string { return impostor.URL }
			b.ctl = b.newController()
			var got []string
			for range 4 {
				d, _ := b.tick() // a cycle without any agent's samples fails: its error is not the point
				got = append(got, kinds(d)...)
			}
			refused := counter(t, b.metrics.AgentRefusals.WithLabelValues(collect.RefusedSignature)) +
				counter(t, b.metrics.AgentRefusals.WithLabelValues(collect.RefusedHistory))
			if tc.wantReason == "" {
				if diff := cmp.Diff([]string{"warn", "cancel"}, got); diff != "" || refused != 0 {
					t.Errorf("decided (-want +got):\n%s\n%v snapshots refused\nlog:\n%s", diff, refused, b.logs.String())
				}
				return
			}
			if len(got) != 0 || len(b.actions()) != 0 || len(b.noticesSent()) != 0 {
				t.Errorf("an impostor drove %v (requests %v, notices %v)", got, b.actions(), b.noticesSent())
			}
			if v := counter(t, b.metrics.AgentRefusals.WithLabelValues(tc.wantReason)); v != 4 || refused != 4 {
				t.Errorf("refused{reason=%s} = %v (all reasons %v), want 4", tc.wantReason, v, refused)
			}
			if logs := b.logs.String(); !strings.Contains(logs, `msg="agent snapshot refused: its GPUs count as stale this cycle" node=gpu1 reason=`+tc.wantReason) {
				t.Errorf("no log line of the refusal:\n%s", logs)
			}
		})
	}
}
