package sessionproxy

import (
	"strings"
	"testing"
)

// FuzzSessionID: an accepted path is Prefix + id + "/proxy" or
// "/proxy/..." with an id of letters, digits, '-' and '_' only, so no id
// carries a '/', a '.' or an escape into a lookup. Seeded from
// TestSessionID's paths.
func FuzzSessionID(f *testing.F) {
	for _, s := range []string{"/v1/sessions/abc-1_2/proxy/", "/v1/sessions/abc/proxy", "/v1/sessions/abc/proxyx", "/v1/sessions//proxy/",
		"/v1/sessions/a.b/proxy/", "/v1/sessions/..%2f/proxy/", "/v2/sessions/abc/proxy/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		id, ok := sessionID(path)
		if !ok {
			return
		}
		if id == "" || strings.ContainsAny(id, "/.%\\") || !strings.HasPrefix(path, Prefix+id+"/proxy") {
			t.Fatalf("sessionID(%q) = %q", path, id)
		}
		if rest := strings.TrimPrefix(path, Prefix+id+"/proxy"); rest != "" && rest[0] != '/' {
			t.Fatalf("sessionID(%q) accepted a path past /proxy without a slash", path)
		}
	})
}
