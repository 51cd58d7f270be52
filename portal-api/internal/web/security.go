package web

import (
	"net/http"
	"strings"
)

// CSP is the Content-Security-Policy of every response: scripts and
// styles only from the portal's own files (no inline script or style,
// no eval), no plugins, no <base>, no framing, forms only to the portal.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// ReferrerPolicy keeps the portal's paths (job ids, session ids) from
// other hosts.
const ReferrerPolicy = "same-origin"

// Secure sets the security headers on every response of next. A
// session's server behind the proxy (/v1/sessions/{id}/proxy/) sets its
// own, since JupyterLab and code-server need scripts this policy forbids;
// it is served for its own owner on the sessions' origin (sessions.origin),
// a host apart from the pages', never on the pages' own.
// reportURI, for tests only, adds a report-uri to the policy.
func Secure(next http.Handler, reportURI string) http.Handler {
	csp := CSP
	if reportURI != "" {
		csp += "; report-uri " + reportURI
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isProxy(r.URL.Path) {
			h := w.Header()
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", ReferrerPolicy)
		}
		next.ServeHTTP(w, r)
	})
}

func isProxy(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v1/sessions/")
	if !ok {
		return false
	}
	_, after, ok := strings.Cut(rest, "/")
	return ok && (after == "proxy" || strings.HasPrefix(after, "proxy/"))
}

// Mount serves the JSON API (/v1/, /healthz, /metrics) and the pages
// (everything else) from one handler, with the security headers on every
// response.
func Mount(api, pages http.Handler, reportURI string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/healthz", api)
	mux.Handle("/metrics", api)
	mux.Handle("/", Compress(pages))
	return Secure(mux, reportURI)
}
