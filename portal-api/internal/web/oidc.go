package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/strata-hpc/strata/portal-api/internal/auth"
)

// OIDC is the pages' sign-in through the site's identity provider: the
// authorization-code flow with PKCE (S256), its state and nonce checked,
// the ID token verified as the API verifies one (go-oidc).
type OIDC struct {
	Issuer, ClientID, ClientSecret string
	// RedirectURL is <the pages' public URL>/signin/callback, as
	// registered with the provider.
	RedirectURL string
	// UserClaim holds the Slurm user name.
	UserClaim string
	// HTTPClient reaches the provider; nil: one with a 10 s timeout.
	HTTPClient *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
}

var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

func (o *OIDC) client() *http.Client {
	if o.HTTPClient == nil {
		return &http.Client{Timeout: 10 * time.Second}
	}
	return o.HTTPClient
}

func (o *OIDC) config(ctx context.Context) (*oauth2.Config, *oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider == nil {
		// Discovery once; the key set keeps this context for later fetches.
		p, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), o.client()), o.Issuer)
		if err != nil {
			return nil, nil, fmt.Errorf("discovery of %s: %w", o.Issuer, err)
		}
		o.provider = p
	}
	return &oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL,
		Endpoint: o.provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile"}}, o.provider, nil
}

func random() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// oidcStart sends the browser to the provider. The state, nonce and PKCE
// verifier wait in a short-lived __Host- cookie (SameSite=Lax, so it comes
// back on the provider's top-level redirect).
func (h *Handler) oidcStart(w http.ResponseWriter, r *http.Request) {
	o := h.cfg.OIDC
	if o == nil {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "signin.oidc_off")
		return
	}
	conf, _, err := o.config(r.Context())
	if err != nil {
		h.log.Warn("identity provider unavailable", "issuer", o.Issuer, "error", err)
		h.problem(w, r, http.StatusServiceUnavailable, "error.unavailable.title", "signin.oidc_unavailable")
		return
	}
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	next := base64.RawURLEncoding.EncodeToString([]byte(localPath(r.URL.Query().Get("next"))))
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: strings.Join([]string{state, nonce, verifier, next}, "."), Path: "/",
		MaxAge: 600, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusSeeOther)
}

func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	o := h.cfg.OIDC
	if o == nil {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "signin.oidc_off")
		return
	}
	v := h.visitor(r)
	fail := func(code int, key, reason string, err error) {
		h.log.Info("OIDC sign-in refused", "reason", reason, "error", err)
		h.render(w, r, code, "signin", h.page(r, v, "signin.title", "", signinData{OIDC: true, Next: "/", Problem: key}))
	}
	c, err := r.Cookie(oidcCookie)
	// The flow's cookie is spent whatever the outcome.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if err != nil {
		fail(http.StatusBadRequest, "signin.oidc_failed", "no flow cookie", err)
		return
	}
	parts := strings.Split(c.Value, ".")
	var nextRaw []byte
	if len(parts) == 4 {
		nextRaw, err = base64.RawURLEncoding.Strict().DecodeString(parts[3])
	}
	// Only the spelling this handler wrote: encoding/base64 skips \r and
	// \n even in Strict mode.
	if len(parts) != 4 || err != nil || base64.RawURLEncoding.EncodeToString(nextRaw) != parts[3] {
		fail(http.StatusBadRequest, "signin.oidc_failed", "bad flow cookie", err)
		return
	}
	state, nonce, verifier := parts[0], parts[1], parts[2]
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		fail(http.StatusBadRequest, "signin.oidc_failed", "state does not match", nil)
		return
	}
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "signin.oidc_failed", "provider refused", fmt.Errorf("%s: %s", e, q.Get("error_description")))
		return
	}
	conf, p, err := o.config(r.Context())
	if err != nil {
		fail(http.StatusServiceUnavailable, "signin.oidc_unavailable", "discovery", err)
		return
	}
	ctx := oidc.ClientContext(r.Context(), o.client())
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		fail(http.StatusUnauthorized, "signin.oidc_failed", "code exchange", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: o.ClientID}).Verify(ctx, raw)
	if err != nil {
		fail(http.StatusUnauthorized, "signin.oidc_failed", "ID token", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		fail(http.StatusUnauthorized, "signin.oidc_failed", "nonce does not match", nil)
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		fail(http.StatusUnauthorized, "signin.oidc_failed", "claims", err)
		return
	}
	user, _ := claims[o.UserClaim].(string)
	if user == "" {
		// Many providers keep profile claims out of the ID token of a code
		// flow: ask the userinfo endpoint, for the same subject.
		info, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			fail(http.StatusUnauthorized, "signin.oidc_failed", "userinfo", err)
			return
		}
		if info.Subject != idt.Subject {
			fail(http.StatusUnauthorized, "signin.oidc_failed", "userinfo subject differs from the ID token's", nil)
			return
		}
		var more map[string]any
		if err := info.Claims(&more); err == nil {
			user, _ = more[o.UserClaim].(string)
		}
	}
	if !userName.MatchString(user) {
		fail(http.StatusForbidden, "signin.oidc_no_user", "claim "+o.UserClaim+" is not a user name", nil)
		return
	}
	if err := h.startSession(w, r, user, auth.ViaOIDC, v.lang); err != nil {
		h.log.Error("page session not started", "user", user, "error", err)
		h.problem(w, r, http.StatusInternalServerError, "error.internal.title", "error.internal")
		return
	}
	http.Redirect(w, r, localPath(string(nextRaw)), http.StatusSeeOther)
}
