package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// issuer is a local OIDC issuer: discovery and JWKS over httptest, with
// an RS256 key made here.
type issuer struct {
	*httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL, "jwks_uri": is.URL + "/keys", "authorization_endpoint": is.URL + "/auth",
			"token_endpoint": is.URL + "/token", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		pub := key.PublicKey
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
			"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
		}}})
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Close)
	return is
}

func (is *issuer) sign(t *testing.T, claims jwt.MapClaims, key *rsa.PrivateKey) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type tokens map[string]string

func (m tokens) LookupTokenID(_ context.Context, tok string) (string, int64, error) {
	if u, ok := m[tok]; ok {
		return u, int64(len(tok)), nil
	}
	return "", 0, errors.New("unknown")
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func request(auth, header, remote string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	if header != "" {
		r.Header.Set("X-Remote-User", header)
	}
	if remote != "" {
		r.RemoteAddr = remote
	}
	return r
}

// TestAuthenticate: a valid ID token, personal token or trusted proxy
// header names its user; expired, wrong audience, wrong issuer, bad
// signature, alg=none, HMAC, a missing claim and an untrusted header are
// all refused.
func TestAuthenticate(t *testing.T) {
	is := newIssuer(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Issuer: is.URL, Audience: "portal", UserClaim: "slurm_user",
		Tokens: tokens{"strata_pat_good": "carol"}, TokenPrefix: "strata_pat_",
		Proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}, Header: "X-Remote-User",
		Now: func() time.Time { return now }})
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": is.URL, "aud": "portal", "sub": "u-1", "slurm_user": "alice",
			"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	none := func() string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	hmac := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString([]byte("a shared secret of some length"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	tests := map[string]struct {
		req     *http.Request
		want    Identity
		wantErr string
	}{
		"valid ID token":  {req: request("Bearer "+is.sign(t, claims(nil), is.key), "", ""), want: Identity{User: "alice", Via: ViaOIDC}},
		"expired":         {req: request("Bearer "+is.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }), is.key), "", ""), wantErr: "not valid"},
		"wrong audience":  {req: request("Bearer "+is.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "someone-else" }), is.key), "", ""), wantErr: "not valid"},
		"wrong issuer":    {req: request("Bearer "+is.sign(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), is.key), "", ""), wantErr: "not valid"},
		"bad signature":   {req: request("Bearer "+is.sign(t, claims(nil), other), "", ""), wantErr: "not valid"},
		"alg none":        {req: request("Bearer "+none, "", ""), wantErr: "not valid"},
		"HMAC":            {req: request("Bearer "+hmac, "", ""), wantErr: "not valid"},
		"no user claim":   {req: request("Bearer "+is.sign(t, claims(func(c jwt.MapClaims) { delete(c, "slurm_user") }), is.key), "", ""), wantErr: "slurm_user claim"},
		"odd user claim":  {req: request("Bearer "+is.sign(t, claims(func(c jwt.MapClaims) { c["slurm_user"] = "al ice\r\n" }), is.key), "", ""), wantErr: "slurm_user claim"},
		"garbage":         {req: request("Bearer abc.def.ghi", "", ""), wantErr: "not valid"},
		"basic auth":      {req: request("Basic YWxpY2U6eA==", "", ""), wantErr: "not a bearer token"},
		"personal token":  {req: request("Bearer strata_pat_good", "", ""), want: Identity{User: "carol", Via: ViaToken, TokenID: 15}},
		"unknown token":   {req: request("Bearer strata_pat_bad", "", ""), wantErr: "personal token is not valid"},
		"token, NBSP":     {req: request("Bearer strata_pat_good\u00a0", "", ""), wantErr: "not a bearer token"},
		"token, tab":      {req: request("Bearer \tstrata_pat_good", "", ""), wantErr: "not a bearer token"},
		"token, LF":       {req: request("Bearer strata_pat_good\n", "", ""), wantErr: "not a bearer token"},
		"two spaces":      {req: request("Bearer  strata_pat_good", "", ""), want: Identity{User: "carol", Via: ViaToken, TokenID: 15}},
		"trusted proxy":   {req: request("", "dave", "10.0.0.5:4000"), want: Identity{User: "dave", Via: ViaProxy}},
		"untrusted proxy": {req: request("", "dave", "10.0.0.6:4000"), wantErr: "not a trusted proxy"},
		"proxy odd user":  {req: request("", "da ve", "10.0.0.5:4000"), wantErr: "not a user name"},
		"bearer wins":     {req: request("Bearer strata_pat_good", "dave", "10.0.0.5:4000"), want: Identity{User: "carol", Via: ViaToken, TokenID: 15}},
		"nothing":         {req: request("", "", ""), wantErr: "no credentials"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := a.Authenticate(tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Authenticate = %+v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Authenticate = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestClientAddr: the address a request comes from is the peer's, or,
// from a trusted proxy, the first address of X-Forwarded-For from the
// right that is not a trusted proxy; a client cannot choose it.
func TestClientAddr(t *testing.T) {
	a := New(Config{Proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}, Header: "X-Remote-User"})
	for name, tc := range map[string]struct {
		remote string
		xff    []string
		want   string
	}{
		"direct":                         {remote: "192.0.2.7:5000", want: "192.0.2.7"},
		"direct with a forged header":    {remote: "192.0.2.7:5000", xff: []string{"198.51.100.1"}, want: "192.0.2.7"},
		"through the proxy":              {remote: "10.0.0.5:4000", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		"a client's own entry is passed": {remote: "10.0.0.5:4000", xff: []string{"203.0.113.9, 198.51.100.1"}, want: "198.51.100.1"},
		"two proxies":                    {remote: "10.0.0.5:4000", xff: []string{"198.51.100.1, 10.0.0.3"}, want: "198.51.100.1"},
		"two headers":                    {remote: "10.0.0.5:4000", xff: []string{"203.0.113.9", "198.51.100.1"}, want: "198.51.100.1"},
		"the proxy without a header":     {remote: "10.0.0.5:4000", want: "10.0.0.5"},
		"a malformed hop":                {remote: "10.0.0.5:4000", xff: []string{"198.51.100.1, junk"}, want: "10.0.0.5"},
		"IPv4 in IPv6":                   {remote: "[::ffff:192.0.2.7]:5000", want: "192.0.2.7"},
	} {
		r := request("", "", tc.remote)
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := a.ClientAddr(r); got.String() != tc.want {
			t.Errorf("%s: ClientAddr = %s, want %s", name, got, tc.want)
		}
	}
}

// TestIssuerDown: an issuer that does not answer is "unavailable", not a
// bad token, and the portal keeps trying.
func TestIssuerDown(t *testing.T) {
	is := newIssuer(t)
	url := is.URL
	is.Close()
	clock := now
	a := New(Config{Issuer: url, Audience: "portal", UserClaim: "sub", Now: func() time.Time { return clock }})
	_, err := a.Authenticate(request("Bearer x.y.z", "", ""))
	if !IsUnavailable(err) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	// A personal-token-less config refuses a prefixed token as OIDC; no
	// issuer configured at all is a plain refusal.
	b := New(Config{})
	if _, err := b.Authenticate(request("Bearer x.y.z", "", "")); err == nil || IsUnavailable(err) {
		t.Errorf("no issuer: %v", err)
	}
}
