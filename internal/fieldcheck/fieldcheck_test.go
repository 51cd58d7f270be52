package fieldcheck

import (
	"strings"
	"testing"
)

func TestHTTPURL(t *testing.T) {
	for value, want := range map[string]string{
		"http://127.0.0.1:6820":          "",
		"https://slurm.example.org/rest": "",
		"http://[::1]:6820":              "",
		"file:///etc/passwd":             "not an http:// or https:// URL",
		"127.0.0.1:6820":                 "not an http:// or https:// URL",
		"/run/slurmrestd.sock":           "not an http:// or https:// URL",
		"http//127.0.0.1":                "not an http:// or https:// URL",
		"http:127.0.0.1":                 "not an http:// or https:// URL",
		"gopher://x":                     "not an http:// or https:// URL",
		"http://:6820":                   "has no host name",
		"https://user:hunter2@host/hook": "holds user information",
		"http://exa mple.org":            "not an http:// or https:// URL",
		"":                               "not an http:// or https:// URL",
	} {
		err := HTTPURL(value)
		switch {
		case want == "" && err != nil:
			t.Errorf("HTTPURL(%q) = %v", value, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("HTTPURL(%q) = %v, want %q", value, err, want)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("HTTPURL(%q) quotes the password: %v", value, err)
		}
	}
}

// FuzzHTTPURL: whatever is accepted has an http(s) scheme and a host.
func FuzzHTTPURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:6820", "file:///etc/passwd", "https://u:p@h/x", "http://:1", "127.0.0.1:6820", "http://[::1]:1/a?b#c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if HTTPURL(s) == nil && !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") &&
			!strings.HasPrefix(strings.ToLower(s), "http") {
			t.Errorf("HTTPURL(%q) accepted", s)
		}
	})
}
