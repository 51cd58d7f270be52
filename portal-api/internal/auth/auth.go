// Package auth says who a portal API request comes from: an OIDC ID token
// verified against the issuer's keys (github.com/coreos/go-oidc: issuer,
// audience, expiry and an RS256/ES256 signature are checked; alg=none and
// HMAC tokens are refused), a personal API token (looked up by its hash),
// or a user header set by a reverse proxy, believed only on a connection
// from one of the configured proxy addresses. The Slurm user name is the
// configured claim of the ID token, as slurm.conf's userclaimfield.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/strata-hpc/strata/internal/bearer"
)

// Ways a caller is known.
const (
	ViaOIDC  = "oidc"
	ViaToken = "token"
	ViaProxy = "proxy"
)

// Identity is who a request comes from.
type Identity struct {
	User string
	Via  string
	// TokenID is the personal token's id (Via ViaToken): what a
	// credential made from the request keeps, so that it ends with the
	// token.
	TokenID int64
}

// Error is a refused identity: the message is safe to show the caller.
type Error struct {
	Msg  string
	Hint string
	// Unavailable: the issuer could not be reached, not a bad token.
	Unavailable bool
	Err         error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// TokenLookup finds the user and the id of a valid personal token.
type TokenLookup interface {
	LookupTokenID(ctx context.Context, token string) (string, int64, error)
}

// Config configures an Authenticator.
type Config struct {
	// Issuer and Audience of OIDC ID tokens; empty Issuer: no OIDC.
	Issuer, Audience string
	// UserClaim holds the Slurm user name.
	UserClaim string
	// Tokens looks up personal tokens (their prefix is TokenPrefix).
	Tokens      TokenLookup
	TokenPrefix string
	// Proxies may set Header; empty: the header is never believed.
	Proxies []netip.Prefix
	Header  string
	// HTTPClient reaches the issuer; nil: a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock tokens are checked against; nil: time.Now.
	Now func() time.Time
}

// Authenticator identifies requests.
type Authenticator struct {
	cfg Config

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	failedAt time.Time // last failed discovery: retried after retryAfter
	lastErr  error
}

// retryAfter spaces out discoveries of an issuer that did not answer.
const retryAfter = 10 * time.Second

// New makes an Authenticator. The issuer's discovery document is read
// at the first ID token, and again until it is read once, so the portal
// starts while the issuer is down.
func New(cfg Config) *Authenticator {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authenticator{cfg: cfg}
}

var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// Authenticate identifies r.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := bearer.Token(h)
		if !ok {
			return Identity{}, &Error{Msg: "the Authorization header is not a bearer token", Hint: "send Authorization: Bearer <token>, the token as it was given: no other space, tab or line break"}
		}
		if a.cfg.Tokens != nil && a.cfg.TokenPrefix != "" && strings.HasPrefix(tok, a.cfg.TokenPrefix) {
			user, id, err := a.cfg.Tokens.LookupTokenID(r.Context(), tok)
			if err != nil {
				return Identity{}, &Error{Msg: "the personal token is not valid", Hint: "make a new one with strata-portal-api token create", Err: err}
			}
			return Identity{User: user, Via: ViaToken, TokenID: id}, nil
		}
		return a.oidc(r.Context(), tok)
	}
	if len(a.cfg.Proxies) > 0 && a.cfg.Header != "" {
		if user := r.Header.Get(a.cfg.Header); user != "" {
			if !a.fromProxy(r.RemoteAddr) {
				return Identity{}, &Error{Msg: "a user header from an address that is not a trusted proxy", Hint: "authenticate with a bearer token"}
			}
			if !userName.MatchString(user) {
				return Identity{}, &Error{Msg: "the proxy's user header is not a user name"}
			}
			return Identity{User: user, Via: ViaProxy}, nil
		}
	}
	return Identity{}, &Error{Msg: "no credentials", Hint: "send Authorization: Bearer <token>: an ID token of the site's login, or a personal token"}
}

func (a *Authenticator) fromProxy(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	return a.trusted(ap.Addr().Unmap())
}

func (a *Authenticator) trusted(addr netip.Addr) bool {
	for _, p := range a.cfg.Proxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// ClientAddr is the address a request comes from, by the rule that
// believes the user header: the connection's peer, unless the peer is a
// trusted proxy, whose X-Forwarded-For is then read from its right end
// (the hop the proxy added) past every trusted proxy to the first address
// that is not one. A header from any other peer is ignored, so a client
// cannot choose its address; a malformed entry stops the walk at the
// last address believed.
func (a *Authenticator) ClientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	addr := ap.Addr().Unmap()
	if !a.trusted(addr) {
		return addr
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" {
			continue
		}
		next, err := netip.ParseAddr(h)
		if err != nil {
			return addr
		}
		addr = next.Unmap()
		if !a.trusted(addr) {
			return addr
		}
	}
	return addr
}

func (a *Authenticator) oidc(ctx context.Context, raw string) (Identity, error) {
	if a.cfg.Issuer == "" {
		return Identity{}, &Error{Msg: "the bearer token is not a personal token, and no OIDC issuer is configured"}
	}
	v, err := a.getVerifier(ctx)
	if err != nil {
		return Identity{}, &Error{Msg: "the OIDC issuer cannot be reached", Hint: "try again shortly", Unavailable: true, Err: err}
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return Identity{}, &Error{Msg: "the ID token is not valid", Hint: "log in again", Err: err}
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, &Error{Msg: "the ID token's claims do not decode", Err: err}
	}
	user, _ := claims[a.cfg.UserClaim].(string)
	if !userName.MatchString(user) {
		return Identity{}, &Error{Msg: fmt.Sprintf("the ID token's %s claim is not a user name", a.cfg.UserClaim),
			Hint: "ask the site's admins to map the login to a Slurm user"}
	}
	return Identity{User: user, Via: ViaOIDC}, nil
}

func (a *Authenticator) getVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	if !a.failedAt.IsZero() && a.cfg.Now().Sub(a.failedAt) < retryAfter {
		return nil, a.lastErr
	}
	// The keys are fetched later, with the request's context gone: the
	// key set keeps this context.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), a.cfg.HTTPClient)
	p, err := oidc.NewProvider(pctx, a.cfg.Issuer)
	if err != nil {
		a.failedAt, a.lastErr = a.cfg.Now(), fmt.Errorf("discovery of %s: %w", a.cfg.Issuer, err)
		return nil, a.lastErr
	}
	a.verifier = p.Verifier(&oidc.Config{ClientID: a.cfg.Audience, Now: a.cfg.Now,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.PS256}})
	return a.verifier, nil
}

// IsUnavailable reports whether err says the issuer could not be reached.
func IsUnavailable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Unavailable
}
