package agent

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// How an agent proves to the controller that a snapshot is its own. Port
// 9810 is unprivileged: when the agent is down, any user of the node can
// answer on it, so the controller must not believe whatever answers. The
// agent and the controller share a secret (agent.token_file and
// agents.token_file, the same file). For each request the controller
// sends a fresh random nonce in HeaderNonce; the agent answers with
// HeaderSignature, an HMAC-SHA256 under the secret of the nonce and the
// exact body it sends. The controller checks it before it reads the body:
// without the secret no one can sign, and an old signed snapshot does not
// match a new nonce. The secret itself never crosses the network, so a
// process that answers in the agent's place learns nothing from the
// controller's request.
//
// The other way, the controller proves it may read: a snapshot names
// every job on the node, its user and account, so GET /v1/snapshot (and
// any /v1 path) wants "Authorization: Bearer <ReadToken(secret, node)>",
// 401 with a hint without it. The token is derived from the shared secret
// and the node's name rather than the secret itself, for the same reason
// as above: whatever answers in an agent's place learns the token of that
// one node, which opens no other agent and signs no snapshot.
const (
	HeaderNonce     = "X-Strata-Nonce"
	HeaderSignature = "X-Strata-Signature"
	// signaturePrefix names the scheme, so that it can change.
	signaturePrefix = "hmac-sha256="
	// domain keeps these MACs apart from any other use of the secret.
	domain = "strata reclaimd agent snapshot v1\n"
	// readDomain keeps the read tokens apart from the signatures.
	readDomain = "strata reclaimd agent read v1\n"
)

// ReadToken is the bearer token that reads node's agent: an HMAC-SHA256
// under the shared secret of the node's name, in hex.
func ReadToken(secret []byte, node string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(readDomain))
	m.Write([]byte(node))
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// Nonce lengths the agent accepts, in hex digits: the controller sends 32
// (16 random bytes).
const (
	minNonce = 32
	maxNonce = 128
)

// ErrSignature is a snapshot whose signature is missing or wrong.
var ErrSignature = errors.New("snapshot signature")

// Sign returns the HeaderSignature value for body answering nonce.
func Sign(secret []byte, nonce string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, nonce, body))
}

func mac(secret []byte, nonce string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(domain))
	m.Write([]byte(nonce))
	m.Write([]byte{'\n'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a HeaderSignature value; the error wraps ErrSignature.
func Verify(secret []byte, nonce string, body []byte, signature string) error {
	if signature == "" {
		return fmt.Errorf("%w: none: the agent is not set up with the shared secret (agent.token_file), or something else answers on its port", ErrSignature)
	}
	hexMAC, ok := strings.CutPrefix(signature, signaturePrefix)
	got, err := hex.DecodeString(hexMAC)
	if !ok || err != nil {
		return fmt.Errorf("%w: not %s<hex>", ErrSignature, signaturePrefix)
	}
	if !hmac.Equal(got, mac(secret, nonce, body)) {
		return fmt.Errorf("%w: wrong: the agent's agent.token_file is not the controller's agents.token_file, or something else answers on its port", ErrSignature)
	}
	return nil
}

// validNonce reports whether a nonce is hex of a sensible length.
func validNonce(n string) bool {
	if len(n) < minNonce || len(n) > maxNonce {
		return false
	}
	_, err := hex.DecodeString(n)
	return err == nil
}
