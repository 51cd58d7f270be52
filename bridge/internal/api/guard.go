package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
)

// LoopbackHosts are the Host names every API request may carry: the
// portal on the same host calls the bridge by one of them.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// guard is what every /v1 request passes before its handler:
//
//  1. its Host is one of hosts (421 otherwise), so a web page that makes a
//     browser on this host call the API through a name of its own (DNS
//     rebinding) gets nothing;
//  2. it carries Authorization: Bearer <the token> (401 otherwise),
//     compared in constant time;
//  3. a POST, or any request with a body, says Content-Type:
//     application/json (415 otherwise), so no HTML form can post to it.
//
// /healthz and /metrics do not pass it: probes and scrapers carry no
// token and call the host by any of its names.
type guard struct {
	token func() ([]byte, error)
	hosts []string // lower case, without port or brackets
	log   *slog.Logger
}

func newGuard(cfg Config) *guard {
	g := &guard{token: cfg.Token, log: cfg.Log}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	for _, h := range slices.Concat(LoopbackHosts, cfg.AllowedHosts) {
		if h = normalHost(h); h != "" && !slices.Contains(g.hosts, h) {
			g.hosts = append(g.hosts, h)
		}
	}
	return g
}

// normalHost lower-cases a host name and strips its port and brackets.
func normalHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host := normalHost(r.Host); !slices.Contains(g.hosts, host) {
			g.refuse(w, r, http.StatusMisdirectedRequest, "host", Error{
				Error: fmt.Sprintf("Host %q is not a name of this API", r.Host),
				Fix:   "call it by a name in api.allowed_hosts of the bridge's configuration, or by 127.0.0.1 on its own host"})
			return
		}
		if !g.authorized(w, r) {
			return
		}
		if r.Method == http.MethodPost || r.ContentLength != 0 { // -1: a body of unknown length
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				w.Header().Set("Accept-Post", "application/json")
				g.refuse(w, r, http.StatusUnsupportedMediaType, "content_type", Error{
					Error: fmt.Sprintf("Content-Type %q: the API reads JSON only", r.Header.Get("Content-Type")),
					Fix:   "send the body as JSON with Content-Type: application/json"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *guard) authorized(w http.ResponseWriter, r *http.Request) bool {
	if g.token == nil {
		g.refuse(w, r, http.StatusServiceUnavailable, "no_token", Error{Error: "the API has no token configured",
			Fix: "set api.token_file in the bridge's configuration"})
		return false
	}
	want, err := g.token()
	if err != nil {
		g.log.Error("API token unreadable: every API request is refused", "error", err)
		g.refuse(w, r, http.StatusServiceUnavailable, "no_token", Error{Error: "the API's token file cannot be used: see the bridge's log"})
		return false
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	// Hashes of equal length, so that the compare takes the same time
	// whatever the token's length and content.
	wh, gh := sha256.Sum256(want), sha256.Sum256([]byte(strings.TrimSpace(got)))
	if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(wh[:], gh[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata-bridge"`)
		g.refuse(w, r, http.StatusUnauthorized, "token", Error{Error: "missing or wrong bearer token",
			Fix: "send Authorization: Bearer <the content of api.token_file>"})
		return false
	}
	return true
}

func (g *guard) refuse(w http.ResponseWriter, r *http.Request, code int, reason string, e Error) {
	g.log.Warn("API request refused", "reason", reason, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", code)
	writeJSON(w, code, e)
}
