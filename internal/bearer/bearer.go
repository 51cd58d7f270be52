// Package bearer holds an HTTP API to a bearer token: the content of a
// secret file (internal/secretfile) that every caller must send as
// "Authorization: Bearer <token>". A request without it, or with another,
// is answered 401 with a JSON body that says what to send, whatever its
// path, so that nothing, not even whether a path exists, is told to a
// caller without the token. The comparison takes the same time whatever
// the token sent.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
)

// Token returns the token of an Authorization header value of the bearer
// scheme, spelt as RFC 6750 (section 2.1) has it: "Bearer" in any case,
// one or more spaces, the token. A token is taken as it is sent, never
// trimmed: one with a space, a tab, a line break, another control
// character or a byte past ASCII in it (or after it) is no token, so a
// token has one spelling.
func Token(authorization string) (string, bool) {
	scheme, rest, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok := strings.TrimLeft(rest, " ")
	if tok == "" {
		return "", false
	}
	for i := range len(tok) {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return "", false
		}
	}
	return tok, true
}

// Matches reports whether an Authorization header value carries want as
// a bearer token (see Token). An empty want matches nothing.
func Matches(authorization string, want []byte) bool {
	if len(want) == 0 {
		return false
	}
	got, ok := Token(authorization)
	// Hashes of equal length, so that the compare takes the same time
	// whatever the token's length and content.
	wh, gh := sha256.Sum256(want), sha256.Sum256([]byte(got))
	return ok && subtle.ConstantTimeCompare(wh[:], gh[:]) == 1
}

// Header is the Authorization value that presents token.
func Header(token []byte) string { return "Bearer " + string(token) }

// Guard refuses every request that does not carry the token.
type Guard struct {
	// Token gives the token in force (a secretfile.File's Get); nil, or
	// an error, refuses every request with 503: an API whose token
	// cannot be read is closed, not open.
	Token func() ([]byte, error)
	// Realm names the API in WWW-Authenticate ("reclaimd").
	Realm string
	// Key is the configuration key of the token file, named in the hint
	// ("api.token_file of reclaimd.yaml").
	Key string
	// Fix replaces the hint of a 401 ("send Authorization: Bearer <the
	// content of Key>") where the token is not the file's content.
	Fix string
	// Log receives one line per refusal; nil: none.
	Log *slog.Logger
}

// Wrap serves next to the requests that carry the token.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Token == nil {
			g.refuse(w, r, http.StatusServiceUnavailable, "no_token", "the API has no token configured", "set "+g.Key)
			return
		}
		want, err := g.Token()
		if err != nil {
			if g.Log != nil {
				g.Log.Error("API token unreadable: every API request is refused", "error", err)
			}
			g.refuse(w, r, http.StatusServiceUnavailable, "no_token", "the API's token file cannot be used", "see the daemon's log for "+g.Key)
			return
		}
		if !Matches(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+g.Realm+`"`)
			fix := g.Fix
			if fix == "" {
				fix = "send Authorization: Bearer <the content of " + g.Key + ">"
			}
			g.refuse(w, r, http.StatusUnauthorized, "token", "missing or wrong bearer token", fix)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g Guard) refuse(w http.ResponseWriter, r *http.Request, code int, reason, msg, fix string) {
	if g.Log != nil {
		g.Log.Warn("API request refused", "reason", reason, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", code)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the hint's <...> read as written
	_ = enc.Encode(map[string]string{"error": msg, "fix": fix})
}
