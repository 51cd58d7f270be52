package render

import (
	"os/exec"
	"strings"
	"testing"
)

var shellQuoteCases = map[string]struct{ in, want string }{
	"plain name":        {"gpu1", "gpu1"},
	"label pair":        {"topology.strata.io/leaf-switch=leaf1", "topology.strata.io/leaf-switch=leaf1"},
	"empty":             {"", "''"},
	"command separator": {"gpu1;touch x", "'gpu1;touch x'"},
	"substitution":      {"$(touch x)", "'$(touch x)'"},
	"backquotes":        {"`touch x`", "'`touch x`'"},
	"single quote":      {"it's", `'it'\''s'`},
	"only a quote":      {"'", `''\'''`},
	"double quotes":     {`"a" b`, `'"a" b'`},
	"newline":           {"gpu1\ntouch x", "'gpu1\ntouch x'"},
	"glob and variable": {"*$HOME", "'*$HOME'"},
	"non-ASCII":         {"gpü1", "'gpü1'"},
	"leading dash":      {"-n", "-n"},
}

func TestShellQuote(t *testing.T) {
	for name, tc := range shellQuoteCases {
		t.Run(name, func(t *testing.T) {
			if got := shellQuote(tc.in); got != tc.want {
				t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestShellQuoteRoundTrip: the shell reads every quoted word back as the
// one word it was, and runs nothing in it.
func TestShellQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	for name, tc := range shellQuoteCases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(sh, "-c", "printf '%s|' "+shellQuote(tc.in)+" && echo $#")
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sh: %v", err)
			}
			if want := tc.in + "|0\n"; string(out) != want {
				t.Errorf("the shell read %q as %q, want %q", tc.in, out, want)
			}
		})
	}
	if out, _ := exec.Command("ls", "-A", dir).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("the shell ran a command from a quoted word: %s", out)
	}
}

// FuzzShellQuote: any bytes without NUL (which no shell word can hold)
// come back from the shell as themselves.
func FuzzShellQuote(f *testing.F) {
	for _, tc := range shellQuoteCases {
		f.Add(tc.in)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		f.Skip("no sh")
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return
		}
		out, err := exec.Command(sh, "-c", "printf '%s' "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Fatalf("the shell read %q as %q", s, out)
		}
	})
}
