package bearer

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGuard: only the exact token passes; every other request, whatever
// its path, is 401 with a hint (503 when the token cannot be read).
func TestGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/known" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("secret data"))
	})
	token := func() ([]byte, error) { return []byte("s3cret-token"), nil }
	for name, tc := range map[string]struct {
		token    func() ([]byte, error)
		path     string
		header   string
		wantCode int
		wantFix  string
	}{
		"right token":            {token, "/v1/known", "Bearer s3cret-token", 200, ""},
		"scheme in another case": {token, "/v1/known", "bearer s3cret-token", 200, ""},
		"right token, unknown":   {token, "/v1/unknown", "Bearer s3cret-token", 404, ""},
		"no header":              {token, "/v1/known", "", 401, "send Authorization: Bearer <the content of api.token_file>"},
		"no header, unknown":     {token, "/v1/unknown", "", 401, "send Authorization"},
		"wrong token":            {token, "/v1/known", "Bearer s3cret-tokeN", 401, "send Authorization"},
		"token as prefix":        {token, "/v1/known", "Bearer s3cret-token-and-more", 401, "send Authorization"},
		"basic scheme":           {token, "/v1/known", "Basic s3cret-token", 401, "send Authorization"},
		"bare token":             {token, "/v1/known", "s3cret-token", 401, "send Authorization"},
		"empty token file":       {func() ([]byte, error) { return nil, nil }, "/v1/known", "Bearer ", 401, "send Authorization"},
		"unreadable token":       {func() ([]byte, error) { return nil, errors.New("mode 0644") }, "/v1/known", "Bearer s3cret-token", 503, "see the daemon's log"},
		"no token configured":    {nil, "/v1/known", "Bearer s3cret-token", 503, "set api.token_file"},
	} {
		t.Run(name, func(t *testing.T) {
			h := Guard{Token: tc.token, Realm: "test", Key: "api.token_file"}.Wrap(ok)
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)
			if rr.Code != tc.wantCode {
				t.Fatalf("status %d %s, want %d", rr.Code, rr.Body, tc.wantCode)
			}
			if tc.wantFix == "" {
				return
			}
			if strings.Contains(rr.Body.String(), "secret data") {
				t.Fatal("refused request got the data")
			}
			var body struct{ Error, Fix string }
			if err := json.Unmarshal(rr.Body.Bytes(), &body); err != nil || !strings.Contains(body.Fix, tc.wantFix) {
				t.Errorf("body %s (%v), want fix containing %q", rr.Body, err, tc.wantFix)
			}
			if tc.wantCode == 401 && rr.Header().Get("WWW-Authenticate") != `Bearer realm="test"` {
				t.Errorf("WWW-Authenticate = %q", rr.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestToken: a bearer token is taken only as RFC 6750 spells it, never
// trimmed of other whitespace.
func TestToken(t *testing.T) {
	for h, want := range map[string]string{
		"Bearer tok":        "tok",
		"bearer tok":        "tok",
		"BEARER  tok":       "tok",
		"Bearer a.b-c_~+/=": "a.b-c_~+/=",
		"Bearer tok ":       "",
		"Bearer tok\n":      "",
		"Bearer tok\r\n":    "",
		"Bearer \ttok":      "",
		"Bearer tok\t":      "",
		"Bearer to\nk":      "",
		"Bearer to k":       "",
		"Bearer tok\u00a0":  "",
		"Bearer tok\u0085":  "",
		"Bearer tok\x00":    "",
		"Bearer\ttok":       "",
		"Bearer ":           "",
		"Bearer":            "",
		"Basic tok":         "",
		"tok":               "",
	} {
		if got, ok := Token(h); got != want || ok != (want != "") {
			t.Errorf("Token(%q) = %q, %v; want %q", h, got, ok, want)
		}
		if Matches(h, []byte("tok")) != (want == "tok") {
			t.Errorf("Matches(%q, tok) = %v", h, want != "tok")
		}
	}
}

// FuzzMatches: no header but the exact one matches.
func FuzzMatches(f *testing.F) {
	for _, s := range []string{"Bearer tok", "bearer tok", "Bearer  tok ", "Bearer tok2", "Basic tok", "tok", "", "Bearer ", "Bearer tok\n", "Bearer \ttok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		scheme, got, _ := strings.Cut(h, " ")
		want := strings.EqualFold(scheme, "Bearer") && strings.TrimLeft(got, " ") == "tok"
		if Matches(h, []byte("tok")) != want {
			t.Errorf("Matches(%q) = %v, want %v", h, !want, want)
		}
		if Matches(h, nil) {
			t.Errorf("Matches(%q, nil) = true", h)
		}
	})
}
