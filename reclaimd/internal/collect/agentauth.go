package collect

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
)

// Reasons of a refused snapshot (Result.Refused, and the controller's
// strata_reclaim_agent_snapshots_refused_total{reason}).
const (
	RefusedSignature = "signature" // not signed with the shared secret, or no secret here
	RefusedHistory   = "history"   // a sample older than the agent's own start, or no start
)

// refusal is a snapshot the controller must not believe, whatever it says.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// nonce is a fresh challenge for one request: the agent's signature must
// answer it, so an old signed snapshot cannot be replayed.
func nonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("agent nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// verify checks that the answer is signed by an agent that holds the
// shared secret, for this request's nonce and this body.
func (a *Agents) verify(n string, h http.Header, body []byte) error {
	if a.Secret == nil {
		return &refusal{RefusedSignature, errors.New("no shared secret for the agents (agents.token_file): a snapshot cannot be told from a forgery")}
	}
	secret, err := a.Secret()
	if err != nil {
		return &refusal{RefusedSignature, fmt.Errorf("agents.token_file: %w", err)}
	}
	if err := agent.Verify(secret, n, body, h.Get(agent.HeaderSignature)); err != nil {
		return &refusal{RefusedSignature, err}
	}
	return nil
}

// checkHistory refuses a snapshot with a sample older than the agent's
// own first sample: a history the agent cannot have (an agent that
// restarted keeps nothing from before).
func checkHistory(snap snapshot) error {
	var oldest time.Time
	for _, g := range snap.GPUs {
		for _, p := range g.Samples {
			if oldest.IsZero() || p.At.Before(oldest) {
				oldest = p.At
			}
		}
	}
	switch {
	case oldest.IsZero():
		return nil
	case snap.StartedAt == nil:
		return &refusal{RefusedHistory, errors.New("agent snapshot has samples but no started_at: upgrade the agent")}
	case oldest.Before(*snap.StartedAt):
		return &refusal{RefusedHistory, fmt.Errorf("agent snapshot has a sample at %s, before the agent's start at %s: a history it cannot have",
			oldest.UTC().Format(time.RFC3339), snap.StartedAt.UTC().Format(time.RFC3339))}
	}
	return nil
}
